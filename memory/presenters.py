"""Blocks and passages in Letta v1 shapes (REST, agent state and the archival_memory_search tool)."""

from memory.models import Passage


def block_out(block) -> dict:
    return {
        "id": block.id,
        "label": block.label,
        "value": block.value,
        "limit": block.limit,
        "description": block.description,
        "read_only": block.read_only,
        "metadata": block.metadata or {},
        "version": block.version,
        "created_at": block.created_at,
        "updated_at": block.updated_at,
    }


def passage_out(passage: Passage) -> dict:
    """A Letta `Passage`; vectors are not sent (they are large and only useful to the server)."""
    return {
        "id": passage.id,
        "text": passage.text,
        "tags": passage.tags or [],
        "metadata": passage.metadata or {},
        "source": passage.source,
        "agent_id": passage.agent_id,
        "archive_id": None,
        "file_id": None,
        "embedding": None,
        "embedding_config": (
            {
                "handle": passage.embedding_model,
                "embedding_model": passage.embedding_model,
                "embedding_dim": passage.embedding_dim,
            }
            if passage.embedding_model
            else None
        ),
        "created_at": passage.created_at,
        "updated_at": passage.created_at,
        "is_deleted": False,
    }


def passage_search_result(passage: Passage) -> dict:
    """One archival search hit, `{id, timestamp, content, tags}` as Letta's search endpoint and tool return it."""
    return {
        "id": passage.id,
        "timestamp": passage.created_at.isoformat(),
        "content": passage.text,
        "tags": passage.tags or [],
    }
