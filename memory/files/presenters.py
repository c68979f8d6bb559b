"""Folders, files, an agent's views of its files and a folder's chunks in Letta's shapes (REST and the IDE)."""

from memory.files import selectors, services
from memory.files.ingest import folder_embedding_handle
from memory.files.lines import cut, window
from memory.models import FileAgent, Folder, FolderFile, Passage
from memory.presenters import passage_out


def folder_out(folder: Folder) -> dict:
    """Letta's Folder; its embedding_config names the model files are embedded with ("" when full text only)."""
    handle = folder_embedding_handle(folder)
    provider, _, model = handle.partition("/")
    return {
        "id": folder.id,
        "name": folder.name,
        "description": folder.description or None,
        "instructions": folder.instructions or None,
        "metadata": folder.metadata or {},
        "embedding_config": {
            "embedding_endpoint_type": provider or "openai",
            "embedding_model": model or handle,
            "embedding_dim": 0,
            "embedding_chunk_size": folder.embedding_chunk_size,
            "handle": handle or None,
        },
        "organization_id": folder.owner_id,
        "created_at": folder.created_at,
        "updated_at": folder.updated_at,
    }


def file_out(file: FolderFile, *, folder_name: str | None = None, include_content: bool = False) -> dict:
    """Letta's FileMetadata; `folder_name` prefixes the name as Letta's upload response does."""
    return {
        "id": file.id,
        "source_id": file.folder_id,
        "folder_id": file.folder_id,
        "file_name": f"{folder_name}/{file.file_name}" if folder_name else file.file_name,
        "original_file_name": file.original_file_name,
        "file_type": file.mime_type,
        "file_size": file.file_size,
        "processing_status": file.status,
        "error_message": file.error_message or None,
        "total_chunks": file.total_chunks,
        "chunks_embedded": file.chunks_embedded,
        "content": file.content if include_content else None,
        "organization_id": file.owner_id,
        "created_at": file.created_at,
        "updated_at": file.updated_at,
    }


def agent_file_out(state: FileAgent, char_limit: int) -> dict:
    visible = None
    if state.is_open:
        lines = selectors.file_lines(state.file)
        visible = cut(window(lines, start=state.start_line, end=state.end_line), char_limit)
    return {
        "id": state.id,
        "file_id": state.file_id,
        "file_name": services.context_name(state),
        "folder_id": state.folder_id,
        "folder_name": state.folder.name,
        "is_open": state.is_open,
        "last_accessed_at": state.last_accessed_at,
        "visible_content": visible,
        "start_line": state.start_line,
        "end_line": state.end_line,
    }


def folder_passage_out(passage: Passage) -> dict:
    """Letta's Passage of a folder's file: an archival passage's shape, with its folder and file instead of an
    agent (vectors are not sent)."""
    return {
        **passage_out(passage),
        "source_id": passage.folder_id,
        "file_id": passage.file_id,
        "file_name": passage.file.file_name,
        "agent_id": None,
        "organization_id": passage.owner_id,
    }
