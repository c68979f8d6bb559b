"""The one orchestrator of agent runs: load → compile → call → run tools → decide → persist → emit.

The executor (core.runs.executor) hands it one RunRequest (core.runs.request): `run_start` claims a thread of the
agent for it atomically (a second claim in that thread gets Conflict, HTTP 409; the agent's other threads run side by
side) and resolves its model; `run_steps` then executes the claimed run synchronously, on whichever thread the
executor chose and under its lease, and its events reach the agent's channel group. The send path and one step from
top to bottom are told in docs/architecture.md.

A step has two phases. First everything slow, outside any transaction: the model call, the tool calls
(sandboxes, embeddings, other agents' runs). Then the commit phase, one durable transaction: messages,
block edits, archival inserts, the step record and the window change; events go out only after it
commits. A slow call inside that transaction raises (core.transactions). What a step ended as is one value, a
StepEnd of a kind the engine names (core.engine.loop.StepKind: continue, done, waiting — its reply's calls, or
before its model call, for a person or a client — failed); one function, `_commit`, writes whatever it holds. A
failed model call writes only a step record carrying the error (and the run's end), so the agent's state stays
exactly as before that step; a run that answers a wait on calls begins with a step that runs no model
(`_answer_calls`) and is committed the same way; one that answers a wait before a model call begins with that call
(`_answer_model_call`).

A run's input messages are stored by the claim, in its transaction: a send the API accepted is in the agent's
history even if the process dies before the model answers. They enter the agent's window (and are linked to their
step, as Letta's) with the first step that commits; until then the steps compile them as the turn's pending rows.
"""

import json
import logging
import time
import uuid
from dataclasses import dataclass, field, replace

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from core import ids, mapping
from core.agents import queries, versions
from core.agents.context import AgentSnapshot, agent_snapshot, context_compile, step_allowed
from core.agents.messages import (
    APPROVAL_RESPONSE,
    assistant_calls,
    in_reply,
    is_assistant_return,
    messages_to_letta,
    stop_reason_message,
    usage_statistics,
)
from core.agents.presenters import wait_out
from core.engine import breakpoints, loop
from core.engine import rules as rule_solver
from core.engine.stream import ChunkBuilder
from core.engine.tokens import step_cost
from core.engine.types import LLMResult, StopReason, ToolCall
from core.engine.waits import (
    NOTHING_PENDING,
    PENDING,
    AnswerError,
    answers_match,
    answers_parse,
    client_tool_specs,
    client_tools_check,
    denied,
    waiting_calls,
)
from core.errors import Busy, Conflict, DomainError, Invalid, NotFound
from core.events import group_listened
from core.llm import client as llm
from core.models import RUN_ACTIVE, Agent, Conversation, Message, Organization, Run, RunStatus, Step
from core.providers import model_resolve
from core.runs import overflow, persistence, queue, tool_exec, waits
from core.runs.emit import Emitter, inputs_accepted
from core.runs.request import RunRequest
from core.runs.timetravel import step_state
from core.selectors import found_or_404
from core.telemetry import hooks as telemetry
from core.transactions import outside_transaction

log = logging.getLogger(__name__)


@dataclass
class RunResult:
    run_id: str
    status: str
    stop_reason: str
    messages: list[dict]
    usage: dict
    error: str = ""


@dataclass(kw_only=True)
class _RunState:
    run: Run
    resolved: object
    emitter: Emitter
    max_steps: int
    pending: list = field(default_factory=list)
    history: list[str] = field(default_factory=list)
    last_output: str | None = None
    steps: int = 0
    step_index: int = 0
    usage: dict = field(
        default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, "step_count": 0}
    )
    out: list[dict] = field(default_factory=list)
    error: str = ""
    streams: bool | None = None  # whether the provider streamed (None: not tried yet in this run)
    ended: RunStatus | None = None  # set when the last step's transaction stored the run's end
    fresh_agent: Agent | None = None  # the agent as the claim just read it: the first step's, saving a read
    stepping: bool = False  # a person steps through the run: it stops before every model call and tool call
    released: bool = False  # the next model call was let go from a breakpoint: it does not stop there again
    block_changed: bool = False  # the last step's tools changed a memory block (block_change breakpoints)
    tool_failed: bool = False  # a tool of the last step failed (tool_error breakpoints)
    stored: set[str] = field(default_factory=set)  # pending rows the claim stored already (the run's inputs)

    @property
    def client_names(self) -> tuple[str, ...]:
        """The client-side tools this run offers (Letta's `client_tools`: the client runs them)."""
        return tuple(t["name"] for t in self.run.client_tools or ())


# --------------------------------------------------------------------------- claiming, cancelling


def input_normalize(messages: list[dict]) -> list[dict]:
    """Validate API input messages ({role, content: str | [{type: text, text}]}) into {role, text} dicts."""
    out = []
    for i, m in enumerate(messages or []):
        if m.get("type") in ("approval", "tool_return", "continue"):
            out.append(_answer_normalize(m, i))
            continue
        role = m.get("role", "user")
        content = m["text"] if "text" in m and "content" not in m else m.get("content", "")
        text = (
            content
            if isinstance(content, str)
            else "".join(
                p.get("text", "") for p in content or [] if isinstance(p, dict) and p.get("type", "text") == "text"
            )
        )
        if role not in ("user", "system"):
            raise Invalid(f"messages[{i}].role must be 'user' or 'system'")
        if not text.strip():
            raise Invalid(f"messages[{i}] has no text")
        otid = m.get("otid")
        if otid is not None and (not isinstance(otid, str) or len(otid) > 100):
            raise Invalid(f"messages[{i}].otid must be a string of at most 100 characters")
        out.append(
            {
                "role": role,
                "text": text,
                "sender_agent_id": m.get("sender_agent_id", ""),
                "otid": otid or str(uuid.uuid4()),
            }
        )
    if not out:
        raise Invalid("Send at least one message")
    return out


def _answer_normalize(m: dict, i: int) -> dict:
    """An answer to a run that waits (Letta's ApprovalCreate / ToolReturnCreate): first, and at most once."""
    if i != 0:
        raise Invalid(f"messages[{i}]: an approval answer must be the first message of a request")
    step = m.get("step", False)
    if not isinstance(step, bool):
        raise Invalid(f"messages[{i}].step must be true or false")
    otid = m.get("otid")
    if otid is not None and (not isinstance(otid, str) or len(otid) > 100):
        raise Invalid(f"messages[{i}].otid must be a string of at most 100 characters")
    if m.get("type") == "continue":  # let a run go on from a breakpoint before a model call
        return {"role": "continue", "text": "", "step": step, "otid": otid or str(uuid.uuid4())}
    try:
        answers = answers_parse(m)
    except AnswerError as exc:
        raise DomainError(str(exc)) from None
    return {
        "role": "approval",
        "text": "",
        "answers": [a.to_letta() for a in answers],
        "step": step,
        "otid": otid or str(uuid.uuid4()),
    }


def _wait_check(agent: Agent, conversation_id: str | None, inputs: list[dict], wait: Run | None) -> None:
    """An answer must answer exactly the calls its thread waits for (Letta's texts); any other send to a thread that
    waits is Letta's 409. The answer is matched to the wait here, so the run answers it (`_answer_calls`,
    `_answer_model_call`)."""
    role = inputs[0]["role"]
    if role not in ("approval", "continue"):
        if wait is not None:
            raise Conflict(PENDING, detail=waits.pending_detail(wait))
        return
    if wait is None:
        raise DomainError(NOTHING_PENDING)
    if any(m["role"] in ("approval", "continue") for m in inputs[1:]):
        raise Invalid("Send one approval answer per request")
    inputs[0]["wait_run_id"] = wait.id  # the run whose wait this answers (stored with the run's inputs)
    if role == "continue" and not wait.waiting["calls"]:
        return
    if role == "continue":
        raise DomainError("The run waits on tool calls: answer each of them (type 'approval').")
    if not wait.waiting["calls"]:
        raise DomainError("The run waits before a model call, not on tool calls: continue it (type 'continue').")
    expected = [c["tool_call_id"] for c in wait.waiting["calls"]]
    try:
        matched = answers_match(expected, answers_parse({"approvals": inputs[0]["answers"]}))
    except AnswerError as exc:
        raise DomainError(str(exc)) from None
    inputs[0]["answers"] = [a.to_letta() for a in matched]


def _claim_read(owner: Organization, agent_id: str) -> Agent:
    """The claim's locking read of the agent, with the counts its first step needs, its current version and whether
    it has an enabled sleep-time companion (the run's end counts a turn of it: `executor.run_ended`). On
    SQLite that is one statement: the write transaction began IMMEDIATE, so nothing changes under it. On PostgreSQL
    a locking SELECT that waited for the lock re-reads the row but evaluates subqueries in its snapshot from before
    the wait, so they are read after it, in one statement of their own."""
    if connection.vendor != "postgresql":
        agent = queries.agent_read(agent_id=agent_id, owner_id=owner.pk, counts=True, version=True, companion=True)
    else:
        agent = queries.agent_read(agent_id=agent_id, owner_id=owner.pk, lock=True)
        if agent is not None:
            counted = queries.agent_read(agent_id=agent.pk, counts=True, version=True, companion=True)
            for name in ("snapshot_max_seq", "snapshot_archival", "current_version_id", "companion_enabled"):
                setattr(agent, name, getattr(counted, name))
    return found_or_404(agent, Agent, agent_id)


def thread_busy_text(run_id: str) -> str:
    """Letta's ConversationBusyError as its server renders it (letta/errors.py; the agent's own thread is locked
    the same way, by the agent's id: routers/v1/conversations.py)."""
    return (
        f"CONFLICT: Cannot send a new message: Another request (run_id={run_id}) is currently being processed for "
        "this conversation. Please wait for it to complete."
    )


@transaction.atomic(savepoint=False)  # inside its caller's transaction (executor): nothing catches in between
def run_start(request: RunRequest, *, leased: bool = False) -> Run:
    """Claim a thread of the agent for a new run of `request`, stored as `created` (the agent's row lock); Conflict
    (Letta's ConversationBusyError) if another run is in progress in the same thread. The agent's threads — its own
    and each conversation — run side by side, as Letta's do; their steps' commits take the agent's seqs in turn under
    its row lock (`persistence.agent_lock`). A run whose lease lapsed (its process died) is failed here rather than
    blocking the thread. With `request.conversation_id` the run continues that conversation of the agent (NotFound if
    it has none such) instead of the agent's own thread; `run.agent` is then seen from it (`persistence.thread_view`).
    A person's request gets the agent's model resolved onto it here, from the row just locked (NotConfigured when no
    provider serves it). `leased` stores the run already `running` under this process's lease (its caller executes
    it at once).
    """
    agent = _claim_read(request.owner, request.agent_id)
    inputs = input_normalize(request.input_messages)  # bad input is refused before a busy thread is
    thread = request.conversation_id
    # A separate statement after the lock: on PostgreSQL (READ COMMITTED) it takes a fresh snapshot and so sees
    # a run another transaction committed while we waited; a subquery in the locking SELECT would not.
    # The thread's run in progress and its run that waits for an answer, in one statement.
    found = queries.thread_runs_open(agent_id=agent.pk, conversation_id=thread)
    busy = next((r for r in found if r.status in RUN_ACTIVE), None)
    lost = queue.run_lost(busy) if busy is not None else ""
    if busy is not None and not lost:
        raise Busy(thread_busy_text(busy.id), run_id=busy.id)
    if busy is not None:
        queries.row_update(
            Run,
            where={"id": busy.pk},
            status=RunStatus.FAILED,
            stop_reason="error",
            error=lost,
            completed_at=timezone.now(),
        )
    waiting = [r for r in found if r.waiting_until is not None]
    wait = waits.live(waiting[-1]) if waiting else None
    if waiting and wait is None:  # a wait past its time was ended just now: its denials took the next seqs
        agent.snapshot_max_seq = persistence.agent_lock(agent.pk).max_seq
    _wait_check(agent, thread, inputs, wait)
    try:
        tools = client_tools_check(request.client_tools)
    except AnswerError as exc:
        raise Invalid(str(exc)) from None
    steps = request.max_steps or agent.max_steps
    if not 1 <= steps <= 1000:
        raise Invalid("max_steps must be between 1 and 1000")
    for i, kind in (request.kinds or {}).items():
        inputs[i]["kind"] = kind
    if thread is not None:
        found = Conversation.objects.filter(pk=thread, agent_id=agent.pk, deleted=False)
        if not found.update(last_message_at=timezone.now()):
            raise NotFound(f"Conversation '{thread}' not found")
    if request.refuse_unconfigured:
        request.resolved = model_resolve(owner=request.owner, handle=agent.model)
    run = Run(
        owner=request.owner,
        agent=agent,
        input_messages=inputs,
        max_steps=steps,
        background=request.background,
        depth=request.depth,
        parent_run_id=request.parent_run_id,
        stream_tokens=request.stream_tokens,
        agent_version_id=agent.current_version_id or versions.version_current(agent=agent).id,
        conversation_id=thread,
        client_tools=tools,
        request_config=request.request_config,
        **(_lease_fields() if leased else {}),
    )
    persistence.rows_insert([run])
    run.companion_enabled = agent.companion_enabled  # told at the run's end (executor.run_ended), not asked again
    persistence.thread_view(agent, thread)
    request.inputs = persistence.inputs_store(agent=agent, run=run)
    transaction.on_commit(lambda: inputs_accepted(run))  # every tab shows the person's inputs from now on
    return run


def _lease_fields() -> dict:
    now = timezone.now()
    return {"status": RunStatus.RUNNING, "started_at": now, "worker": queue.WORKER_ID, "heartbeat_at": now}


def run_cancel(*, owner: Organization, agent_id: str, run_ids: list[str] | None = None) -> list[str]:
    """Ask the agent's active runs (or the given ones) to stop at their next step boundary."""
    qs = Run.objects.filter(owner=owner, agent_id=agent_id, status__in=RUN_ACTIVE)
    if run_ids:
        qs = qs.filter(id__in=run_ids)
    found = list(qs.values_list("id", flat=True))
    Run.objects.filter(id__in=found).update(cancel_requested=True)
    # a run that waits for an answer ends now: its calls are denied (Letta's cancel_run)
    return found + waits.cancel(owner=owner, agent_id=agent_id, run_ids=run_ids)


# --------------------------------------------------------------------------- the loop


def run_steps(run: Run, request: RunRequest, *, agent_fresh: bool = False) -> RunResult:
    """Execute a claimed run to its end on this thread (LLM calls, tool runs, one transaction per step, events after
    each commit); the executor calls it under the run's lease. The model is `request.resolved` when the claim
    resolved it, else resolved here (a failure ends the run with the how-to). `agent_fresh` says `run.agent` was
    read under the claim's lock or just before the lease, so the first step starts from it (a change or a cancel
    landing in between is seen at the next step, as one landing during the first is)."""
    with telemetry.run_span(run):
        return _run_claimed(run, request, agent_fresh=agent_fresh)


def run_agent(
    *, agent_id: str, owner: Organization, input_messages: list[dict], max_steps: int | None = None
) -> RunResult:
    """Claim the agent and execute the run on this thread, without the executor's queue or lease: for tests of the
    loop itself and the step benchmark. Everything else goes through core.runs.executor."""
    request = RunRequest(
        owner=owner, agent_id=agent_id, input_messages=input_messages, max_steps=max_steps, refuse_unconfigured=False
    )
    return run_steps(run_start(request), request)


def _run_claimed(run: Run, request: RunRequest, *, agent_fresh: bool) -> RunResult:
    """run_steps' loop, for a run already claimed."""
    agent_id = run.agent_id
    if run.status == RunStatus.CREATED:
        queries.row_update(Run, where={"id": run.pk}, status=RunStatus.RUNNING, started_at=timezone.now())
    emitter = Emitter(agent_id, run.id, run.conversation_id)
    agent = run.agent if agent_fresh else persistence.thread_view(run.agent, run.conversation_id)
    try:
        if request.resolved is None:
            request.resolved = model_resolve(owner=request.owner, handle=agent.model)
    except Exception as exc:
        return _finish(
            _RunState(run=run, resolved=None, emitter=emitter, max_steps=run.max_steps, error=str(exc)),
            StopReason.ERROR,
        )
    rs = _RunState(
        run=run,
        resolved=request.resolved,
        emitter=emitter,
        max_steps=run.max_steps,
        fresh_agent=agent if agent_fresh else None,
    )
    answer = next((m for m in run.input_messages if m["role"] in ("approval", "continue")), None)
    # the input rows the claim stored: handed over by a claim in this process, else read back
    rs.pending = list(request.inputs if request.inputs is not None else persistence.inputs_read(run=run))
    rs.stored = {r.id for r in rs.pending}
    emitter.emit(
        {"message_type": "run_status", "run_id": run.id, "status": "running", "stop_reason": None}, to_caller=False
    )
    try:
        stop = None
        if answer is not None:
            stop = _answer_calls(rs, answer) if answer["role"] == "approval" else _answer_model_call(rs, answer)
        while stop is None:
            with telemetry.step(rs.step_index):
                stop = _step(rs)
    except Exception as exc:  # noqa: BLE001 - the run must end with a status whatever went wrong
        log.exception("run %s failed", run.id)
        telemetry.run_error(exc)
        rs.error = rs.error or f"{type(exc).__name__}: {exc}"
        stop = StopReason.ERROR
    return _finish(rs, stop)


def _agent_unless_cancelled(run: Run) -> Agent | None:
    """The agent's current row, or None if the run was asked to stop (one query for both)."""
    agent = queries.agent_read(agent_id=run.agent_id, counts=True, cancelled_run_id=run.pk)
    if agent is None:
        raise Agent.DoesNotExist(f"Agent '{run.agent_id}' was deleted during the run")
    return None if agent.cancelled else persistence.thread_view(agent, run.conversation_id)


def _with_client_tools(rs: _RunState, snap: AgentSnapshot) -> AgentSnapshot:
    """The snapshot with this run's client-side tools offered too; a server tool of the same name gives way to the
    client's (Letta's _get_valid_tools)."""
    if not rs.run.client_tools:
        return snap
    names = set(rs.client_names)
    snap.tools = [t for t in snap.tools if t.name not in names] + client_tool_specs(rs.run.client_tools)
    return snap


def _snapshot(rs: _RunState, agent: Agent) -> AgentSnapshot:
    """The agent's snapshot for the run's next step: its client tools offered, and the inputs the claim stored but no
    step has put in the window yet counted as in context (they are compiled as the turn's), not as recall."""
    snap = _with_client_tools(rs, agent_snapshot(agent=agent))
    early = sum(1 for r in rs.pending if r.id in rs.stored)
    if early:
        snap.stats = replace(snap.stats, recall_outside_window=max(0, snap.stats.recall_outside_window - early))
    return snap


def _compile(rs: _RunState, snap: AgentSnapshot):
    allowed = step_allowed(snap, history=rs.history, last_output=rs.last_output, client=rs.client_names)
    extra = [mapping.message(r) for r in rs.pending]
    ctx = context_compile(snap, extra=extra, allowed_tools=allowed.tools, tool_choice=allowed.tool_choice)
    return allowed, ctx


def _fit(rs: _RunState, snap: AgentSnapshot, *, force: bool = False):
    """Compile; evict and summarize first if the context is too full; add the memory-pressure warning."""
    allowed, ctx = _compile(rs, snap)
    extra_tokens = sum(r.token_count for r in rs.pending)
    if force or loop.memory_pressure(ctx.total_tokens, ctx.context_window) == "evict" or not ctx.fits:
        row = overflow.evict(
            snap=snap,
            ctx=ctx,
            extra_tokens=extra_tokens,
            resolved=rs.resolved,
            run=rs.run,
            step_index=rs.step_index,
            force=force,
            pending=rs.pending,
        )
        if row is not None:
            rs.step_index += 1
            rs.emitter.emit({**messages_to_letta([row])[0]}, to_caller=False)
            agent = persistence.thread_view(Agent.objects.get(pk=snap.agent.id), rs.run.conversation_id)
            snap = _snapshot(rs, agent)
            allowed, ctx = _compile(rs, snap)
    if not ctx.fits:
        raise overflow.ContextTooLarge(overflow.too_large_message(ctx, rs.pending))
    warned = "memory_warning" in snap.kinds.values() or any(r.kind == "memory_warning" for r in rs.pending)
    if not warned and loop.memory_pressure(ctx.total_tokens, ctx.context_window) == "warn":
        rs.pending.append(
            persistence.message_build(
                agent=snap.agent,
                role="user",
                kind="memory_warning",
                text=loop.memory_pressure_warning(ctx.total_tokens, ctx.context_window),
            )
        )
        allowed, ctx = _compile(rs, snap)
    return snap, allowed, ctx


def _watched(rs: _RunState) -> bool:
    """Whether anyone follows this run's tokens: its caller asked for them, or a tab (or stream) listens to the
    agent. Streaming costs CPU per chunk, so a reply nobody watches is fetched whole."""
    return rs.run.stream_tokens or group_listened(rs.emitter.group) is not False


def _call(rs: _RunState, ctx, step_id: str, message_id: str, *, thinking_arg: bool = True, snap=None):
    """The model call, streamed when LLM_STREAMING is on and someone watches: token chunks of the message it
    will store go to the agent's group as they arrive. A provider that refuses to stream is asked again
    without streaming; a stream that breaks after chunks went out fails the step (LLMError), leaving the
    state as before it."""
    outside_transaction("the model call")
    request = {**ctx.request, "model": rs.resolved.litellm_model}
    call = {
        "api_base": rs.resolved.api_base,
        "api_key": rs.resolved.api_key,
        "guarded": rs.resolved.guarded,
        "timeout": settings.LLM_TIMEOUT_S,
    }
    if not (settings.LLM_STREAMING and rs.streams is not False and _watched(rs)):
        return request, llm.complete(request, **call)
    chunks = ChunkBuilder(
        message_id=message_id,
        run_id=rs.run.id,
        step_id=step_id,
        date=timezone.now().isoformat(timespec="seconds"),
        thinking_arg=thinking_arg,
        waits=_waits_on(rs, snap) if snap is not None else None,
    )

    def on_delta(delta) -> None:
        for chunk in chunks.feed(delta):
            rs.emitter.stream(chunk)

    try:
        result = llm.complete(request, stream=True, on_delta=on_delta, **call)
    except llm.LLMError as exc:
        if chunks.count or exc.kind != "bad_request":  # only a refusal to stream is worth asking again
            raise
        log.info("streaming failed before any token (%s); asking %s without streaming", exc.message, request["model"])
        rs.streams = False  # this run's provider does not stream: don't try again on its next steps
        return request, llm.complete(request, **call)
    finally:
        rs.emitter.flush()
    rs.streams = True
    return request, result


# --------------------------------------------------------------------------- one step, one commit


@dataclass(kw_only=True)
class Calls:
    """A step's tool calls as they ran, settled in its commit: `parsed` (with a person's edits), their `outcomes` by
    index (their writes are applied in the commit), and the indexes `fixed` that an answer settled without running
    (a denial, a client's result)."""

    parsed: loop.ParsedResponse
    outcomes: dict[int, tool_exec.ToolOutcome]
    fixed: frozenset[int] = frozenset()
    answered: bool = False  # a denial or a client's result is among them: it goes back to the model
    finish_reason: str | None = None

    def history(self, before: list[str]) -> list[str]:
        """The run's tool history with the calls that ran now (for tool rules)."""
        return before + [c.name for i, c in enumerate(self.parsed.calls) if c.valid and i not in self.fixed]


@dataclass(kw_only=True)
class StepEnd:
    """What a step ended as (`kind`: core.engine.loop.StepKind) and all that its commit writes in one transaction
    (`_commit`). A step whose calls ran (`calls`) has no kind yet: the engine decides continue or done in the
    commit, once the calls' writes are applied (a write refused then fails its call)."""

    kind: loop.StepKind | None
    snap: AgentSnapshot
    stop: StopReason | None = None  # why a waiting or failed step ends the run
    started: float = 0.0  # perf_counter() when the step began (its record's total_ms)
    step_id: str | None = None  # the step record's id; for a settled wait, the waiting reply's step
    record: dict | None = (
        None  # the step record's fields (None: no record, for a wait before a model call or a settled wait)
    )
    reply: Message | None = None  # the model's reply
    answer: Message | None = None  # a person's or a client's answer to a wait, stored outside the window
    calls: Calls | None = None
    takes: str | None = None  # the wait this step answers, taken in the commit: the first answer wins
    waiting: dict | None = None  # what the run waits for from now on (the waiting kinds)
    inputs: bool = True  # the turn's pending rows are stored with this step (a settled wait leaves them to the next)
    error_kind: str | None = None  # a failed model call's kind of error


def _step(rs: _RunState) -> StopReason | None:
    """One step: load, compile, stop at a breakpoint, call the model, run the calls that wait for no one; what it
    ended as is one StepEnd, which `_commit` writes. Returns the run's stop reason, or None to go on."""
    started = time.perf_counter()
    agent, rs.fresh_agent = rs.fresh_agent or _agent_unless_cancelled(rs.run), None
    if agent is None:
        return StopReason.CANCELLED
    snap = _snapshot(rs, agent)
    try:
        snap, allowed, ctx = _fit(rs, snap)
    except rule_solver.ToolRuleError as exc:
        rs.error = str(exc)
        return StopReason.TOOL_RULE
    except overflow.ContextTooLarge as exc:
        rs.error = str(exc)
        return StopReason.ERROR
    hit = None
    if not rs.released:
        hit = breakpoints.model_call_hit(
            _breakpoints(snap),
            tokens=ctx.total_tokens,
            block_changed=rs.block_changed,
            tool_failed=rs.tool_failed,
            stepping=rs.stepping,
        )
    rs.released = False
    if hit is not None:
        return _commit(rs, _wait_model_call(rs, snap, ctx, hit))
    state = step_state(snap, allowed, rs.pending)
    step_id, message_id = ids.new_id("step"), ids.new_id("message")
    telemetry.step_identify(step_id)
    model_started = time.perf_counter()
    try:
        request, result = _call(rs, ctx, step_id, message_id, thinking_arg=snap.spec.heartbeats, snap=snap)
    except llm.LLMError as exc:
        if exc.kind != "context_length":
            return _commit(rs, _failed(rs, snap, ctx, exc, step_id=step_id, started=started, state=state))
        try:  # our count was too low for this provider: evict harder once, then retry
            snap, allowed, ctx = _fit(rs, snap, force=True)
            state = step_state(snap, allowed, rs.pending)
            request, result = _call(rs, ctx, step_id, message_id, thinking_arg=snap.spec.heartbeats, snap=snap)
        except (llm.LLMError, overflow.ContextTooLarge) as again:
            return _commit(rs, _failed(rs, snap, ctx, again, step_id=step_id, started=started, state=state))
    model_ms = (time.perf_counter() - model_started) * 1000
    parsed = loop.parse_response(result, snap.tools, allowed=allowed)
    end = _replied(snap, ctx, request, result, parsed, message_id=message_id, step_id=step_id, model_ms=model_ms)
    end.started, end.record["state"] = started, state
    waiting = _waiting_calls(rs, snap, parsed)
    if waiting:
        return _commit(rs, _wait_calls(rs, end, parsed, waiting))
    with versions.authored_by(versions.Author("agent", step_id)):  # a definition the step's tools change names it
        tools_started = time.perf_counter()
        outcomes = tool_exec.calls_run(parsed, snap, step_id)
        end.record["tools_ms"] = (time.perf_counter() - tools_started) * 1000
        end.calls = Calls(parsed=parsed, outcomes=outcomes, finish_reason=result.finish_reason)
        return _commit(rs, end)


def _replied(snap, ctx, request, result, parsed, *, message_id: str, step_id: str, model_ms: float) -> StepEnd:
    """A step the model answered, before its calls run or wait: the reply's row and the step record's fields."""
    usage = persistence.usage_dict(result.usage, first_token_ms=result.first_token_ms)
    # Our own pre-call count beside the provider's, and the price (None: the model has no known price).
    usage.update(estimated_prompt_tokens=ctx.total_tokens, cost_usd=step_cost(snap.spec.model, usage))
    record = {
        "request": request,
        "response": result.raw,
        "sections": ctx.sections,
        "tokenizer": ctx.tokenizer,
        "usage": usage,
        "model_ms": model_ms,
        "tools_ms": 0.0,
    }
    reply = _assistant_row(snap.agent, result, parsed, message_id)
    return StepEnd(kind=None, snap=snap, step_id=step_id, record=record, reply=reply)


def _failed(rs: _RunState, snap, ctx, exc, *, step_id: str, started: float, state: dict) -> StepEnd:
    """A failed model call: only a step record carrying the error, so the agent's state stays as before the step."""
    rs.error = getattr(exc, "message", None) or str(exc)
    return StepEnd(
        kind=loop.StepKind.FAILED,
        snap=snap,
        stop=StopReason.ERROR if isinstance(exc, overflow.ContextTooLarge) else StopReason.LLM_API_ERROR,
        started=started,
        step_id=step_id,
        record={
            "request": ctx.request,
            "sections": ctx.sections,
            "tokenizer": ctx.tokenizer,
            "stop_reason": "llm_api_error",
            "error": rs.error,
            "state": state,
        },
        inputs=False,  # the turn's messages stay as the claim stored them
        error_kind=getattr(exc, "kind", None),
    )


def _commit(rs: _RunState, end: StepEnd) -> StopReason | None:
    """The one writer of a step, whatever it ended as, in one durable transaction under the agent's row lock: the
    wait it answers taken, its calls' writes applied and the engine's decision on them, the step record, its
    messages (numbered from the agent's sequence), tool runs and usage, then the thread's window — or, when the run
    ends with the step, the run's end with that window, and what the run waits for. Events go out after the commit.
    Returns the run's stop reason, or None to go on."""
    snap, tool_rows, failed, decision = end.snap, [], [], None
    with transaction.atomic(durable=True):  # the commit phase: writes only
        agent = persistence.thread_lock(snap.agent)
        if end.takes is not None and not waits.take(end.takes):
            raise Conflict("This wait was answered by someone else first.", detail={"run_id": end.takes})
        if end.calls is not None:
            tool_exec.effects_apply(end.calls.outcomes)
            tool_rows, failed = _tool_rows(agent, snap, end.calls.parsed, end.calls.outcomes)
        if end.reply is not None:
            rs.steps += 1
        if end.calls is not None:
            decision = _decided(rs, end, failed)
        if end.record is None:  # a settled wait's rows link to the waiting reply's step, stored already
            step = Step(pk=end.step_id) if end.step_id else None
        else:
            step = persistence.step_record(
                run=rs.run,
                agent=agent,
                step_id=end.step_id,
                index=rs.step_index,
                total_ms=(time.perf_counter() - end.started) * 1000,
                **{"stop_reason": str(end.stop or ""), **end.record},
            )
        rows = [*(rs.pending if end.inputs else ()), *(r for r in (end.reply, end.answer) if r), *tool_rows]
        persistence.messages_store(agent=agent, rows=rows, run=rs.run, step=step, stored=rs.stored)
        window = list(agent.message_ids) + [r.id for r in rows if r is not end.answer]
        tool_runs = [o.tool_run for o in end.calls.outcomes.values() if o.tool_run is not None] if end.calls else []
        if tool_runs:
            type(tool_runs[0]).objects.bulk_create(tool_runs)
        if end.reply is not None:
            _account(rs, end.record["usage"])
        if end.kind == loop.StepKind.CONTINUE:
            persistence.window_set(agent_id=agent.id, message_ids=window, conversation_id=agent.thread)
        else:  # the run ends with this step: its end is stored in the step's transaction (one commit, not two)
            _end_store(rs, end.stop, message_ids=None if end.kind == loop.StepKind.FAILED else window)
        if end.waiting is not None:
            rs.run.waiting = {**end.waiting, "since": timezone.now().isoformat()}
            rs.run.waiting_until = waits.until()
            Run.objects.filter(pk=rs.run.pk).update(waiting=rs.run.waiting, waiting_until=rs.run.waiting_until)
    persistence.run_rows_keep(rs.run, rows)  # committed: a synchronous caller answers from them
    return _announce(rs, end, agent, rows=rows, failed=failed, decision=decision)


def _decided(rs: _RunState, end: StepEnd, failed: list[bool]) -> loop.Decision:
    """The engine's decision on a step whose calls ran and whose writes are applied: it gives the step its kind."""
    decision = loop.decide_next(
        parsed=end.calls.parsed,
        failed=failed,
        tool_rules=end.snap.rules,
        history=end.calls.history(rs.history),
        steps_taken=rs.steps,
        max_steps=rs.max_steps,
        heartbeats=end.snap.spec.heartbeats,
        finish_reason=end.calls.finish_reason,
        answered=end.calls.answered,
        more_input=bool(rs.pending) and not end.inputs,  # messages sent with an answer wait for the model
    )
    end.kind, end.stop = decision.kind, decision.stop_reason
    return decision


def _announce(rs: _RunState, end: StepEnd, agent: Agent, *, rows, failed, decision) -> StopReason | None:
    """After a step's commit: the run's state for its next step, and the step's events."""
    agent_type = end.snap.spec.agent_type
    if end.kind == loop.StepKind.FAILED:
        rs.step_index += 1
        rs.emitter.emit(
            {
                "message_type": "error_message",
                "run_id": rs.run.id,
                "step_id": end.step_id,
                "error_type": "llm_error",
                "message": rs.error,
                "detail": end.error_kind,
            }
        )
        return end.stop
    if end.inputs:
        rs.pending = []
    if end.calls is not None:
        _settled(rs, end.calls, failed)
    if end.kind == loop.StepKind.WAITING_MODEL_CALL:
        for row in rows:
            for event in messages_to_letta([row], agent_type=agent_type):
                rs.emitter.emit(event, to_caller=False, flush=False)
        return end.stop
    if end.answer is not None:
        _emit_answer(rs, end, rows)
    else:
        rs.step_index += 1
        # a run's last step: its events go out with the run's end (_finish, at once), in one channel-layer message
        _emit_step(rs, rows, rs.step_index - 1, agent_type, flush=end.kind == loop.StepKind.CONTINUE)
    if end.kind != loop.StepKind.CONTINUE:
        return end.stop
    # letta_v1_agent continues on the tool results alone; a heartbeat goes only where the decision gives a reason.
    if decision.heartbeat_reason:
        rs.pending.append(
            persistence.message_build(
                agent=agent, role="user", kind="heartbeat", text=loop.heartbeat_message(decision.heartbeat_reason)
            )
        )
    return None


def _settled(rs: _RunState, calls: Calls, failed: list[bool]) -> None:
    """What the next step needs from the calls that ran: the tool history, whether a block changed or a call failed
    (breakpoints), the last call's output (tool rules)."""
    rs.history = calls.history(rs.history)
    rs.block_changed = any(o.ok and o.memory_edit for o in calls.outcomes.values())
    rs.tool_failed = any(failed)
    ran = [i for i, c in enumerate(calls.parsed.calls) if c.valid and i in calls.outcomes and i not in calls.fixed]
    rs.last_output = calls.outcomes[ran[-1]].value if ran else rs.last_output


def _emit_answer(rs: _RunState, end: StepEnd, rows) -> None:
    """A settled wait's events: the answer to the tabs; each tool result to them, and to a token-streaming caller
    only what ran here, as Letta's (it knows its own answers)."""
    agent_type, calls = end.snap.spec.agent_type, end.calls
    for event in messages_to_letta([end.answer], agent_type=agent_type):
        rs.emitter.emit(event, to_caller=False, flush=False)
    server_side = {
        c.call.id
        for i, c in enumerate(calls.parsed.calls)
        if i not in calls.fixed and (not c.valid or i in calls.outcomes)
    }
    for row in rows:
        if row is end.answer:
            continue
        mine = row.tool_call_id in server_side or not rs.run.stream_tokens
        for event in messages_to_letta([row], agent_type=agent_type):
            if mine:
                rs.out.append(event)
            rs.emitter.emit(event, to_caller=mine, flush=False)
    rs.emitter.emit({"message_type": "context_update", "run_id": rs.run.id}, to_caller=False)


def _assistant_row(agent, result, parsed, message_id: str):
    reasoning, source = "", ""
    parts = parsed.reasoning_parts()
    if parts:
        reasoning = "\n\n".join(p[0] for p in parts)
        source = "native" if parts[0][1] == "reasoner_model" else "thinking_arg"
    calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in result.tool_calls]
    return persistence.message_build(
        agent=agent,
        role="assistant",
        text=result.content or "",
        reasoning=reasoning,
        reasoning_source=source,
        tool_calls=calls,
        message_id=message_id,
        thinking_blocks=result.thinking_blocks,
    )


def _tool_rows(agent, snap, parsed, outcomes) -> tuple[list, list[bool]]:
    """One tool row per call, from its outcome (a call with none: its error), and which calls failed."""
    limits = {t.name: t.return_char_limit for t in snap.tools}
    rows, failed = [], []
    for i, call in enumerate(parsed.calls):
        out = outcomes.get(i) or tool_exec.ToolOutcome(False, call.error or "not run")
        failed.append(not out.ok)
        rows.append(
            persistence.message_build(
                agent=agent,
                role="tool",
                text=out.content(limits.get(call.name, 50000)),
                tool_call_id=call.call.id,
                name=call.name,
                tool_return={**out.tool_return(), **out.extra},  # extra: a denial, a person's edited arguments
            )
        )
    return rows, failed


# --------------------------------------------------------------------------- waiting for a person or a client


def _breakpoints(snap: AgentSnapshot) -> list[breakpoints.Breakpoint]:
    return breakpoints.breakpoints_load(getattr(snap.agent, "breakpoints", None) or [])


def _tool_breakpoints(rs: _RunState, snap: AgentSnapshot) -> list[breakpoints.ToolBreakpoint]:
    return breakpoints.tool_breakpoints(_breakpoints(snap), stepping=rs.stepping)


def _waits_on(rs: _RunState, snap: AgentSnapshot):
    """Whether a call to a tool of this name would wait (token chunks of such a call are approval requests)."""
    client, points = set(rs.client_names), _tool_breakpoints(rs, snap)

    def waits(name: str) -> bool:
        return name in client or rule_solver.needs_approval(name, snap.rules) or any(b.hits(name) for b in points)

    return waits


def _waiting_calls(rs: _RunState, snap: AgentSnapshot, parsed) -> dict[int, str]:
    return waiting_calls(
        ((c.name, c.valid) for c in parsed.calls),
        rules=snap.rules,
        client_tools=rs.client_names,
        breakpoints=_tool_breakpoints(rs, snap),
    )


def _wait_calls(rs: _RunState, end: StepEnd, parsed, waiting: dict[int, str]) -> StepEnd:
    """The reply asks for a person or a client: nothing of it runs. Its input and the reply are stored, the run ends
    `requires_approval` with what it waits for (core.runs.waits), and the answer goes on from it as a new run
    (`_answer_calls`)."""
    calls = [
        {
            "tool_call_id": parsed.calls[i].call.id,
            "name": parsed.calls[i].name,
            "arguments": parsed.calls[i].call.arguments,
            "reason": why,
        }
        for i, why in waiting.items()
    ]
    end.kind, end.stop = loop.StepKind.WAITING_CALLS, StopReason.REQUIRES_APPROVAL
    end.record["stop_reason"] = str(StopReason.REQUIRES_APPROVAL)
    end.reply.tool_return = {"waiting": {c["tool_call_id"]: c["reason"] for c in calls}}
    end.waiting = {
        "kind": calls[0]["reason"],
        "message_id": end.reply.id,
        "step_id": end.step_id,
        "calls": calls,
        "deferred": [c.call.id for i, c in enumerate(parsed.calls) if i not in waiting],
        "errors": {c.call.id: c.error for c in parsed.calls if not c.valid},  # kept: no rule re-checks them on resume
        "history": rs.history,
        "last_output": rs.last_output,
    }
    return end


def _wait_model_call(rs: _RunState, snap, ctx, hit: breakpoints.Breakpoint) -> StepEnd:
    """A breakpoint before a model call: the step's input is stored (so a person sees, and may edit, the state the
    call will be compiled from), nothing is sent, and the run ends waiting; its answer (continue, step) is a new run
    that begins with this call (`_answer_model_call`)."""
    waiting = {
        "kind": "breakpoint",
        "before": "model_call",
        "breakpoint": hit.to_dict(),
        "why": "stepping: before the next model call" if hit.id == "step" else hit.describe(),
        "message_id": None,
        "step_id": None,
        "calls": [],
        "deferred": [],
        "tokens": ctx.total_tokens,
        "history": rs.history,
        "last_output": rs.last_output,
    }
    return StepEnd(kind=loop.StepKind.WAITING_MODEL_CALL, snap=snap, stop=StopReason.REQUIRES_APPROVAL, waiting=waiting)


def _answer_model_call(rs: _RunState, item: dict) -> StopReason | None:
    """The answer to a wait before a model call (continue, step): the wait is taken (the first answer wins: one
    conditional update), the tool-rule history carries over, and the next model call is not stopped again (with
    `step`, the one after it is)."""
    waited = Run.objects.filter(pk=item.get("wait_run_id") or item.get("resumes")).first()  # resumes: before 2026-12
    if waited is None or not waits.take(waited.pk):
        rs.error = "The wait this answer was for was answered, cancelled or expired meanwhile."
        return StopReason.ERROR
    wait = waited.waiting or {}
    rs.history, rs.last_output = list(wait.get("history") or []), wait.get("last_output")
    rs.stepping, rs.released = bool(item.get("step")), True
    return None


def _answered(answer, call, snap, client: set[str]):
    """The outcome an answer gives a waiting call without running it (a denial, a client's result), else None (it
    runs, with the person's edited arguments if any: the call to run is returned beside)."""
    if answer.kind == "tool":
        return (
            tool_exec.ToolOutcome(
                answer.status == "success",
                answer.tool_return,
                "\n".join(answer.stdout),
                "\n".join(answer.stderr),
                sandbox="client",
            ),
            call,
        )
    if not answer.approve:
        return tool_exec.ToolOutcome(False, denied(answer.reason), extra={"denied": True}), call
    if call.name in client:
        text = f"'{call.name}' is a client-side tool: the client answers it with its result (type 'tool'), not approval"
        return tool_exec.ToolOutcome(False, text), call
    if answer.arguments is not None:
        edited = ToolCall(id=call.call.id, name=call.name, arguments=json.dumps(answer.arguments, ensure_ascii=False))
        return None, loop.check_call(edited, snap.tools)
    return None, call


def _answer_calls(rs: _RunState, answer: dict) -> StopReason | None:
    """The first step of a run that answers a wait: no model call. The waiting reply's calls get their answers —
    approved ones (and the reply's other calls) run, denials and client results are taken as given — and the step
    is committed as any other (`_commit`): one tool row per call, stored with the answer itself
    (approval_response_message, kept out of the window), the wait taken (the first answer wins: a wait answered
    meanwhile fails this run), and the engine's decision on the results."""
    started = time.perf_counter()
    agent, rs.fresh_agent = rs.fresh_agent or _agent_unless_cancelled(rs.run), None
    if agent is None:
        return StopReason.CANCELLED
    snap = _snapshot(rs, agent)
    waited = Run.objects.get(pk=answer.get("wait_run_id") or answer["resumes"])  # resumes: a run stored before 2026-12
    wait = waited.waiting or {}
    if waited.waiting_until is None:
        rs.error = "The wait this answer was for was answered, cancelled or expired meanwhile."
        return StopReason.ERROR
    rs.history, rs.last_output = list(wait.get("history") or []), wait.get("last_output")
    rs.stepping = bool(answer.get("step"))
    reply = Message.objects.get(pk=wait["message_id"])
    calls = tuple(ToolCall(id=c["id"], name=c["name"], arguments=c.get("arguments", "{}")) for c in reply.tool_calls)
    parsed = loop.parse_response(LLMResult(tool_calls=calls), snap.tools)
    errors = wait.get("errors") or {}
    parsed = replace(parsed, calls=tuple(replace(c, error=errors.get(c.call.id, c.error)) for c in parsed.calls))
    answers = {a.tool_call_id: a for a in answers_parse({"approvals": answer["answers"]})}
    client = set(rs.client_names) | {c["name"] for c in wait.get("calls", []) if c.get("reason") == "client"}
    fixed, to_run = {}, list(parsed.calls)
    for i, call in enumerate(parsed.calls):
        if call.call.id in answers:
            outcome, to_run[i] = _answered(answers[call.call.id], call, snap, client)
            if outcome is not None:
                fixed[i] = outcome
    runnable = replace(
        parsed, calls=tuple(replace(c, error="answered") if i in fixed else c for i, c in enumerate(to_run))
    )
    outcomes = tool_exec.calls_run(runnable, snap, wait["step_id"])
    outcomes.update(fixed)
    for i, call in enumerate(to_run):  # what ran with a person's edit says so on its result
        if i not in fixed and call.call.arguments != parsed.calls[i].call.arguments and i in outcomes:
            outcomes[i].extra["arguments"] = call.args
    said = persistence.message_build(
        agent=snap.agent,
        role="user",
        kind=APPROVAL_RESPONSE,
        text=json.dumps(answer["answers"], ensure_ascii=False),
        otid=answer.get("otid", ""),
    )
    settled = Calls(
        parsed=replace(parsed, calls=tuple(to_run)),
        outcomes=outcomes,
        fixed=frozenset(fixed),
        answered=any(a.kind == "tool" or not a.approve for a in answers.values()),
    )
    end = StepEnd(kind=None, snap=snap, step_id=wait["step_id"], answer=said, calls=settled, takes=waited.pk)
    end.inputs = False  # messages sent with the answer go to the model at the next step
    stop = _commit(rs, end)
    log.debug("run %s answered %s in %.1f ms", rs.run.id, waited.pk, (time.perf_counter() - started) * 1000)
    return stop


def _account(rs: _RunState, usage: dict) -> None:
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        rs.usage[key] += usage.get(key, 0)
    rs.usage["step_count"] += 1
    telemetry.cost(rs.resolved.litellm_model, usage.get("cost_usd"))  # labelled as the model call counts tokens
    if usage.get("cost_usd") is None:
        rs.usage["unpriced_steps"] = rs.usage.get("unpriced_steps", 0) + 1
    else:
        rs.usage["cost_usd"] = round(rs.usage.get("cost_usd", 0.0) + usage["cost_usd"], 10)


def _emit_step(rs: _RunState, rows, step_index: int, agent_type: str, *, flush: bool = True) -> None:
    calls = assistant_calls(rows)
    for row in rows:
        for event in messages_to_letta([row], agent_type=agent_type):
            event["step_index"] = step_index
            # user-role rows (input, heartbeats) and send_message's return (Letta hides it) go to the IDE's tabs only
            is_input = not in_reply(row) or is_assistant_return(row, calls)
            if not is_input:
                rs.out.append(event)
            rs.emitter.emit(event, to_caller=not is_input, flush=False)
    rs.emitter.emit({"message_type": "context_update", "run_id": rs.run.id}, to_caller=False, flush=flush)


def _end_store(rs: _RunState, stop: StopReason, *, message_ids: list[str] | None = None) -> None:
    """Store the run's outcome on the run and the agent (the agent's row first, as everywhere; `message_ids`: the
    agent's new window, written with it) and keep the caller's run object current: a synchronous caller answers
    from it without reading it back."""
    status = {
        StopReason.CANCELLED: RunStatus.CANCELLED,
        StopReason.ERROR: RunStatus.FAILED,
        StopReason.LLM_API_ERROR: RunStatus.FAILED,
    }.get(stop, RunStatus.COMPLETED)
    now = timezone.now()
    usage = {**rs.usage, "run_ids": [rs.run.id]}
    window = {} if message_ids is None else {"message_ids": message_ids}
    agent_row = {"id": rs.run.agent_id}
    if rs.run.conversation_id is None:
        queries.row_update(Agent, where=agent_row, last_stop_reason=str(stop), last_run_completion=now, **window)
    else:  # the agent's row first (the lock order), then the conversation's window
        queries.row_update(Agent, where=agent_row, last_stop_reason=str(stop), last_run_completion=now)
        Conversation.objects.filter(pk=rs.run.conversation_id).update(last_run_completion=now, **window)
    queries.row_update(
        Run,
        where={"id": rs.run.pk},
        status=status,
        stop_reason=str(stop),
        usage=usage,
        error=rs.error,
        completed_at=now,
    )
    rs.run.status, rs.run.stop_reason, rs.run.usage, rs.run.error, rs.run.completed_at = (
        status,
        str(stop),
        usage,
        rs.error,
        now,
    )
    rs.ended = status


def _finish(rs: _RunState, stop: StopReason) -> RunResult:
    """Record the run's outcome (unless its last step's transaction did), then emit stop_reason, usage and
    run_status."""
    if rs.ended is None or rs.run.stop_reason != str(stop):  # (a failure after that step's commit ends it anew)
        with transaction.atomic():
            _end_store(rs, stop)
    status, usage = rs.run.status, rs.run.usage
    telemetry.run_ended(rs.run, stop_reason=str(stop), steps=rs.steps, usage=usage)
    rs.emitter.emit(stop_reason_message(str(stop)), flush=False)
    rs.emitter.emit(usage_statistics(usage), flush=False)
    rs.emitter.emit(
        {
            "message_type": "run_status",
            "run_id": rs.run.id,
            "status": status,
            "stop_reason": str(stop),
            "error": rs.error or None,
            "waiting": wait_out(rs.run),
        },
        to_caller=False,
    )
    return RunResult(
        run_id=rs.run.id, status=status, stop_reason=str(stop), messages=rs.out, usage=usage, error=rs.error
    )
