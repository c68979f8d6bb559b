"""Writes of the runtime: message rows (with their token counts), step records, the in-context window.

Every function that writes expects to run inside the step's transaction, with the agent's row locked
(`agent_lock`), so `seq` numbers and `message_ids` never interleave between writers.
"""

from collections.abc import Collection, Iterable, Sequence
from functools import cache

from django.db import DEFAULT_DB_ALIAS, connection, connections, models, transaction

from core import ids, mapping
from core.agents import queries
from core.agents.context import messages_cache_put
from core.engine import tokens
from core.engine.context import SYSTEM_SECTIONS
from core.models import Agent, Conversation, Message, Run, Step


def message_build(
    *,
    agent: Agent,
    role: str,
    text: str = "",
    kind: str = "",
    reasoning: str = "",
    reasoning_source: str = "",
    tool_calls: Sequence[dict] = (),
    tool_call_id: str = "",
    name: str = "",
    tool_return: dict | None = None,
    sender_agent_id: str = "",
    message_id: str | None = None,
    otid: str = "",
    thinking_blocks: Sequence[dict] = (),
) -> Message:
    """An unsaved message row with its token count computed once, for the agent's model (no queries); `message_id`
    is given when events already named the message (token chunks streamed before it was stored)."""
    row = Message(
        id=message_id or ids.new_id("message"),
        owner_id=agent.owner_id,
        agent_id=agent.id,
        role=role,
        content=[{"type": "text", "text": text}] if text else [],
        text=mapping.search_text(text, tool_calls),
        kind=kind,
        reasoning=reasoning,
        reasoning_source=reasoning_source,
        tool_calls=list(tool_calls),
        tool_call_id=tool_call_id,
        name=name,
        tool_return=tool_return or {},
        sender_agent_id=sender_agent_id,
        otid=otid,
        thinking_blocks=list(thinking_blocks),
    )
    row.token_count = tokens.count_message(agent.model, mapping.message(row))
    return row


INSERT_BATCH = 100  # rows a statement: well under SQLite's 32,766 parameters for the widest of these tables


@cache
def _insert_sql(model, count: int, vendor: str) -> str:
    quote = connection.ops.quote_name
    columns = ", ".join(quote(f.column) for f in model._meta.concrete_fields)
    row = "(" + ", ".join(["%s"] * len(model._meta.concrete_fields)) + ")"
    return f"INSERT INTO {quote(model._meta.db_table)} ({columns}) VALUES {', '.join([row] * count)}"


# Fields whose value of an exact type Django passes to the driver as it is (`get_db_prep_save` of a CharField, a
# TextField or a BooleanField returns a str, a bool or None unchanged, on every backend), and whose `pre_save` only
# reads the attribute: a row's values of these are taken as they are. Any other field, or another type of value
# (a lazy string, a str subclass), is prepared by its field.
_PLAIN_FIELDS = (models.CharField, models.TextField, models.BooleanField)
_PLAIN_VALUES = (str, bool, type(None))
_ABSENT = object()  # an attribute not in the instance's __dict__ (deferred): read by its field's pre_save


def _plain(field) -> bool:
    target = field.target_field if field.is_relation else field
    return (
        (not field.is_relation or type(field) is models.ForeignKey)
        and type(target) in _PLAIN_FIELDS
        and type(field).pre_save is models.Field.pre_save
    )


@cache
def _insert_plan(model) -> tuple[tuple[models.Field, str | None], ...]:
    """Each concrete field of `model`, with its attribute name when its values can be taken as they are."""
    return tuple((f, f.attname if _plain(f) else None) for f in model._meta.concrete_fields)


def _insert_params(batch: Sequence, plan, db) -> list:
    params = []
    for obj in batch:
        values = obj.__dict__
        for f, attname in plan:
            if attname is not None and type(value := values.get(attname, _ABSENT)) in _PLAIN_VALUES:
                params.append(value)
            else:
                params.append(f.get_db_prep_save(f.pre_save(obj, True), db))
    return params


def rows_insert(objs: Sequence) -> None:
    """`Model.objects.bulk_create(objs)` for rows of one model whose primary key is set (a default id) and that
    relate only to saved rows, in one statement without compiling a query: each value prepared by its field
    (`Field.pre_save`, which sets auto_now_add dates, then `Field.get_db_prep_save`), but those the field would pass
    on unchanged (`_insert_plan`: a plain text or boolean column's str, bool or None). The step's path inserts a few
    rows at a time, where the ORM's compile cost more than the insert itself. The objects are not told they were
    saved (that is Django's own state): nothing saves them again — their later changes are written by
    `queries.row_update` — and a `save()` of one would try a second INSERT and fail on the primary key, loudly."""
    if not objs:
        return
    model = type(objs[0])
    plan = _insert_plan(model)
    db = connections[DEFAULT_DB_ALIAS]  # the thread's connection itself, not its proxy: each value's field reads it
    with db.cursor() as cursor:
        for start in range(0, len(objs), INSERT_BATCH):
            batch = objs[start : start + INSERT_BATCH]
            cursor.execute(_insert_sql(model, len(batch), db.vendor), _insert_params(batch, plan, db))


def agent_lock(agent_id: str) -> Agent:
    """The agent's row, locked for this transaction (PostgreSQL row lock; SQLite: IMMEDIATE transactions),
    annotated with `max_seq`, its highest message seq, read after the lock is held so it is authoritative (only the
    columns a commit writes from, `queries.LOCK_COLUMNS`: the window, the model, the ids): the
    agent's threads run side by side and each step of each takes its seqs here. On SQLite one statement (nothing
    writes under an IMMEDIATE transaction); on PostgreSQL (READ COMMITTED) a locking SELECT that waited for the lock
    evaluates its subqueries in its snapshot from before the wait, so the seq is read by a statement of its own."""
    if connection.vendor != "postgresql":
        agent = queries.agent_read(agent_id=agent_id, max_seq=True, columns=queries.LOCK_COLUMNS)
    else:
        agent = queries.agent_read(agent_id=agent_id, lock=True, columns=queries.LOCK_COLUMNS)
        if agent is not None:
            agent.max_seq = queries.message_max_seq(agent_id=agent_id)
    if agent is None:
        raise Agent.DoesNotExist(f"Agent '{agent_id}' was deleted")
    return agent


def thread_view(agent: Agent, conversation_id: str | None) -> Agent:
    """The agent as a run in one of its conversations sees it: that conversation's in-context list (and model, if
    it sets one) in place of the agent's own, in memory only; `agent.thread` names the conversation (None: the
    agent's own thread). Read under the agent's lock, the list is as current as the agent's (every writer of
    either holds that lock)."""
    agent.thread = conversation_id
    if conversation_id is None:
        return agent
    conversation = Conversation.objects.only("message_ids", "model").get(pk=conversation_id)
    agent.message_ids = list(conversation.message_ids or [])
    agent.model = conversation.model or agent.model
    return agent


def thread_lock(agent: Agent) -> Agent:
    """agent_lock, seen from the thread `agent` was read for (`thread_view`)."""
    return thread_view(agent_lock(agent.id), getattr(agent, "thread", None))


def messages_store(
    *, agent: Agent, rows: Iterable[Message], run: Run | None, step: Step | None, stored: Collection[str] = ()
) -> list[Message]:
    """Number rows with the agent's next seqs and insert them, in the agent's thread (`thread_view`); rows whose id is
    in `stored` (the run's inputs, `inputs_store`) are in the table already and only linked to `step`. `agent` comes
    from agent_lock (caller holds it)."""

    rows = list(rows)
    early = [r for r in rows if r.id in stored and r.step_id is None]
    if early and step is not None:
        queries.row_update(Message, where={"id": [r.id for r in early]}, step=step.pk)
        for row in early:
            row.step = step
    rows = [r for r in rows if r.id not in stored]
    if not rows:
        return rows
    seq = (agent.max_seq or 0) + 1
    agent.max_seq = seq + len(rows) - 1
    thread = getattr(agent, "thread", None)
    for offset, row in enumerate(rows):
        row.seq, row.run, row.step = seq + offset, run, step
        row.conversation_id = thread
    rows_insert(rows)
    transaction.on_commit(lambda: messages_cache_put(rows))
    return rows


def run_rows_keep(run: Run, rows: Iterable[Message]) -> None:
    """Remember on the run object rows of its that a transaction just committed (its inputs, a step's rows)."""
    kept = run.__dict__.setdefault("rows_kept", {})
    kept.update((row.pk, row) for row in rows)  # a step's rows include the inputs the claim kept


def run_rows_kept(run: Run) -> list[Message]:
    """The rows `run_rows_keep` remembered on the run object, by seq: all of the run's messages once the run was
    claimed and executed to its end through that object (the executor's `run_call`; an overflow's summary aside,
    which no reply shows)."""
    return sorted(run.__dict__.get("rows_kept", {}).values(), key=lambda row: (row.seq, row.pk))


def inputs_store(*, agent: Agent, run: Run) -> list[Message]:
    """Store the run's input messages (not its answers to a wait) when it is claimed, outside the window: an accepted
    send is kept even if the run's process dies. `agent` was read under the claim's lock with its memory counts, which
    then count them (caller holds the lock). The first step that commits links them to itself and puts them in the
    window (`messages_store` with `stored`)."""
    rows = [
        message_build(
            agent=agent,
            role=m["role"],
            text=m["text"],
            kind=m.get("kind", ""),
            sender_agent_id=m.get("sender_agent_id", ""),
            otid=m.get("otid", ""),
        )
        for m in run.input_messages
        if m["role"] not in ("approval", "continue")
    ]
    agent.max_seq = agent.snapshot_max_seq
    messages_store(agent=agent, rows=rows, run=run, step=None)
    agent.snapshot_max_seq = agent.max_seq
    return rows


def inputs_read(*, run: Run) -> list[Message]:
    """The input messages `inputs_store` stored for a run claimed in another process, in order."""
    return list(Message.objects.filter(run_id=run.pk, step__isnull=True).order_by("seq"))


def window_set(*, agent_id: str, message_ids: list[str], conversation_id: str | None = None) -> None:
    """Replace the in-context message list of the agent's own thread, or of its conversation `conversation_id`.
    Caller holds the agent's lock."""
    if conversation_id is None:
        queries.row_update(Agent, where={"id": agent_id}, message_ids=message_ids)
    else:
        Conversation.objects.filter(pk=conversation_id, agent_id=agent_id).update(message_ids=message_ids)


def step_record(
    *,
    run: Run | None,
    agent: Agent,
    step_id: str,
    index: int,
    kind: str = "agent",
    request: dict,
    response: dict | None = None,
    sections=(),
    tokenizer: str = "",
    usage: dict | None = None,
    model_ms: float = 0,
    tools_ms: float = 0,
    total_ms: float = 0,
    stop_reason: str = "",
    error: str = "",
    state: dict | None = None,
) -> Step:
    """Insert one step record: the exact request, the raw response, usage and timings, and the state it was
    compiled from (core.runs.timetravel). Sections keep their text only for the system message's parts: the
    messages' and tools' text is the request's own."""
    step = Step(
        id=step_id,
        owner_id=agent.owner_id,
        agent_id=agent.id,
        run=run,
        index=index,
        kind=kind,
        model=request.get("model", agent.model),
        request=request,
        response=response or {},
        context_sections=[
            {"name": s.name, "tokens": s.tokens, **({"text": s.text} if s.name in SYSTEM_SECTIONS else {})}
            for s in sections
        ],
        tokenizer=tokenizer,
        usage=usage or {},
        model_ms=round(model_ms, 3),
        tools_ms=round(tools_ms, 3),
        total_ms=round(total_ms, 3),
        stop_reason=stop_reason,
        error=error,
        state=state or {},
    )
    rows_insert([step])
    return step


def usage_dict(usage, *, first_token_ms: float | None = None) -> dict:
    """A step's usage as stored, with its model call's time to first token when it streamed (the IDE's timeline
    draws it without a trace collector)."""
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
        "cached_tokens": usage.cached_tokens,
        **({"first_token_ms": round(first_token_ms, 3)} if first_token_ms is not None else {}),
    }
