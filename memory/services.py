"""Writes to memory: blocks (create, edit with history, attach, detach, restore, delete) and archival passages."""

import contextlib
import logging
from collections.abc import Callable

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone

from core.errors import Conflict, Invalid, NotConfigured, NotFound
from core.events import agent_group, send_event
from core.models import Agent, Organization
from core.selectors import owned_get, row_or_none
from core.updates import model_update
from memory.archives import agent_archive_ids, agent_write_archive, archive_passages_insert
from memory.embedders.base import EmbeddingError
from memory.embedders.selection import embedder_for_agent
from memory.models import AgentBlock, Block, BlockHistory, Passage, PassageTag
from memory.passages import INSERT_CHUNK, passages_write
from memory.search.vectors import matrix_invalidate

log = logging.getLogger(__name__)

DEFAULT_BLOCK_LIMIT = 100_000  # Letta's CORE_MEMORY_BLOCK_CHAR_LIMIT, CreateBlock's default for every label
MAX_BLOCK_LIMIT = 1_000_000


def _validate(*, label: str | None, value: str | None, limit: int | None) -> None:
    if label is not None and (
        not isinstance(label, str)
        or not label.strip()
        or len(label) > 100
        or not label.replace("_", "").replace("-", "").isalnum()
    ):
        raise Invalid("Block label must be 1-100 letters, digits, '_' or '-'")
    if limit is not None and (
        not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_BLOCK_LIMIT
    ):
        raise Invalid(f"Block limit must be between 1 and {MAX_BLOCK_LIMIT} characters")
    if value is not None and not isinstance(value, str):
        raise Invalid("Block value must be a string")
    if value is not None and limit is not None and len(value) > limit:
        raise Invalid(
            f"Block value is {len(value)} characters, over the block's limit of {limit}. "
            "Shorten it, raise the limit, or move the content to archival memory."
        )


def block_create(
    *,
    owner: Organization,
    label: str,
    value: str = "",
    limit: int | None = None,
    description: str = "",
    read_only: bool = False,
    metadata: dict | None = None,
    standalone: bool = False,
) -> Block:
    """Create a block (detached); its first history entry records the initial value. A `standalone` block (made on
    its own rather than with an agent) outlives the agents it is attached to."""
    limit = limit or max(DEFAULT_BLOCK_LIMIT, len(value))
    _validate(label=label, value=value, limit=limit)
    block = Block.objects.create(
        owner=owner,
        label=label.strip(),
        value=value,
        limit=limit,
        description=description,
        read_only=read_only,
        metadata=metadata or {},
        standalone=standalone,
    )
    BlockHistory.objects.create(block=block, version=1, old_value="", new_value=value, actor_type="system")
    return block


@transaction.atomic
def block_update(
    *,
    block: Block,
    changes: dict,
    actor_user: User | None = None,
    agent_id: str = "",
    step_id: str = "",
    tool_call_id: str = "",
    enforce_read_only: bool = False,
    rebase: Callable[[str], str] | None = None,
) -> Block:
    """Edit a block under its row lock and record who changed what; live pushes go out after commit. `rebase` gives
    the new value from the block's value as read under that lock, in place of `changes["value"]`: an agent's edit
    computed on a value another writer has changed since is made again on the current one (what it raises, the
    caller gets)."""
    nulls = [key for key in ("value", "label", "limit") if key in changes and changes[key] is None]
    if nulls:
        raise Invalid(f"Block {', '.join(nulls)} cannot be null; leave a field out to keep it.")
    block = row_or_none(Block.objects.select_for_update().filter(pk=block.pk))
    if block is None:
        raise Block.DoesNotExist("Block matching query does not exist.")
    if enforce_read_only and block.read_only:
        raise Invalid(f"Block '{block.label}' is read-only; it cannot be edited by the agent.")
    new_value = rebase(block.value) if rebase is not None else changes.get("value", block.value)
    new_limit = changes.get("limit", block.limit)
    _validate(label=changes.get("label"), value=new_value, limit=new_limit)
    if changes.get("label") is not None and changes["label"] != block.label:
        _label_free_for_agents(block=block, label=changes["label"])
    other = model_update(
        block,
        fields=("label", "limit", "description", "read_only", "metadata"),
        data={key: value for key, value in changes.items() if value is not None},
        save=False,  # saved below with the value and its version
    )
    if new_value == block.value and not other:
        return block
    old_value = block.value
    block.value, block.version, block.updated_at = new_value, block.version + 1, timezone.now()
    written = ("value", "version", "updated_at", *other)
    Block.objects.filter(pk=block.pk).update(**{name: getattr(block, name) for name in written})
    change = BlockHistory(
        block=block,
        version=block.version,
        old_value=old_value,
        new_value=new_value,
        changes=other,
        actor_type="agent" if agent_id else "user",
        actor_user=actor_user,
        agent_id=agent_id,
        step_id=step_id,
        tool_call_id=tool_call_id,
    )
    BlockHistory.objects.bulk_create([change])
    transaction.on_commit(lambda: _broadcast_block(block))
    return block


def _label_free_for_agents(*, block: Block, label: str) -> None:
    """Conflict if an agent this block is attached to already has another block with `label`."""
    clash = (
        AgentBlock.objects.filter(agent__agentblock__block=block, block__label=label)
        .exclude(block=block)
        .select_related("agent")
        .first()
    )
    if clash is not None:
        raise Conflict(
            f"Agent '{clash.agent.name}' already has a block labelled '{label}'; labels are unique per agent."
        )


def _broadcast_block(block: Block) -> None:
    """Push a block's new value to every tab showing an agent that has the block (after the commit: one query)."""
    event = {
        "message_type": "block_update",
        "block": {
            "id": block.id,
            "label": block.label,
            "value": block.value,
            "limit": block.limit,
            "version": block.version,
            "read_only": block.read_only,
        },
    }
    for agent_id in AgentBlock.objects.filter(block_id=block.id).values_list("agent_id", flat=True):
        send_event(agent_group(agent_id), event)


def block_restore(*, block: Block, version: int, actor_user: User | None) -> Block:
    """Restore a block's value to what it was at `version` (recorded as a new change)."""
    entry = BlockHistory.objects.filter(block=block, version=version).first() if 1 <= version < 2**31 else None
    if entry is None:
        raise NotFound(f"Block '{block.id}' has no version {version}")
    return block_update(
        block=block,
        changes={"value": entry.new_value, "limit": max(block.limit, len(entry.new_value))},
        actor_user=actor_user,
    )


def block_attach(*, agent: Agent, block: Block, position: int | None = None) -> None:
    """Attach a block to an agent; a label may appear only once per agent."""
    if block.owner_id != agent.owner_id:
        raise NotFound(f"Block '{block.id}' not found")
    if AgentBlock.objects.filter(agent=agent, block=block).exists():
        return
    if AgentBlock.objects.filter(agent=agent, block__label=block.label).exists():
        raise Conflict(f"Agent already has a block labelled '{block.label}'")
    if position is None:
        position = (AgentBlock.objects.filter(agent=agent).aggregate(m=Max("position"))["m"] or 0) + 1
    AgentBlock.objects.create(agent=agent, block=block, position=position)


def block_attach_by_id(*, agent: Agent, block_id: str) -> Block:
    block = owned_get(Block, owner=agent.owner_id, id=block_id)
    block_attach(agent=agent, block=block)
    return block


def block_detach(*, agent: Agent, block_id: str) -> None:
    """Detach a block from an agent; the block itself is kept."""
    deleted, _ = AgentBlock.objects.filter(agent=agent, block_id=block_id).delete()
    if not deleted:
        raise NotFound(f"Block '{block_id}' is not attached to agent '{agent.id}'")


def block_delete(*, block: Block) -> None:
    """Delete a block and detach it from every agent."""
    block.delete()


def blocks_orphaned_by_delete(*, agent: Agent) -> list[Block]:
    """Blocks made with this agent and attached only to it (deleted with it); shared and standalone blocks never are."""
    return [
        b
        for b in Block.objects.filter(agentblock__agent=agent, standalone=False)
        if AgentBlock.objects.filter(block=b).count() == 1
    ]


# --- archival memory (passages) ---

EMBED_BATCH = 64


def _clean_tags(tags) -> list[str]:
    if tags is None:
        return []
    if isinstance(tags, str) or not all(isinstance(t, str) for t in tags):
        raise Invalid("tags must be a list of strings")
    cleaned = [t.strip() for t in tags if t.strip()]
    if any(len(t) > 100 for t in cleaned):
        raise Invalid("Each tag must be at most 100 characters")
    return list(dict.fromkeys(cleaned))


def passages_embed(*, agent: Agent, texts: list[str]):
    """(handle, vectors or None, error text) for the texts with the agent's embedder (provider calls, outside any
    transaction); never raises: a failed embedding is stored as `metadata.embedding_error`."""

    embedder = embedder_for_agent(agent)
    if embedder is None:
        return "", None, ""
    try:
        chunks = [embedder.embed(texts[i : i + EMBED_BATCH]) for i in range(0, len(texts), EMBED_BATCH)]
    except EmbeddingError as exc:
        log.warning("archival insert for %s stored without embeddings: %s", agent.id, exc)
        return "", None, str(exc)
    return embedder.handle, [row for chunk in chunks for row in chunk], ""


def passages_insert(
    *,
    agent: Agent,
    texts: list[str],
    tags: list[str] | None = None,
    source: str = "agent",
    metadata: dict | None = None,
    created_at=None,
    embeddings=None,
    embedding_model: str = "",
    embedded: bool = False,
    archive_ids: list[str] | None = None,
) -> list[Passage]:
    """Store archival memories for the agent. Embeds them first with the agent's embedder (provider calls, outside
    any transaction) unless `embeddings` are given or `embedded` says that was already tried; if embedding fails
    they are stored without vectors (still found by full text) and `metadata.embedding_error` says why.
    An agent with a shared archive stores them there (memory/archives.py; `archive_ids`: the agent's archives, when
    the caller read them with the agent). Invalidates cached vectors after commit."""
    if source not in dict(Passage.SOURCES):
        raise Invalid(f"source must be one of {', '.join(dict(Passage.SOURCES))}")
    if not texts or any(not isinstance(t, str) or not t.strip() for t in texts):
        raise Invalid("Archival memory text must not be empty")
    tags = _clean_tags(tags)
    if embeddings is None and not embedded:
        embedding_model, embeddings, error = passages_embed(agent=agent, texts=texts)
    else:
        error = ""
    archive = agent_write_archive(agent, archive_ids=archive_ids)
    if archive is not None:
        items = [
            {"text": t, "tags": tags, "metadata": metadata, "created_at": created_at, "source": source} for t in texts
        ]
        return archive_passages_insert(archive=archive, items=items, embedding=(embedding_model, embeddings, error))
    meta = {**(metadata or {}), **({"embedding_error": error} if error else {})}
    rows = [
        Passage(
            owner_id=agent.owner_id,
            agent=agent,
            text=text,
            tags=tags,
            metadata=meta,
            source=source,
            embedding=None if embeddings is None else embeddings[i],
            embedding_model=embedding_model if embeddings is not None else "",
            embedding_dim=0 if embeddings is None else len(embeddings[i]),
        )
        for i, text in enumerate(texts)
    ]
    # One statement is a transaction of its own (the search structures' triggers included): a single passage without
    # tags needs no BEGIN and COMMIT around it.
    for row in rows:
        row.created_at = created_at  # None: now
    with transaction.atomic() if tags or len(rows) > INSERT_CHUNK else contextlib.nullcontext():
        rows = passages_write(rows)
        PassageTag.objects.bulk_create([PassageTag(passage=p, agent=agent, tag=t) for p in rows for t in tags])
        transaction.on_commit(lambda: _vectors_changed(agent.id))
    return rows


def passage_insert(
    *,
    agent: Agent,
    text: str,
    tags: list[str] | None = None,
    source: str = "agent",
    metadata: dict | None = None,
    created_at=None,
    embedded=None,
    archive_ids: list[str] | None = None,
) -> Passage:
    """Store one archival memory (see passages_insert: one embedding call when an embedder is configured, unless
    `embedded` holds passages_embed's result, computed earlier outside the caller's transaction)."""
    if not isinstance(text, str) or not text.strip():
        raise Invalid("Archival memory text must not be empty")
    handle, vectors, error = embedded if embedded is not None else passages_embed(agent=agent, texts=[text])
    metadata = {**(metadata or {}), **({"embedding_error": error} if error else {})}
    return passages_insert(
        agent=agent,
        texts=[text],
        tags=tags,
        source=source,
        metadata=metadata,
        created_at=created_at,
        embeddings=vectors,
        embedding_model=handle,
        embedded=True,
        archive_ids=archive_ids,
    )[0]


def passage_delete(*, agent: Agent, passage_id: str) -> None:
    """Delete one of the agent's passages (and its tags), or one of an archive attached to it; invalidates cached
    vectors after commit."""
    mine = Q(agent=agent) | Q(archive_id__in=agent_archive_ids(agent))
    deleted, _ = Passage.objects.filter(mine, id=passage_id).delete()
    if not deleted:
        raise NotFound(f"Passage '{passage_id}' not found in agent '{agent.id}' archival memory")
    transaction.on_commit(lambda: _vectors_changed(agent.id))


def passages_reembed(*, agent: Agent, limit: int = 10_000) -> int:
    """Embed the agent's passages that have no vector from its current embedder (provider calls); returns how many."""

    embedder = embedder_for_agent(agent)
    if embedder is None:
        return 0
    stale = list(
        Passage.objects.filter(agent=agent)
        .exclude(embedding_model=embedder.handle, embedding__isnull=False)
        .order_by("created_at")
        .only("id", "text", "metadata")[:limit]
    )
    done = 0
    for i in range(0, len(stale), EMBED_BATCH):
        batch = stale[i : i + EMBED_BATCH]
        try:
            vectors = embedder.embed([p.text for p in batch])
        except EmbeddingError as exc:
            raise NotConfigured(f"Re-embedding stopped after {done} passages: {exc}") from exc
        for p, vector in zip(batch, vectors, strict=False):
            p.metadata.pop("embedding_error", None)
            Passage.objects.filter(pk=p.pk).update(
                embedding=vector, embedding_dim=len(vector), embedding_model=embedder.handle, metadata=p.metadata
            )
        done += len(batch)
    _vectors_changed(agent.id)
    return done


def _vectors_changed(agent_id: str) -> None:
    matrix_invalidate(agent_id=agent_id)
