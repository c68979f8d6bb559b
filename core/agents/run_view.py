"""A run seen whole, for the IDE: its timeline (a waterfall of the spans the OTLP export carries, built from what
the run's rows record: queueing, each step's context compile, model call and tool calls, the commit after it, a
wait for a person, the runs of other agents it reached) and its runs by thread. Steps are numbered within their
conversation, so a thread's steps read 1, 2, 3… across its runs. The graph is drawn in core.agents.run_graph."""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, F, OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from core.models import Message, Run, Step
from core.telemetry import tracing

# A step records its model and tools time and its total; the rest (compiling the context before the call, locking
# and writing after the tools) is drawn as one span before the call: the split between the two is not recorded.
_PREPARE = "compiling the context and storing the step"
MAX_DEPTH = 4  # runs of other agents followed from one run (the multi-agent hop guard allows about as many)
MAX_NODES = 300  # a run with more is drawn up to here, with a note
SEND_TOOLS = ("send_message_to_agent_and_wait_for_reply", "send_message_to_agent_async", "send_message_to_agents_")
_STEP_FIELDS = ("id", "index", "kind", "model", "usage", "model_ms", "tools_ms", "total_ms", "stop_reason")
_STEP_FIELDS += ("error", "created_at", "run_id", "agent_id")


@dataclass
class LoadedRun:
    """One run with its steps, their tool returns and the runs of other agents its tool calls started."""

    run: Run
    steps: list[Step]
    tools: dict[str, list[Message]]
    children: list[Run]
    base: int  # agent steps of the thread before this run's first one
    answered_at: datetime | None = None  # when a person answered the wait this run ended in


def run_load(run: Run) -> LoadedRun:
    steps = list(Step.objects.filter(run=run).order_by("index", "created_at").only(*_STEP_FIELDS))
    tools: dict[str, list[Message]] = {}
    rows = Message.objects.filter(step__in=steps, role="tool").order_by("seq")
    for row in rows.only("id", "step_id", "name", "tool_call_id", "tool_return", "created_at"):
        tools.setdefault(row.step_id, []).append(row)
    children = list(Run.objects.filter(parent_run=run).select_related("agent").order_by("created_at"))
    return LoadedRun(run, steps, tools, children, thread_steps_before(run=run, steps=steps), _answered_at(run))


def thread_steps_before(*, run: Run, steps: list[Step]) -> int:
    """How many agent steps the run's thread (its agent and conversation) took before this run's first step."""
    first = next((s for s in steps if s.kind == "agent"), None)
    if first is None:
        return 0
    earlier = Step.objects.filter(agent_id=run.agent_id, kind="agent", created_at__lt=first.created_at)
    if run.conversation_id:
        earlier = earlier.filter(run__conversation_id=run.conversation_id)
    else:
        earlier = earlier.exclude(run__conversation__isnull=False)
    return earlier.count()


def step_numbers_of(*, step_ids: set[str]) -> dict[str, int]:
    """Step id → its number among its conversation's agent steps (1-based; summaries and unknown ids get none), in
    one query: each step asked for counts its thread's agent steps up to itself."""
    step_ids = {s for s in step_ids if s}
    if not step_ids:
        return {}
    thread = Coalesce(F("run__conversation_id"), Value(""))  # "": the agent's own thread
    upto = (
        Step.objects.annotate(thread=thread)
        .filter(agent_id=OuterRef("agent_id"), kind="agent", thread=OuterRef("thread"))
        .filter(created_at__lte=OuterRef("created_at"))
        .order_by()
        .values("agent_id")
        .annotate(n=Count("id"))
        .values("n")
    )
    rows = Step.objects.filter(id__in=step_ids, kind="agent").annotate(thread=thread, number=Subquery(upto))
    return dict(rows.values_list("id", "number"))


def step_numbers(loaded: LoadedRun) -> dict[str, int]:
    """Each agent step's number within its conversation (1-based); summaries get none."""
    numbers, n = {}, loaded.base
    for step in loaded.steps:
        if step.kind == "agent":
            n += 1
            numbers[step.id] = n
    return numbers


def _answered_at(run: Run) -> datetime | None:
    """When the run that answered this run's wait was made (None: it was not answered, or waited for nothing)."""
    if run.stop_reason not in ("requires_approval", "paused") and not run.waiting:
        return None
    later = Run.objects.filter(
        agent_id=run.agent_id, conversation_id=run.conversation_id, created_at__gt=run.created_at
    ).order_by("created_at")
    for other in later.only("created_at", "input_messages")[:5]:
        if any(isinstance(m, dict) and m.get("role") == "approval" for m in other.input_messages or []):
            return other.created_at
    return None


def _ms(a: datetime, b: datetime) -> float:
    return (b - a).total_seconds() * 1000


# ---- timeline


@dataclass
class Span:
    """A row of the waterfall: what ran, from when, for how long (ms from the run's creation), and what to open."""

    label: str
    kind: str  # queue | prepare | model | first_token | tool | sandbox | commit | wait | agent
    start_ms: float
    ms: float
    depth: int = 0
    detail: str = ""
    step_id: str = ""
    agent_id: str = ""
    open_end: bool = False  # a wait still going on: drawn to the right edge, kept out of the scale
    first_token_ms: float | None = None
    left: float = 0.0  # percentages, set once the scale is known
    width: float = 0.0
    mark: float | None = None
    error: bool = False


def _step_spans(loaded: LoadedRun, t0: datetime, depth: int, numbers: dict[str, int]) -> list[Span]:
    spans: list[Span] = []
    run = loaded.run
    for i, step in enumerate(loaded.steps):
        end = _ms(t0, step.created_at)
        start = end - step.total_ms
        number = numbers.get(step.id)
        name = f"step {number}" if number else step.kind
        ids = {"step_id": step.id, "agent_id": step.agent_id, "depth": depth}
        prepare = max(step.total_ms - step.model_ms - step.tools_ms, 0.0)
        if prepare >= 0.5:
            spans.append(Span(f"{name} · compile, store", "prepare", start, prepare, detail=_PREPARE, **ids))
        spans += _model_spans(step, name, start + prepare, ids)
        at = start + prepare + step.model_ms
        for tool in loaded.tools.get(step.id, []):
            spans += _tool_spans(tool, at, ids)
            at += float((tool.tool_return or {}).get("duration_ms") or 0)
        following = loaded.steps[i + 1] if i + 1 < len(loaded.steps) else None
        commit_end = (
            _ms(t0, following.created_at) - following.total_ms
            if following
            else (_ms(t0, run.completed_at) if run.completed_at else end)
        )
        if commit_end - end >= 0.5:
            spans.append(Span(f"{name} · commit", "commit", end, commit_end - end, detail="stored, events sent", **ids))
    return spans


def _model_spans(step: Step, name: str, start: float, ids: dict) -> list[Span]:
    """The model call and, when it streamed, its wait for the first token (a child span, as exported)."""
    model = Span(f"{name} · model call", "model", start, step.model_ms, detail=step.model, **ids)
    model.error = bool(step.error)
    if step.error:
        model.detail = f"{step.model} · {step.error[:120]}"
    first = (step.usage or {}).get("first_token_ms")
    if first is None:
        return [model]
    model.first_token_ms = float(first)
    inner = {**ids, "depth": ids["depth"] + 1}
    return [model, Span("first token", "first_token", start, float(first), detail="time to first token", **inner)]


def _tool_spans(tool: Message, start: float, ids: dict) -> list[Span]:
    """A tool call and, when it ran in a sandbox it started, that start (a child span, as exported)."""
    ret = tool.tool_return or {}
    took = float(ret.get("duration_ms") or 0)
    span = Span(tool.name, "tool", start, took, detail=f"sandbox {ret.get('sandbox') or '—'}", **ids)
    span.error = ret.get("status") == "error"
    if ret.get("sandbox_start_ms") is None:
        return [span]
    inner = {**ids, "depth": ids["depth"] + 1}
    ready = float(ret["sandbox_start_ms"])
    return [span, Span("sandbox start", "sandbox", start, ready, detail=ret.get("sandbox") or "", **inner)]


def _sender_row(spans: list[Span], started_ms: float) -> int:
    """Where another agent's run goes among the rows: after the send tool call that was running when it started,
    else in time order."""
    for i, span in enumerate(spans):
        if span.kind == "tool" and span.label.startswith(SEND_TOOLS) and span.start_ms + span.ms >= started_ms:
            return i + 1
    return next((i for i, s in enumerate(spans) if s.start_ms > started_ms), len(spans))


def _wait_span(loaded: LoadedRun, t0: datetime, depth: int) -> Span | None:
    run = loaded.run
    waited_from = run.completed_at
    if waited_from is None or not (run.waiting or loaded.answered_at):
        return None
    kind = (run.waiting or {}).get("kind") or "approval"
    end = loaded.answered_at or timezone.now()
    span = Span(
        f"waiting for a person ({kind})" if loaded.answered_at is None else f"waited for a person ({kind})",
        "wait",
        _ms(t0, waited_from),
        _ms(waited_from, end),
        depth=depth,
        agent_id=run.agent_id,
        detail="answered" if loaded.answered_at else "not answered yet",
    )
    span.open_end = True  # a person's minutes would shrink every other bar to nothing: drawn apart from the scale
    return span


def _run_spans(loaded: LoadedRun, t0: datetime, depth: int) -> list[Span]:
    run = loaded.run
    spans = []
    if run.started_at and _ms(run.created_at, run.started_at) >= 0.5:
        spans.append(Span("queued", "queue", _ms(t0, run.created_at), _ms(run.created_at, run.started_at), depth))
    numbers = step_numbers(loaded)
    step_spans = _step_spans(loaded, t0, depth, numbers)
    for child in loaded.children if depth < MAX_DEPTH else []:
        inner = run_load(child)
        end = child.completed_at or timezone.now()
        head = Span(
            f"run of {child.agent.name}",
            "agent",
            _ms(t0, child.created_at),
            _ms(child.created_at, end),
            depth=depth + 1,
            agent_id=child.agent_id,
            detail=f"run {child.id[-8:]} · {child.status}",
            step_id=inner.steps[0].id if inner.steps else "",
        )
        at = _sender_row(step_spans, head.start_ms)
        step_spans[at:at] = [head, *_run_spans(inner, t0, depth + 1)]
    spans += step_spans
    wait = _wait_span(loaded, t0, depth)
    return spans + ([wait] if wait else [])


def run_timeline(*, run: Run) -> dict:
    """The run's waterfall: rows with their offsets and widths in percent of the run's span, its trace id, and
    ticks. Reads the run's steps, tool messages and the runs other agents ran for it; writes nothing."""
    loaded = run_load(run)
    spans = _run_spans(loaded, run.created_at, 0)
    scaled = [s for s in spans if not s.open_end]
    total = max([s.start_ms + s.ms for s in scaled] + [_ms(run.created_at, run.completed_at or run.created_at), 1.0])
    for s in spans:
        s.left = min(100 * s.start_ms / total, 100.0)
        s.width = (100 - s.left) if s.open_end else max(100 * s.ms / total, 0.4)
        if s.first_token_ms is not None and s.ms:
            s.mark = min(100 * s.first_token_ms / s.ms, 100.0)
    return {
        "spans": spans[:MAX_NODES],
        "total_ms": total,
        "ticks": [{"left": 25 * i, "ms": total * i / 4} for i in range(5)],
        "trace_id": tracing.trace_id_hex(run.id),
        "truncated": len(spans) > MAX_NODES,
    }


# ---- threads


def thread_label(conversation) -> str:
    """A conversation as the thread picker names it; None is the agent's own thread."""
    if conversation is None:
        return "Agent's own thread"
    if conversation.summary:
        return conversation.summary if len(conversation.summary) <= 40 else conversation.summary[:39] + "…"
    return "Conversation of " + timezone.localtime(conversation.created_at).strftime("%b %-d, %H:%M")


def runs_by_thread(*, agent, thread: str = "", limit: int = 30) -> list[Run]:
    """The agent's latest runs, newest first, each with `step_count` and `thread_label`; `thread` keeps one
    conversation's ("own": the agent's own thread; "": every thread)."""
    runs = Run.objects.filter(agent=agent)
    if thread == "own":
        runs = runs.filter(conversation__isnull=True)
    elif thread:
        runs = runs.filter(conversation_id=thread)
    runs = (
        runs.order_by("-created_at")
        .select_related("agent_version", "conversation")
        .defer("agent_version__definition", "agent_version__blocks", "conversation__message_ids")
        .annotate(step_count=Count("steps", filter=Q(steps__kind="agent")))[:limit]
    )
    out = list(runs)
    for run in out:
        run.thread_label = thread_label(run.conversation)
    return out


def threads_waiting(*, agent, thread: str | None) -> list[dict]:
    """The agent's other threads (not `thread`: a conversation id, None for its own) whose run waits for a person:
    each thread's id ("" for the agent's own), label and what it waits for."""
    waiting = Run.objects.filter(agent=agent, waiting_until__isnull=False).select_related("conversation")
    out, seen = [], set()
    for run in waiting.defer("conversation__message_ids").order_by("-created_at")[:20]:
        if run.conversation_id == thread or run.conversation_id in seen:
            continue
        seen.add(run.conversation_id)
        kind = (run.waiting or {}).get("kind") or "approval"
        out.append({"id": run.conversation_id or "", "label": thread_label(run.conversation), "kind": kind})
    return out
