"""Shared archives (Letta's archive_manager, letta/services/archive_manager.py): archival memory attached to several
agents. An archive's passages have no agent: every attached agent lists and searches them beside its own, and an
agent with an archive writes its new archival memories there (to the archive attached first), so what one agent
stores the others find. An agent without an archive keeps its own archival memory as before."""

import contextlib
import logging

import numpy as np
from django.db import connections, transaction
from django.db.models import QuerySet

from core.errors import Invalid, NotFound
from core.models import Agent, Organization
from core.pagination import queryset_page
from core.selectors import owned_get
from memory.embedders.selection import embedder_for_handle
from memory.models import Archive, ArchiveAgent, Passage
from memory.passages import INSERT_CHUNK, passages_write
from memory.search.vectors import pg_nearest

log = logging.getLogger(__name__)


def archive_get(*, owner: Organization, archive_id: str) -> Archive:
    return owned_get(Archive, owner=owner, id=archive_id)


def archives_list(
    *,
    owner: Organization,
    name: str | None = None,
    agent: Agent | None = None,
    after: str | None = None,
    before: str | None = None,
    limit: int | None = 50,
    order: str = "desc",
) -> list[Archive]:
    """One page of the owner's archives (by exact name, or only those attached to `agent`)."""
    scope = Archive.objects.filter(owner=owner)
    qs = scope
    if name is not None:
        qs = qs.filter(name=name)
    if agent is not None:
        qs = qs.filter(attachments__agent=agent)
    return queryset_page(qs, after=after, before=before, limit=limit, order=order, scope=scope)


def archive_create(*, owner: Organization, name: str, description: str = "", embedding: str = "") -> Archive:
    """A new, empty archive; `embedding` (a handle) embeds its passages, else each writing agent's model does."""
    if not name.strip():
        raise Invalid("An archive needs a name.")
    return Archive.objects.create(owner=owner, name=name, description=description or "", embedding=embedding or "")


def archive_update(*, archive: Archive, name: str | None = None, description: str | None = None) -> Archive:
    if name is not None:
        if not name.strip():
            raise Invalid("An archive needs a name.")
        archive.name = name
    if description is not None:
        archive.description = description
    archive.save()
    return archive


def archive_delete(*, archive: Archive) -> None:
    """Delete the archive and its passages (attached agents keep their own archival memory)."""
    archive.delete()


def archive_agent_attach(*, archive: Archive, agent: Agent) -> None:
    """Attach the agent: it searches the archive from now on, and writes there if it is its first archive."""
    ArchiveAgent.objects.get_or_create(archive=archive, agent=agent)


def archive_agent_detach(*, archive: Archive, agent: Agent) -> None:
    ArchiveAgent.objects.filter(archive=archive, agent=agent).delete()


def archive_agents(
    *, archive: Archive, after: str | None = None, before: str | None = None, limit: int | None = 50, order="desc"
) -> list[Agent]:
    scope = Agent.objects.filter(archive_attachments__archive=archive)
    return queryset_page(scope, after=after, before=before, limit=limit, order=order, scope=scope)


def agent_archive_ids(agent: Agent) -> list[str]:
    """The archives attached to the agent, the first attached first."""
    rows = ArchiveAgent.objects.filter(agent=agent).order_by("created_at", "id")
    return list(rows.values_list("archive_id", flat=True))


def agent_write_archive(agent: Agent, *, archive_ids: list[str] | None = None) -> Archive | None:
    """Where the agent's new archival memories go: the archive attached to it first, or None (its own).
    `archive_ids`: the agent's, as `agent_archive_ids` gives them, when the caller read them already."""
    ids = agent_archive_ids(agent) if archive_ids is None else archive_ids
    return Archive.objects.get(pk=ids[0]) if ids else None


def archive_passages(archive_ids: list[str]) -> QuerySet:
    return Passage.objects.filter(archive_id__in=archive_ids)


def archive_passage_delete(*, archive: Archive, passage_id: str) -> None:
    deleted, _ = Passage.objects.filter(archive=archive, id=passage_id).delete()
    if not deleted:
        raise NotFound(f"Passage '{passage_id}' not found in archive '{archive.id}'")


def archive_passages_insert(
    *, archive: Archive, items: list[dict], embedding: tuple[str, list | None, str] | None = None
) -> list[Passage]:
    """Store passages ({text, tags, metadata, created_at}) in the archive. Embeds them first (provider calls, outside
    any transaction) with the archive's model unless `embedding` holds (handle, vectors, error) computed by the
    writer; a failed embedding is kept as `metadata.embedding_error` and the passage is found by full text."""
    texts = [item.get("text") for item in items]
    if not texts or any(not isinstance(t, str) or not t.strip() for t in texts):
        raise Invalid("Archival memory text must not be empty")
    handle, vectors, error = embedding if embedding is not None else _embed(archive, texts)
    rows = []
    for i, item in enumerate(items):
        meta = {**(item.get("metadata") or {}), **({"embedding_error": error} if error else {})}
        vector = None if vectors is None else vectors[i]
        rows.append(
            Passage(
                owner_id=archive.owner_id,
                archive=archive,
                text=item["text"],
                tags=list(dict.fromkeys(item.get("tags") or [])),
                metadata=meta,
                source=item.get("source") or "user",
                embedding=vector,
                embedding_model=handle if vector is not None else "",
                embedding_dim=0 if vector is None else len(vector),
                created_at=item.get("created_at"),  # None: now
            )
        )
    with transaction.atomic() if len(rows) > INSERT_CHUNK else contextlib.nullcontext():
        return passages_write(rows)


def _embed(archive: Archive, texts: list[str]) -> tuple[str, list | None, str]:
    embedder = embedder_for_handle(owner=archive.owner, handle=archive.embedding) if archive.embedding else None
    if embedder is None:
        return "", None, ""
    try:
        return embedder.handle, embedder.embed(texts), ""
    except Exception as exc:  # noqa: BLE001 - any provider failure leaves the passage to full-text search
        log.warning("archive %s passages stored without embeddings: %s", archive.id, exc)
        return "", None, str(exc)


def tagged(qs: QuerySet, tags: list[str], match_all: bool) -> QuerySet:
    """Archive passages with any (or all) of the tags: read from each passage's own tag list, as archive passages
    have no per-agent tag rows."""
    wanted = set(tags)
    ids = [
        pid
        for pid, have in qs.values_list("id", "tags")
        if (wanted <= set(have or []) if match_all else wanted & set(have or []))
    ]
    return qs.filter(id__in=ids)


def archive_nearest(qs: QuerySet, handle: str, vector, limit: int) -> list[tuple[str, float]]:
    """(id, cosine distance) of the archive passages nearest the vector, nearest first: pgvector on PostgreSQL, an
    exact scan elsewhere (archives are read whole; the per-agent vector cache does not hold them)."""
    qs = qs.filter(embedding_model=handle, embedding__isnull=False)
    if connections[qs.db].vendor == "postgresql":
        return pg_nearest(queryset=qs, vector=vector, limit=limit)
    rows = list(qs.values_list("id", "embedding"))
    if not rows:
        return []
    matrix = np.asarray([np.asarray(v, dtype=np.float32) for _, v in rows])
    matrix /= np.where((norms := np.linalg.norm(matrix, axis=1, keepdims=True)) == 0, 1, norms)
    query = np.asarray(vector, dtype=np.float32)
    scores = matrix @ (query / (np.linalg.norm(query) or 1.0))
    return [(rows[i][0], float(1 - scores[i])) for i in np.argsort(-scores)[:limit]]
