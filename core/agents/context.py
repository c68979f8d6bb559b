"""The agent's state as the engine sees it, loaded from the database, and its compiled context.

This is the one compile path: the runner compiles through `context_compile`, and the `/context` endpoint
and IDE panels read `agent_context`. Loading costs a fixed number of queries whatever the history size:
message token counts are stored on the rows, and recall size comes from the indexed max(seq).
"""

import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cache

import orjson
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection
from django.utils import timezone

from core import mapping
from core.agents import queries
from core.engine import rules
from core.engine import types as t
from core.engine.base_tools import FILE_TOOL_NAMES
from core.engine.context import compile_context, overview
from core.models import Agent, Message, Organization, Run
from core.selectors import found_or_404
from memory.files.tools import directories_section
from memory.models import Block, Passage
from memory.selectors import agent_block_specs, blocks_by_ids
from tools.models import Tool
from tools.selectors import agent_tool_specs, tools_by_ids


@dataclass
class AgentSnapshot:
    """Everything one step needs about an agent: rows (for writes) and their engine types (for the engine)."""

    agent: Agent
    spec: t.AgentSpec
    blocks: list[t.BlockSpec]
    tool_ids: list[str]  # the ids of the agent's own tools (`tool_row` reads their rows)
    tools: list[t.ToolSpec]
    rules: list[t.ToolRule]
    summary: t.Message | None
    body: list[t.Message]
    kinds: dict[str, str]
    stats: t.MemoryStats
    max_seq: int
    files: str = ""  # the `<directories>` section, for an agent with the file tools (a folder attached)
    rows: dict | None = field(default=None, repr=False)  # the tools' rows by name, read when first asked
    block_list: list | None = field(default=None, repr=False)  # the blocks' rows, read when first asked
    # the window's message ids and what was found for them: (ids, in_context, summary, body, kinds)
    window: tuple = field(default=((), 0, None, (), {}), repr=False)

    @property
    def block_rows(self) -> list[Block]:
        """The rows of `blocks`, in their order, read the first time a step asks (a memory edit: it writes through
        them, and keeps the row it wrote in their place)."""
        if self.block_list is None:
            found = {row.pk: row for row in blocks_by_ids(ids=[b.id for b in self.blocks])}
            self.block_list = [found.get(b.id) or Block(pk=b.id) for b in self.blocks]  # (deleted: its write fails)
        return self.block_list

    def tool_row(self, name: str) -> Tool | None:
        """The row of the agent's tool `name` (what runs it: its code, sandbox, server), read with the others the
        first time a step asks (a step that runs only built-in tools never does); None if it was deleted since."""
        if self.rows is None:
            self.rows = {tool.name: tool for tool in tools_by_ids(ids=self.tool_ids)}
        return self.rows.get(name)


# Stored messages never change (edits are new messages), so their engine form is cached by id in this
# process: loading a window then costs one query for the ids not seen yet, whatever the window size. The cache is
# bounded by the bytes it holds (estimated from each message's stored token count), not by a number of messages: a
# count let it grow for as long as messages were written (50,000 of them, however long each was), which a soak of
# sends showed as memory that crept up with every send.
CACHE_BYTES = 4 * 1024 * 1024  # about 6,000 short messages: the windows of the agents in use, and more
ENTRY_BYTES = 500  # an entry's cost besides its text: the engine message, its lists and dicts, the id
BYTES_PER_TOKEN = 4


class MessageCache:
    """Engine messages by id, the least recently used dropped first once their estimated bytes pass `budget`."""

    def __init__(self, budget: int):
        self.budget = budget
        self.bytes = 0
        self._entries: OrderedDict[str, tuple[tuple[t.Message, str, str], int]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get_many(self, ids: Sequence[str]) -> dict[str, tuple[t.Message, str, str]]:
        with self._lock:
            found = {}
            for i in ids:
                if (entry := self._entries.get(i)) is not None:
                    self._entries.move_to_end(i)
                    found[i] = entry[0]
            return found

    def put_rows(self, rows) -> dict[str, tuple[t.Message, str, str]]:
        """Cache these stored rows (each with its token_count); returns their entries by id."""
        entries = {row.id: ((mapping.message(row), row.kind, row.role), _row_bytes(row)) for row in rows}
        with self._lock:
            for key, (value, size) in entries.items():
                if (old := self._entries.pop(key, None)) is not None:
                    self.bytes -= old[1]
                self._entries[key] = (value, size)
                self.bytes += size
            while self.bytes > self.budget and self._entries:
                self.bytes -= self._entries.popitem(last=False)[1][1]
        return {key: value for key, (value, _size) in entries.items()}

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0


def _row_bytes(row: Message) -> int:
    return ENTRY_BYTES + BYTES_PER_TOKEN * (row.token_count or 0)


_cache = MessageCache(CACHE_BYTES)
_FIELDS = (
    "id",
    "role",
    "text",
    "content",
    "tool_calls",
    "tool_call_id",
    "name",
    "reasoning",
    "token_count",
    "kind",
    "thinking_blocks",
)


def messages_cached(ids: Sequence[str]) -> dict[str, tuple[t.Message, str, str]]:
    """(engine message, kind, role) for each stored message id, from the cache or one query for the rest."""
    found = _cache.get_many(ids)
    missing = [i for i in ids if i not in found]
    if missing:
        found |= _cache.put_rows(Message.objects.filter(id__in=missing).only(*_FIELDS))
    return found


def messages_cache_put(rows: Sequence[Message]) -> None:
    """Remember just-written rows, so the next step's load needs no query for them."""
    _cache.put_rows(rows)


# The columns of the agent's row its context is compiled from (mapping.agent_spec, mapping.tool_rules, the window):
# not its secrets, whose decryption alone cost more than the rest of the row, nor its other JSON columns.
CONTEXT_COLUMNS = (
    "id",
    "owner_id",
    "name",
    "agent_type",
    "system",
    "model",
    "model_settings",
    "context_window_limit",
    "tool_rules",
    "message_ids",
)


def agent_with_counts(*, owner: Organization, agent_id: str, columns: tuple[str, ...] | None = None) -> Agent:
    """The owner's agent with its memory counts (what a context read needs), or NotFound. `columns`: only these
    columns of its row (`CONTEXT_COLUMNS`: what its context needs; the others are read if ever asked for)."""
    agent = queries.agent_read(agent_id=agent_id, owner_id=owner.pk, counts=True, columns=columns)
    return found_or_404(agent, Agent, agent_id)


def _stats(agent: Agent, in_context: int, max_seq: int, last_edit) -> t.MemoryStats:
    if hasattr(agent, "snapshot_archival"):  # read with the agent (queries.agent_read(counts=True))
        archival = agent.snapshot_archival
    else:
        archival = Passage.objects.filter(agent_id=agent.id).count()
    return t.MemoryStats(
        recall_outside_window=max(0, max_seq + 1 - in_context),
        archival_count=archival,
        last_memory_edit=last_edit.strftime("%Y-%m-%d %I:%M:%S %p UTC") if last_edit else None,
    )


def agent_snapshot(*, agent: Agent, prior: AgentSnapshot | None = None) -> AgentSnapshot:
    """Load an agent's blocks, tools, rules, in-context messages and memory statistics (reads only). An agent read
    with its counts (`queries.agent_read(counts=True)`) brings its statistics' counts along; read at once before
    the snapshot, they are as current as the rest. `prior`: an earlier snapshot of the same agent's thread, whose
    messages are taken again if its window holds the same ids (stored messages never change)."""

    blocks, last_edit = agent_block_specs(agent=agent)
    tool_ids, tools = agent_tool_specs(agent=agent)
    ids = agent.message_ids or []
    if prior is not None and prior.window[0] == ids:
        _, in_context, summary, body_messages, kinds = prior.window
    else:
        cached = messages_cached(list(ids))
        window = [cached[i] for i in ids if i in cached]
        in_context = len(window)
        if window and window[0][2] == "system":
            window = window[1:]
        summary = window[0][0] if window and window[0][1] == "summary" else None
        body_messages = [m for m, _, _ in (window[1:] if summary else window)]
        kinds = {m.id: kind for m, kind, _ in window if kind}
    if hasattr(agent, "snapshot_max_seq"):  # read with the agent (queries.agent_read(counts=True))
        last = agent.snapshot_max_seq
    else:
        last = Message.objects.filter(agent_id=agent.id).order_by("-seq").values_list("seq", flat=True).first()
    max_seq = last or 0
    return AgentSnapshot(
        agent=agent,
        spec=mapping.agent_spec(agent),
        blocks=blocks,
        tool_ids=tool_ids,
        tools=tools,
        rules=mapping.tool_rules(agent),
        summary=summary,
        body=body_messages,
        kinds=kinds,
        stats=_stats(agent, in_context, max_seq, last_edit),
        max_seq=max_seq,
        # read only for an agent a folder gave the file tools: no statement for the others
        files=directories_section(agent) if any(x.name in FILE_TOOL_NAMES for x in tools) else "",
        window=(ids, in_context, summary, body_messages, kinds),
    )


def context_compile(
    snap: AgentSnapshot,
    *,
    extra: Sequence[t.Message] = (),
    body: Sequence[t.Message] | None = None,
    summary: t.Message | None = None,
    allowed_tools: Sequence[str] | None = None,
    tool_choice=None,
    spec: t.AgentSpec | None = None,
) -> t.CompiledContext:
    """Compile the snapshot (plus not-yet-stored `extra` messages) into the exact next request (pure)."""
    messages = list(snap.body if body is None else body) + list(extra)
    return compile_context(
        spec or snap.spec,
        snap.blocks,
        messages,
        snap.tools,
        snap.rules,
        snap.stats,
        allowed_tools=allowed_tools,
        tool_choice=tool_choice,
        summary=summary if summary is not None else snap.summary,
        files=snap.files,
    )


def step_allowed(
    snap: AgentSnapshot, *, history: Sequence[str] = (), last_output: str | None = None, client: Sequence[str] = ()
) -> rules.Allowed:
    """The tools a step may offer and its tool_choice, as the tool rules decide from the run's calls so far; a run's
    client-side tools are offered whatever the rules say (Letta's _get_valid_tools). Raises ToolRuleError when a
    rule cannot be satisfied. The one decision the runner and the simulator share."""
    allowed = rules.allowed_tools(
        snap.rules,
        [x.name for x in snap.tools if x.name not in client],
        history,
        last_output,
        default_choice="required" if snap.spec.heartbeats else "auto",
    )
    if client and not isinstance(allowed.tool_choice, dict):
        allowed = rules.Allowed(allowed.tools + tuple(client), allowed.tool_choice, allowed.forced)
    return allowed


def agent_context(
    *,
    agent: Agent,
    context_window_limit: int | None = None,
    model: str | None = None,
    system: str | None = None,
) -> t.CompiledContext:
    """The agent's context exactly as its next model call would send it, the tools its rules allow then included
    (`next_call`); the overrides preview unsaved settings."""
    return _next_context(agent, context_window_limit=context_window_limit, model=model, system=system)[0]


@dataclass
class _Compiled:
    inputs: tuple
    ctx: t.CompiledContext
    snap: AgentSnapshot  # what it was compiled from (the next read takes its messages again if the ids are the same)
    size: int  # the bytes it holds, estimated: its sections' text, and its overview's JSON once encoded
    body: bytes | None = None  # its overview's JSON (context_overview_json)


class CompiledMemo:
    """The last compiled context of each agent's thread, with what it was compiled from: a read whose inputs are
    equal gets it again. The least recently read are dropped first once their estimated bytes pass `budget`."""

    def __init__(self, budget: int):
        self.budget = budget
        self.bytes = 0
        self._entries: OrderedDict[tuple, _Compiled] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: tuple, inputs: tuple) -> _Compiled | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
        return entry if entry.inputs == inputs else None  # (compared outside the lock: the values never change)

    def last(self, key: tuple) -> _Compiled | None:
        """The thread's last entry, whatever it was compiled from."""
        return self._entries.get(key)

    def put(self, key: tuple, inputs: tuple, ctx: t.CompiledContext, snap: AgentSnapshot) -> None:
        # a section's text is about as long as its tokens times BYTES_PER_TOKEN, the messages' JSON about twice that
        self._store(key, _Compiled(inputs, ctx, snap, ENTRY_BYTES + 3 * BYTES_PER_TOKEN * ctx.total_tokens))

    def body(self, key: tuple, ctx: t.CompiledContext) -> bytes | None:
        entry = self._entries.get(key)
        return entry.body if entry is not None and entry.ctx is ctx else None

    def put_body(self, key: tuple, ctx: t.CompiledContext, body: bytes) -> None:
        entry = self._entries.get(key)
        if entry is not None and entry.ctx is ctx and entry.body is None:
            self._store(key, replace(entry, body=body, size=entry.size + len(body)))

    def _store(self, key: tuple, entry: _Compiled) -> None:
        with self._lock:
            if (old := self._entries.pop(key, None)) is not None:
                self.bytes -= old.size
            self._entries[key] = entry
            self.bytes += entry.size
            while self.bytes > self.budget and len(self._entries) > 1:
                self.bytes -= self._entries.popitem(last=False)[1].size

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0


_compiled = CompiledMemo(16 * 1024 * 1024)  # a few hundred ordinary windows; a few of the largest


def _next_context(agent: Agent, **overrides) -> tuple[t.CompiledContext, AgentSnapshot, dict, tuple]:
    memo_key = (agent.id, getattr(agent, "thread", None))
    last = _compiled.last(memo_key)
    snap = agent_snapshot(agent=agent, prior=last.snap if last is not None else None)
    spec = snap.spec
    window, model, system = overrides.get("context_window_limit"), overrides.get("model"), overrides.get("system")
    if window or model or system is not None:
        spec = replace(
            spec,
            context_window_limit=window or spec.context_window_limit,
            model=model or spec.model,
            system=spec.system if system is None else system,
        )
    call = next_call(agent)
    # Everything the compile and the overview read (the compile is pure): equal inputs, the same context. The
    # values compared are mostly the very objects of the last read (specs and messages are kept per process by
    # their stamps and ids), so comparing them costs little; a changed row is a new value, and never equal.
    inputs = (
        spec,
        snap.blocks,
        snap.tools,
        snap.rules,
        snap.summary,
        snap.body,
        snap.stats,
        snap.files,
        call["run_id"],
        call["history"],
        call["last_output"],
    )
    if (found := _compiled.get(memo_key, inputs)) is not None:
        return found.ctx, snap, call, memo_key
    try:
        allowed = step_allowed(snap, history=call["history"], last_output=call["last_output"])
    except rules.ToolRuleError:  # the run would stop at this rule; show every tool rather than fail the view
        ctx = context_compile(snap, spec=spec)
    else:
        ctx = context_compile(snap, spec=spec, allowed_tools=allowed.tools, tool_choice=allowed.tool_choice)
    _compiled.put(memo_key, inputs, ctx, snap)
    return ctx, snap, call, memo_key


@cache
def _waiting_sql(*, own: bool) -> str:
    column = {name: f'"{Run._meta.get_field(name).column}"' for name in ("id", "agent", "conversation", "waiting")}
    thread = f"{column['conversation']} IS NULL" if own else f"{column['conversation']} = %s"
    return (
        f'SELECT {column["id"]}, {column["waiting"]} FROM "{Run._meta.db_table}" WHERE {column["agent"]} = %s '
        f'AND {thread} AND "{Run._meta.get_field("waiting_until").column}" > %s ORDER BY {column["id"]} LIMIT 1'
    )


def next_call(agent: Agent) -> dict:
    """What the simulator compiles: the first step of the next run, or — when a run of this thread waits at a
    breakpoint before a model call — that run's next step, with the calls it made so far. One hand-written
    statement (a queryset's compile of it cost more CPU than the rest of a context read's reads together)."""
    thread = getattr(agent, "thread", None)
    now = Run._meta.get_field("waiting_until").get_db_prep_value(timezone.now(), connection)
    with connection.cursor() as cursor:
        cursor.execute(_waiting_sql(own=thread is None), [agent.id, *([] if thread is None else [thread]), now])
        waiting = cursor.fetchone()
    wait = Run._meta.get_field("waiting").from_db_value(waiting[1], None, connection) if waiting else None
    if not wait or wait.get("before") != "model_call":
        return {"run_id": None, "history": [], "last_output": None}
    return {"run_id": waiting[0], "history": list(wait.get("history") or []), "last_output": wait.get("last_output")}


def _removed(snap: AgentSnapshot, call: dict, ctx: t.CompiledContext) -> list[dict]:
    """The agent's tools the next call does not offer, each with the rule that removed it."""
    gone = rules.removed_tools(snap.rules, [x.name for x in snap.tools], call["history"], call["last_output"])
    offered = set(ctx.allowed_tools)
    return [
        {"name": name, "rule": rule.to_dict(), "why": rules.rule_text(rule)}
        for name, rule in gone.items()
        if name not in offered
    ]


def _overview(ctx: t.CompiledContext, snap: AgentSnapshot, call: dict) -> dict:
    out = overview(ctx)
    out["sections"] = [{"name": s.name, "tokens": s.tokens, "text": s.text} for s in ctx.sections]
    out["request"] = ctx.request
    out["allowed_tools"] = list(ctx.allowed_tools)
    out["removed_tools"] = _removed(snap, call, ctx)
    out["next_call"] = {"run_id": call["run_id"], "history": call["history"]}
    return out


def context_overview(*, agent: Agent) -> dict:
    """Letta's context-window overview fields, our sections with text, the tokenizer and the exact request; which
    call it is and which tools the rules removed from it."""
    ctx, snap, call, _ = _next_context(agent)
    return _overview(ctx, snap, call)


def context_overview_json(*, agent: Agent) -> bytes:
    """`context_overview` as the JSON the API answers, encoded once for each compiled context: reading an agent
    that did not change since costs its reads and the comparison of what they found, not a compile and an
    encoding of its whole window again."""
    ctx, snap, call, memo_key = _next_context(agent)
    body = _compiled.body(memo_key, ctx)
    if body is None:
        body = json_bytes(_overview(ctx, snap, call))
        _compiled.put_body(memo_key, ctx, body)
    return body


def json_bytes(value) -> bytes:
    """Compact JSON, as orjson writes it (what orjson refuses, such as integers past 64 bits: Django's encoder)."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, cls=DjangoJSONEncoder, ensure_ascii=False, separators=(",", ":")).encode()
