"""Folders in agent files, as Letta's `.af` carries them: `sources` (folders), `files` (each with its parsed text)
and each agent's `files_agents` (its open and closed views) and `source_ids`.

Export writes the folders attached to the agent, their processed files with their text, and the agent's views.
Import reuses a folder of the same name the owner already has (as Letta does) or creates it, stores each file's
text as a pending file whose ingest is queued (chunked and embedded again in the background: the file carries no
vectors, and provider calls have no place in the import's transaction), attaches the folders with the file tools,
and restores which files are open and the lines they show. Until its ingest completes, an imported file can
already be opened and grepped (its text is stored); semantic search finds it afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone

from core.agents.agentfile import checks as c
from core.agents.agentfile import normalize as n
from core.agents.agentfile.model import (
    MAX_FOLDER_FILE_TEXT,
    MAX_FOLDER_FILES,
    MAX_NAME,
    MAX_SOURCES,
    AgentFileError,
    ParsedFile,
    ParsedFileView,
    ParsedFolderFile,
    ParsedSource,
)
from core.models import Agent, Organization
from memory.files import types
from memory.files.ingest import folder_embedding_handle
from memory.files.tasks import file_ingest_task
from memory.models import AgentFolder, FileAgent, FileStatus, Folder, FolderFile
from tools.services import file_tools_sync

# --------------------------------------------------------------------------- parse


def sources_parse(d: dict, warn: list[str]) -> tuple[dict[str, ParsedSource], dict[str, ParsedFolderFile]]:
    """The file's folders and files by key; refuses a file naming a folder the file lacks."""
    sources: dict[str, ParsedSource] = {}
    keys: set[str] = set()
    names: set[str] = set()
    for i, raw in enumerate(c.lst(d.get("sources"), "sources", limit=MAX_SOURCES)):
        p = c.join("sources", i)
        s = c.obj(raw, p)
        key = c.unique_key(s.get("id"), c.join(p, "id"), keys)
        name = c.string(s.get("name"), c.join(p, "name"), limit=200, optional=False).strip()
        if not name or "/" in name:
            raise AgentFileError(c.join(p, "name"), "a folder's name is 1-200 characters without '/'")
        if name in names:
            raise AgentFileError(c.join(p, "name"), f"two folders are named {name!r}")
        names.add(name)
        handle, cfg = n.embedding(s.get("embedding_config"), c.join(p, "embedding_config"))
        chunk = c.integer(s.get("embedding_chunk_size"), c.join(p, "embedding_chunk_size"), low=50, high=8000)
        sources[key] = ParsedSource(
            key=key,
            name=name,
            description=c.string(s.get("description"), c.join(p, "description"), limit=10_000),
            instructions=c.string(s.get("instructions"), c.join(p, "instructions"), limit=10_000),
            metadata=dict(c.obj(s.get("metadata") or {}, c.join(p, "metadata"))),
            embedding=c.string(s.get("embedding"), c.join(p, "embedding"), limit=MAX_NAME) or handle,
            embedding_chunk_size=chunk or _chunk_size(cfg.get("embedding_chunk_size")),
        )
    files: dict[str, ParsedFolderFile] = {}
    for i, raw in enumerate(c.lst(d.get("files"), "files", limit=MAX_FOLDER_FILES)):
        p = c.join("files", i)
        f = c.obj(raw, p)
        key = c.unique_key(f.get("id"), c.join(p, "id"), keys)
        source_key = c.string(f.get("source_id"), c.join(p, "source_id"), limit=200, optional=False)
        if source_key not in sources:
            raise AgentFileError(c.join(p, "source_id"), f"references source {source_key!r}, which is not in the file")
        stored = c.string(f.get("file_name"), c.join(p, "file_name"), limit=500)
        original = c.string(f.get("original_file_name"), c.join(p, "original_file_name"), limit=500)
        name = _file_name(stored or original, sources[source_key].name)
        if not name:
            raise AgentFileError(c.join(p, "file_name"), "a file needs a name")
        content = c.string(f.get("content"), c.join(p, "content"), limit=MAX_FOLDER_FILE_TEXT)
        if not content.strip():
            warn.append(f"File '{name}' has no text in the agent file; it was left out.")
            continue
        files[key] = ParsedFolderFile(
            key=key,
            source_key=source_key,
            file_name=name,
            file_type=c.string(f.get("file_type"), c.join(p, "file_type"), limit=200),
            content=content,
        )
    return sources, files


def _chunk_size(value: int | None) -> int | None:
    return value if value is not None and 50 <= value <= 8000 else None


def _file_name(name: str, folder: str) -> str:
    """The name inside its folder: Letta stores "<folder>/<name>"."""
    name = name.removeprefix(f"{folder}/").replace("\\", "/")
    return name.rsplit("/", 1)[-1].strip()[:200]


def agent_folders_parse(
    d: dict, path: str, sources: dict[str, ParsedSource], files: dict[str, ParsedFolderFile]
) -> tuple[tuple[str, ...], tuple[ParsedFileView, ...]]:
    """An agent's attached folders (`source_ids`, `folder_ids`, and the folders of its views) and its file views."""
    attached: list[str] = []
    for refs in ("source_ids", "folder_ids"):
        for i, ref in enumerate(c.lst(d.get(refs), c.join(path, refs), limit=MAX_SOURCES)):
            p = c.join(c.join(path, refs), i)
            key = c.string(ref, p, limit=200, optional=False)
            if key not in sources:
                raise AgentFileError(p, f"references source {key!r}, which is not in the file")
            attached.append(key)
    views: list[ParsedFileView] = []
    vp = c.join(path, "files_agents")
    for i, raw in enumerate(c.lst(d.get("files_agents"), vp, limit=MAX_FOLDER_FILES)):
        p = c.join(vp, i)
        v = c.obj(raw, p)
        file_key = c.string(v.get("file_id"), c.join(p, "file_id"), limit=200, optional=False)
        if file_key not in files:
            continue  # a file left out (no text) or absent: its view goes with it
        start = c.integer(v.get("start_line"), c.join(p, "start_line"), low=1, high=10_000_000)
        end = c.integer(v.get("end_line"), c.join(p, "end_line"), low=1, high=10_000_000)
        if start is not None and end is not None and end < start:
            raise AgentFileError(c.join(p, "end_line"), "the last line comes before the first")
        is_open = c.boolean(v.get("is_open"), c.join(p, "is_open"))
        views.append(ParsedFileView(file_key=file_key, is_open=is_open, start_line=start, end_line=end))
        attached.append(files[file_key].source_key)
    return tuple(dict.fromkeys(attached)), tuple(views)


# --------------------------------------------------------------------------- export


def folders_export(*, agent: Agent) -> dict[str, Any]:
    """The agent's folders, their processed files with their text and the agent's views, with file-local ids:
    `{"sources", "files", "files_agents", "source_ids"}`."""
    folders = list(Folder.objects.filter(agentfolder__agent=agent).order_by("agentfolder__created_at", "id"))
    source_keys = {f.id: f"source-{i}" for i, f in enumerate(folders)}
    names = {f.id: f.name for f in folders}
    rows = list(
        FolderFile.objects.filter(folder__in=folders, status=FileStatus.COMPLETED)
        .defer("raw")
        .order_by("created_at", "id")
    )
    file_keys = {f.id: f"file-{i}" for i, f in enumerate(rows)}
    views = FileAgent.objects.filter(agent=agent, file_id__in=file_keys).order_by("created_at", "id")
    return {
        "sources": [_source(f, source_keys[f.id]) for f in folders],
        "files": [_file(f, file_keys[f.id], source_keys[f.folder_id], names[f.folder_id]) for f in rows],
        "files_agents": [
            {
                "id": f"file_agent-{i}",
                "agent_id": "agent-0",
                "file_id": file_keys[v.file_id],
                "source_id": source_keys[v.folder_id],
                "file_name": f"{names[v.folder_id]}/{next(f.file_name for f in rows if f.id == v.file_id)}",
                "is_open": v.is_open,
                "visible_content": None,
                "last_accessed_at": v.last_accessed_at.isoformat() if v.last_accessed_at else None,
                "start_line": v.start_line,
                "end_line": v.end_line,
            }
            for i, v in enumerate(views)
        ],
        "source_ids": [source_keys[f.id] for f in folders],
    }


def _source(folder: Folder, key: str) -> dict[str, Any]:
    handle = folder_embedding_handle(folder)
    provider, _, model = handle.partition("/")
    return {
        "id": key,
        "name": folder.name,
        "description": folder.description or None,
        "instructions": folder.instructions or None,
        "metadata": folder.metadata or None,
        "embedding": folder.embedding or None,
        "embedding_chunk_size": folder.embedding_chunk_size,
        "embedding_config": (
            {
                "embedding_endpoint_type": provider or "openai",
                "embedding_model": model or handle,
                "embedding_dim": 0,
                "embedding_chunk_size": folder.embedding_chunk_size,
                "handle": handle,
            }
            if handle
            else None
        ),
    }


def _file(file: FolderFile, key: str, source_key: str, folder_name: str) -> dict[str, Any]:
    return {
        "id": key,
        "source_id": source_key,
        "file_name": f"{folder_name}/{file.file_name}",  # as Letta stores it
        "original_file_name": file.original_file_name,
        "file_path": None,
        "file_type": file.mime_type,
        "file_size": file.file_size,
        "file_creation_date": None,
        "file_last_modified_date": None,
        "processing_status": file.status,
        "error_message": None,
        "total_chunks": file.total_chunks,
        "chunks_embedded": file.chunks_embedded,
        "content": file.content,
    }


# --------------------------------------------------------------------------- import


@dataclass
class ImportedFolders:
    folders: dict[str, Folder] = field(default_factory=dict)  # by the file's source key
    files: dict[str, FolderFile] = field(default_factory=dict)  # by the file's file key


def folders_import(*, owner: Organization, parsed: ParsedFile, warnings: list[str]) -> ImportedFolders:
    """Create (or reuse by name) the folders the file's agents use and their files, each file pending with its text
    and its ingest queued (committed with the caller's transaction); returns the file rows by key."""
    used = dict.fromkeys(k for a in parsed.agents for k in a.source_keys)
    imported = ImportedFolders()
    folders = imported.folders
    for key in used:
        s = parsed.sources[key]
        folder = Folder.objects.filter(owner=owner, name=s.name).first()
        if folder is not None:
            warnings.append(f"Folder '{s.name}' already exists; the agent was attached to it.")
        else:
            folder = Folder.objects.create(
                owner=owner,
                name=s.name,
                description=s.description,
                instructions=s.instructions,
                metadata=s.metadata,
                embedding=s.embedding,
                embedding_chunk_size=s.embedding_chunk_size or 300,
            )
        folders[key] = folder
    rows = imported.files
    for key, f in parsed.files.items():
        folder = folders.get(f.source_key)
        if folder is None:
            continue
        existing = folder.files.filter(file_name=f.file_name).defer("raw").first()
        if existing is not None:
            rows[key] = existing
            if existing.content != f.content:
                warnings.append(f"File '{folder.name}/{f.file_name}' already exists; the existing file was kept.")
            continue
        mime = types.mime_for(file_name=f.file_name, content_type=f.file_type) or "text/plain"
        rows[key] = FolderFile.objects.create(
            owner=owner,
            folder=folder,
            file_name=f.file_name,
            original_file_name=f.file_name,
            mime_type=mime,
            file_size=len(f.content.encode("utf-8")),
            content=f.content,
        )
        file_ingest_task.enqueue(file_id=rows[key].id)  # a pool's dispatcher claims it once the import commits
    return imported


def folders_attach(
    *, agent: Agent, source_keys: tuple[str, ...], views: tuple[ParsedFileView, ...], imported: ImportedFolders
) -> None:
    """Attach the imported folders to the new agent with the file tools, and give it its views of their files (open
    as the agent file had them, every other file of the folders closed)."""
    folders = [imported.folders[k] for k in source_keys if k in imported.folders]
    if not folders:
        return
    AgentFolder.objects.bulk_create([AgentFolder(agent=agent, folder=f) for f in folders])
    file_tools_sync(agent=agent, attached=True)
    now = timezone.now()
    ids = {f.id for f in folders}
    states = {}
    for v in views:
        file = imported.files.get(v.file_key)
        if file is not None and file.folder_id in ids:
            states[file.id] = FileAgent(
                agent=agent,
                file=file,
                folder_id=file.folder_id,
                is_open=v.is_open,
                start_line=v.start_line if v.is_open else None,
                end_line=v.end_line if v.is_open else None,
                last_accessed_at=now,
            )
    others = [f for f in imported.files.values() if f.folder_id in ids]
    others += FolderFile.objects.filter(folder__in=folders, status=FileStatus.COMPLETED).defer("raw", "content")
    for file in others:
        states.setdefault(
            file.id, FileAgent(agent=agent, file=file, folder_id=file.folder_id, is_open=False, last_accessed_at=now)
        )
    FileAgent.objects.bulk_create(list(states.values()))
