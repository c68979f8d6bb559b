"""Which embedder an agent uses: its own `embedding` handle, else the owner's setting, else EMBEDDING_MODEL.

Handles are "provider/model" like chat models ("openai/text-embedding-3-small", "ollama/nomic-embed-text");
"local/all-minilm-l6-v2" is the optional offline embedder. No resolvable handle means no embedder, and archival
memory then searches by full text only.
"""

import logging

from django.conf import settings

from core.errors import NotConfigured
from core.models import OwnerSettings
from core.providers import model_resolve
from memory.embedders import local
from memory.embedders.base import Embedder, EmbeddingError
from memory.embedders.provider import ProviderEmbedder

__all__ = ["Embedder", "EmbeddingError", "embedder_for_agent", "embedding_handle_for_agent", "embedding_unavailable"]

log = logging.getLogger(__name__)


def embedding_handle_for_agent(agent) -> str:
    """The embedding handle in force for the agent, or "" when none is configured anywhere."""

    if agent.embedding:
        return agent.embedding
    owner_choice = (
        OwnerSettings.objects.filter(owner_id=agent.owner_id).values_list("embedding_model", flat=True).first()
    )
    return owner_choice or getattr(settings, "EMBEDDING_MODEL", "") or ""


def embedder_for_handle(*, owner, handle: str) -> Embedder | None:
    """An embedder for the handle, or None when no configured provider (or installed extra) serves it."""
    return _embedder(owner=owner, handle=handle)[0]


def embedding_unavailable(*, owner, handle: str) -> str:
    """Why `handle` cannot embed for this owner ("" when it can, or when there is no handle): searches that would
    use it rank by full text instead, which a page should say rather than leave to be discovered."""
    return _embedder(owner=owner, handle=handle)[1] if handle else ""


def _embedder(*, owner, handle: str) -> tuple[Embedder | None, str]:
    """The handle's embedder, or None and why there is none."""
    if not handle:
        return None, "no embedding model is configured"
    if handle.startswith("local/"):
        if not local.available():
            return None, "the local embedder is not installed (the local-embeddings extra)"
        return local.LocalEmbedder(), ""
    try:
        resolved = model_resolve(owner=owner, handle=handle)
    except NotConfigured as exc:
        return None, exc.message
    embedder = ProviderEmbedder(
        handle=handle,
        model=resolved.litellm_model,
        api_base=resolved.api_base,
        api_key=resolved.api_key,
        guarded=resolved.guarded,
    )
    return embedder, ""


def embedder_for_agent(agent) -> Embedder | None:
    """The agent's embedder, or None (full-text archival search)."""
    return embedder_for_handle(owner=agent.owner, handle=embedding_handle_for_agent(agent))
