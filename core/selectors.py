"""Reads, always filtered by owner: another owner's id is simply not found (404, never 403)."""

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

from django.db.models import Count, F, Model, Q, QuerySet, Value
from django.db.models.functions import Coalesce

from core.errors import Invalid, NotFound
from core.models import RUN_ACTIVE, Agent, Message, Organization, Run, Step
from core.pagination import queryset_page

M = TypeVar("M", bound=Model)


def owned_get(model_or_queryset: type[M] | QuerySet[M], *, owner: Organization | str, id: str) -> M:
    """The owner's row with this id, or NotFound naming it ("Agent 'agent-…' not found"): another owner's id is
    simply not found. Takes a model, or a queryset for select_related or select_for_update."""
    qs = model_or_queryset._default_manager.all() if isinstance(model_or_queryset, type) else model_or_queryset
    return found_or_404(row_or_none(qs.filter(owner=owner, id=id)), qs.model, id)


def row_or_none(rows: QuerySet[M]) -> M | None:
    """The one row of a lookup by a unique key, or None. `first()` would order it by its primary key: a third of the
    cost of reading a small row, for nothing when there is one row at most."""
    return next(iter(rows), None)


def found_or_404(row: M | None, model: type[M], id: str) -> M:
    """The row a lookup found, or NotFound naming it as owned_get does; for reads that are not a queryset of the
    owner's rows."""
    if row is None:
        raise NotFound(f"{model._meta.verbose_name.capitalize()} '{id}' not found")
    return row


def agent_get(*, owner: Organization, agent_id: str) -> Agent:
    """The owner's agent with this id, or NotFound."""
    return owned_get(Agent, owner=owner, id=agent_id)


# Letta's `order_by` values for agents (letta/services/helpers/agent_manager_helper.py).
AGENT_ORDER_FIELDS = ("created_at", "updated_at", "last_run_completion")
_NEVER = datetime(1970, 1, 1, tzinfo=UTC)


def agents_list(
    *,
    owner: Organization,
    name: str | None = None,
    tags: list[str] | None = None,
    match_all_tags: bool = False,
    query_text: str | None = None,
    last_stop_reason: str | None = None,
    identity_id: str | None = None,
    identifier_keys: list[str] | None = None,
    before: str | None = None,
    after: str | None = None,
    limit: int = 50,
    ascending: bool = False,
    order_by: str = "created_at",
    hide_marked: str | None = None,
) -> list[Agent]:
    """The owner's agents, filtered as Letta's `GET /v1/agents/` does (name, tags any/all, text, last stop reason,
    the identity they serve by id or identifier key, cursors), sorted by `order_by` (created_at, updated_at or
    last_run_completion); Invalid for another sort. `hide_marked`: leave out agents whose metadata has this key (the
    IDE's list hides evals' throwaway copies)."""
    if order_by not in AGENT_ORDER_FIELDS:
        raise Invalid(f"order_by must be one of {', '.join(AGENT_ORDER_FIELDS)}, not '{order_by}'.")
    # Agents that never ran sort as the oldest by last_run_completion: a cursor needs a value to compare with.
    scope = Agent.objects.filter(owner=owner).annotate(_sort=Coalesce(F(order_by), Value(_NEVER)))
    if hide_marked:
        scope = scope.exclude(metadata__has_key=hide_marked)
    qs = scope
    if name:
        qs = qs.filter(name=name)
    if query_text:
        qs = qs.filter(Q(name__icontains=query_text) | Q(description__icontains=query_text))
    if last_stop_reason:
        qs = qs.filter(last_stop_reason=last_stop_reason)
    if identity_id:
        qs = qs.filter(identities__id=identity_id)
    if identifier_keys:
        qs = qs.filter(identities__identifier_key__in=identifier_keys).distinct()
    if tags:
        if match_all_tags:
            qs = (
                qs.filter(tag_rows__tag__in=tags)
                .annotate(_n=Count("tag_rows", filter=Q(tag_rows__tag__in=tags), distinct=True))
                .filter(_n=len(set(tags)))
            )
        else:
            qs = qs.filter(tag_rows__tag__in=tags).distinct()
    return queryset_page(
        qs.prefetch_related("tag_rows"),
        after=after,
        before=before,
        limit=limit,
        order="asc" if ascending else "desc",
        field="_sort",
        scope=scope,
    )


def agent_tags(agent: Agent) -> list[str]:
    return sorted(row.tag for row in agent.tag_rows.all())


def agents_running_ids(*, owner: Organization) -> set[str]:
    """Ids of the owner's agents with a run in progress."""
    return set(Run.objects.filter(owner=owner, status__in=RUN_ACTIVE).values_list("agent_id", flat=True))


# --------------------------------------------------------------------------- the IDE's conversation, runs and steps

# Summary messages open with how many messages are hidden in all (core.engine.loop.summary_message_text).
_HIDDEN_COUNT = re.compile(r"^Note: (\d+) messages from the beginning")


@dataclass(frozen=True)
class Eviction:
    """Why a message left the context window: a summary (with the step that made it) or a reset."""

    by: str  # "summary" | "reset"
    message_id: str
    step_id: str | None = None
    step_index: int | None = None
    run_id: str | None = None


def _is_prompt(row: dict) -> bool:
    return row["role"] == "system" and not row["kind"] and not row["sender_agent_id"]


@dataclass(frozen=True)
class WindowMarks:
    in_window: set[str]
    evicted: dict[str, "Eviction"]
    resets: set[str]  # later system prompts that emptied the window (not a prompt rebuilt mid-conversation)


def agent_window_marks(*, agent: Agent, since_seq: int | None = None) -> WindowMarks:
    """The ids in the context window now, for messages out of it (seq >= since_seq) what evicted them, and which
    later system prompts were resets.

    Eviction is replayed from the stored summaries (each says how many messages are hidden in all; they were
    the oldest still in the window) and resets; a message out of the window that nothing explains has no entry.
    A later system prompt is a reset when nothing older than it is in the window and no tool return follows it:
    Letta v1 files also hold prompts rebuilt mid-step, between a memory tool's call and its return.
    """
    in_window = set(agent.message_ids or ())
    thread = Message.objects.filter(agent=agent, conversation_id=getattr(agent, "thread", None))
    rows = list(
        thread.order_by("seq").values(
            "id", "seq", "role", "kind", "sender_agent_id", "run_id", "step_id", "step__index"
        )
    )
    summary_text = dict(thread.filter(kind="summary").values_list("id", "text"))
    first_prompt = next((r["seq"] for r in rows if _is_prompt(r)), None)
    oldest_in = min((r["seq"] for r in rows if r["id"] in in_window and not _is_prompt(r)), default=None)
    resets = {
        r["id"]
        for r, after in zip(rows, [*rows[1:], None], strict=False)
        if _is_prompt(r)
        and r["seq"] != first_prompt
        and (oldest_in is None or oldest_in > r["seq"])
        and (after is None or after["role"] != "tool")
    }
    alive: list[str] = []
    hidden = 0
    marks: dict[str, Eviction] = {}
    for row in rows:
        if row["id"] in resets:
            marks.update({i: Eviction(by="reset", message_id=row["id"]) for i in alive})
            alive, hidden = [], 0
        elif row["kind"] == "summary":
            m = _HIDDEN_COUNT.match(summary_text.get(row["id"], ""))
            total = int(m.group(1)) if m else hidden
            n = total - hidden if total >= hidden else total
            evictor = Eviction(
                by="summary",
                message_id=row["id"],
                step_id=row["step_id"],
                step_index=row["step__index"],
                run_id=row["run_id"],
            )
            marks.update(dict.fromkeys(alive[:n], evictor))
            alive, hidden = alive[n:], total
        elif not _is_prompt(row):
            alive.append(row["id"])
    floor = since_seq if since_seq is not None else -1
    keep = {r["id"] for r in rows if r["seq"] >= floor and r["id"] not in in_window}
    return WindowMarks(in_window=in_window, evicted={i: e for i, e in marks.items() if i in keep}, resets=resets)


def steps_index(*, step_ids: set[str]) -> dict[str, int]:
    """Step id → its index in its run (how the API numbers steps)."""
    return dict(Step.objects.filter(id__in=step_ids).values_list("id", "index")) if step_ids else {}


def agent_step_get(*, agent: Agent, step_id: str) -> Step:
    """One of the agent's steps, or NotFound."""
    step = Step.objects.filter(agent=agent, id=step_id).first()
    if step is None:
        raise NotFound(f"Step '{step_id}' not found")
    return step


def step_previous(*, step: Step) -> Step | None:
    """The agent's step of the same kind just before this one (what the context looked like the time before)."""
    return (
        Step.objects.filter(agent_id=step.agent_id, kind=step.kind, created_at__lt=step.created_at)
        .order_by("-created_at")
        .first()
    )


def step_next(*, step: Step) -> Step | None:
    """The agent's step of the same kind just after this one (whose context shows what this step changed)."""
    return (
        Step.objects.filter(agent_id=step.agent_id, kind=step.kind, created_at__gt=step.created_at)
        .order_by("created_at")
        .first()
    )


def agent_steps_recent(*, agent: Agent, limit: int = 30) -> list[dict]:
    """The agent's latest steps, newest first: id, run, index (as the API numbers them), kind, time, error."""
    return list(
        Step.objects.filter(agent=agent)
        .order_by("-created_at", "-index")
        .values("id", "run_id", "index", "kind", "created_at", "stop_reason", "error")[:limit]
    )


def agent_runs_recent(*, agent: Agent, limit: int = 30) -> list[Run]:
    """The agent's latest runs, newest first, each with `step_count` (model calls of the agent, not summaries)."""
    return list(
        Run.objects.filter(agent=agent)
        .order_by("-created_at")
        .select_related("agent_version")
        .defer("agent_version__definition", "agent_version__blocks")
        .annotate(step_count=Count("steps", filter=Q(steps__kind="agent")))[:limit]
    )


def agent_run_get(*, agent: Agent, run_id: str) -> Run:
    """One of the agent's runs, or NotFound."""
    run = Run.objects.filter(agent=agent, id=run_id).first()
    if run is None:
        raise NotFound(f"Run '{run_id}' not found")
    return run


def run_steps_list(*, run: Run) -> list[Step]:
    """A run's steps in order."""
    return list(Step.objects.filter(run=run).order_by("index", "created_at"))


def run_inputs_delivered(*, run: Run) -> bool:
    """Whether the run's input messages reached the agent: a step that committed took them (the claim stores them
    before, outside the window, so a run that died keeps them in the history)."""
    inputs = Message.objects.filter(run=run, role__in=("user", "system"), kind__in=("", "agent_message"))
    return inputs.filter(step__isnull=False).exists()


def agent_active_run_id(*, agent: Agent, thread: str | None = None) -> str | None:
    """The id of the run in progress in one of the agent's threads (its own by default: `thread` None), if any."""
    return (
        Run.objects.filter(agent=agent, conversation_id=thread, status__in=RUN_ACTIVE)
        .order_by("-created_at")
        .values_list("id", flat=True)
        .first()
    )


def agent_names(*, owner: Organization, limit: int = 500) -> dict[str, str]:
    """Id → name of the owner's newest agents (for "from agent …" links)."""
    return dict(Agent.objects.filter(owner=owner).order_by("-created_at").values_list("id", "name")[:limit])


def agent_forks(*, agent: Agent) -> list[Agent]:
    """The owner's agents forked from this one (their metadata.forked_from names it), newest first."""
    return list(
        Agent.objects.filter(owner_id=agent.owner_id, metadata__forked_from__agent_id=agent.id).order_by("-created_at")
    )


def agent_fork_origin(*, agent: Agent) -> dict | None:
    """Where a fork came from: forked_from plus the original's name (None if it was deleted or is not a fork)."""
    origin = (agent.metadata or {}).get("forked_from")
    if not isinstance(origin, dict) or not origin.get("agent_id"):
        return None
    name = Agent.objects.filter(owner_id=agent.owner_id, id=origin["agent_id"]).values_list("name", flat=True).first()
    return {**origin, "name": name}
