"""The one runner of a case: an agent test and an experiment's case both run here.

A case (core.models.EvalCase: user turns and graders) runs on a fresh copy of its starting state — the target agent
as it is or at a version, a fork of it at one of its steps, another agent the case names, or the case's agent file
imported anew — with the target's model and prompt or block overrides; the agent itself is never changed. The turns
go through the run executor like any message, what happened is gathered as plain data (`observed`) and every grader
scores it: deterministic ones by core.engine.graders, rubric ones by their judge model (core.evals.judge).
"""

import json
import time
from dataclasses import dataclass, field

from core.agents import versions
from core.agents.agentfile import importer  # the module: it imports core.agents.agent_tests
from core.agents.agentfile.parse import parse_agent_file
from core.agents.messages import messages_to_letta
from core.agents.services import agent_update
from core.engine import graders as g
from core.errors import Invalid
from core.evals import queries
from core.evals.judge import rubric_grade
from core.evals.starts import Starts
from core.models import Agent, EvalCase, Organization, Run, RunStatus, Step
from core.runs import executor, timetravel
from core.runs.request import RunRequest
from memory.models import Block, BlockHistory, Passage
from memory.selectors import agent_blocks
from memory.services import block_update


@dataclass(frozen=True)
class Target:
    """What a case runs on: an agent (None: the case's own start), at a version, with a model and overrides."""

    agent: Agent | None
    version: int | None = None
    model: str = ""
    overrides: dict = field(default_factory=dict)  # {"system": str, "blocks": {label: value}}


@dataclass
class CaseRun:
    """One case run: the copy it ran on, its runs (one per turn), what happened, the grades and how long it took."""

    copy: Agent
    runs: list[Run]
    observed: dict
    grades: list[dict]
    latency_ms: float

    @property
    def failed_run(self) -> Run | None:
        return next((r for r in self.runs if r.status != RunStatus.COMPLETED), None)


# --------------------------------------------------------------------------- the copy


def _version_apply(copy: Agent, source: Agent, number: int) -> None:
    """Give the copy the source's definition and block values at version `number`; tools stay as they are now,
    since restoring a tool's code would change it for every agent using it."""
    version = versions.version_get(agent=source, number=number)
    d = version.definition
    changes = {k: d[k] for k in versions.FIELDS if k in d and k not in ("name", "agent_type")}
    with versions.recording_paused():
        agent_update(agent=copy, changes=changes)
    _blocks_set(copy, {b["label"]: b["value"] for b in version.blocks})


def _blocks_set(copy: Agent, values: dict) -> None:
    if not values:
        return
    for block in Block.objects.filter(agentblock__agent=copy, label__in=list(values)):
        if block.value != values[block.label]:
            block_update(block=block, changes={"value": values[block.label]})


def _source(owner: Organization, case: EvalCase, target: Target) -> Agent:
    agent_id = (case.start or {}).get("agent_id")
    source = Agent.objects.filter(owner=owner, id=agent_id).first() if agent_id else target.agent
    if source is None:
        raise Invalid("The case's starting agent no longer exists.")
    return source


def start_key(case: EvalCase, target: Target) -> tuple | None:
    """What the case's copy starts from, as a key the cases of one run share (core.evals.starts): its source agent,
    the step it forks at and the version applied (the run's model and overrides are the same for all its cases).
    None for a case with its own agent file, imported anew for each case."""
    if case.agent_file is not None:
        return None
    start = case.start or {}
    agent_id = start.get("agent_id") or (target.agent.id if target.agent is not None else None)
    version = start.get("version") if start.get("agent_id") else target.version
    return (agent_id, start.get("step_id"), bool(start.get("before")), version)


def case_copy(
    *,
    owner: Organization,
    case: EvalCase,
    target: Target,
    marker: dict,
    label: str,
    starts: Starts | None = None,
    copy_id: str | None = None,
) -> Agent:
    """A fresh agent for the case, marked with `marker` in its metadata: its agent file imported, a fork of the
    source at the case's step, or a copy of the source (at the version asked); then the target's model and
    overrides. Writes the copy (agent, blocks, messages, passages); the source is only read. With `starts` (a run's
    shared starting states), a case whose start another case of the run has made already is copied from that one's
    state as read once (core.evals.starts), with the id `copy_id` if given."""

    def make() -> tuple[Agent, str]:
        return _copy_made(owner=owner, case=case, target=target, marker=marker, label=label)

    def name(source_name: str) -> str:
        return f"{source_name} · {label} {case.name[:60]}"

    if starts is None:
        return make()[0]
    return starts.copy(start_key(case, target), make, name=name, marker=marker, agent_id=copy_id)


def _copy_made(*, owner: Organization, case: EvalCase, target: Target, marker: dict, label: str) -> tuple[Agent, str]:
    """case_copy the thorough way; returns the copy and its source's name ("" for an agent file's)."""
    start = case.start or {}
    source = None
    if case.agent_file is not None:
        imported = importer.agentfile_import(owner=owner, parsed=parse_agent_file(case.agent_file))
        copy = Agent.objects.get(pk=imported.agent_ids[0])
    else:
        source = _source(owner, case, target)
        name = f"{source.name} · {label} {case.name[:60]}"  # as case_copy's name()
        if start.get("step_id"):
            step = Step.objects.filter(agent=source, id=start["step_id"]).first()
            if step is None:
                raise Invalid(f"The case starts at step '{start['step_id']}', which no longer exists.")
            copy = timetravel.agent_fork(agent=source, step=step, before=bool(start.get("before")), name=name)
        else:
            copy = timetravel.agent_copy(agent=source, name=name, metadata={**(source.metadata or {}), **marker})
        number = start.get("version") if start.get("agent_id") else target.version
        if number is not None:
            _version_apply(copy, source, number)
            copy = Agent.objects.get(pk=copy.pk)
    if marker.keys() - (copy.metadata or {}).keys():
        copy.metadata = {**(copy.metadata or {}), **marker}
        Agent.objects.filter(pk=copy.pk).update(metadata=copy.metadata)
    changes = {"model": target.model} if target.model else {}
    if "system" in target.overrides:
        changes["system"] = target.overrides["system"]
    if changes:
        with versions.recording_paused():
            copy = agent_update(agent=copy, changes=changes)
    _blocks_set(copy, target.overrides.get("blocks") or {})
    if source is not None:
        versions.version_record_copy(copy=copy, source=source)
    return copy, source.name if source is not None else ""


# --------------------------------------------------------------------------- the turns and what happened


class Observed(dict):
    """What happened on a copy (observed_gather), a dict; the copy's memory after the run (`blocks`, `block_steps`:
    the step that last set each block, `passages`) is read when a grader first asks for it, since most ask for the
    replies and tool calls only."""

    def __init__(self, data: dict, copy: Agent, step_ids: list[str]):
        super().__init__(data)
        self.copy, self.step_ids = copy, step_ids

    def __missing__(self, key):
        if key in ("blocks", "block_steps"):
            blocks = agent_blocks(agent=self.copy)
            labels = {b.id: b.label for b in blocks}
            edits = BlockHistory.objects.filter(block_id__in=list(labels), step_id__in=self.step_ids)
            self["blocks"] = {b.label: b.value for b in blocks}
            self["block_steps"] = {
                labels[block_id]: step_id
                for block_id, step_id in edits.order_by("version").values_list("block_id", "step_id")
            }
        elif key == "passages":
            found = Passage.objects.filter(agent=self.copy).order_by("created_at").values_list("text", flat=True)
            self["passages"] = list(found)
        else:
            raise KeyError(key)
        return self[key]

    def get(self, key, default=None):
        try:
            return self[key]
        except KeyError:
            return default


def observed_gather(copy: Agent, runs: list[Run]) -> Observed:
    """What happened on the copy, as plain data for the expectations and the eval graders (core.engine.graders)."""

    run_ids = [r.id for r in runs]
    rows = queries.runs_messages(run_ids=run_ids)
    calls = [
        {"name": c.get("name"), "arguments": expectations_args(c.get("arguments")), "step_id": m.step_id}
        for m in rows
        if m.role == "assistant"
        for c in m.tool_calls or []
    ]
    letta = [
        (e, m.run_id)
        for m in rows
        if m.role == "assistant"
        for e in messages_to_letta([m])
        if e["message_type"] == "assistant_message"
    ]
    replies = [(e.get("content"), e.get("step_id")) for e, _ in letta]
    steps = queries.runs_steps_usage(run_ids=run_ids)
    usages = [usage for _, usage in steps]
    costs = [u.get("cost_usd") for u in usages]
    asked = [
        (c.get("name"), m.step_id)
        for m in rows
        if m.role == "assistant"
        for c in m.tool_calls or []
        if c.get("id") in ((m.tool_return or {}).get("waiting") or {})
    ]
    arguments = {c.get("id"): c.get("arguments") for m in rows if m.role == "assistant" for c in m.tool_calls or []}
    data = {
        "approval_requests": [name for name, _ in asked],
        "approval_step_id": asked[0][1] if asked else None,
        "tool_calls": calls,
        "reply": replies[-1][0] if replies else None,
        "reply_step_id": replies[-1][1] if replies else None,
        "replies": [text or "" for text, _ in replies],
        "turn_replies": [[e.get("content") or "" for e, run_id in letta if run_id == r] for r in run_ids],
        "tool_returns": [
            {"name": m.name, "output": m.body or m.text, "arguments": expectations_args(arguments.get(m.tool_call_id))}
            for m in rows
            if m.role == "tool"
        ],
        "stop_reason": runs[-1].stop_reason if runs else None,
        "steps": [{"id": step_id, "prompt_tokens": usage.get("prompt_tokens")} for step_id, usage in steps],
        "tokens": {
            "prompt": sum(u.get("prompt_tokens") or 0 for u in usages),
            "completion": sum(u.get("completion_tokens") or 0 for u in usages),
            "total": sum(u.get("total_tokens") or 0 for u in usages),
        },
        "cost_usd": None if any(c is None for c in costs) else round(sum(costs), 10),
    }
    return Observed(data, copy, [step_id for step_id, _ in steps])


def expectations_args(arguments) -> dict:
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return {}
    if not isinstance(parsed, dict):
        return {}
    return {k: v for k, v in parsed.items() if k not in ("thinking", "request_heartbeat")}


ANSWERS = ("/approve", "/deny")


def _turn_input(turn: str, last: Run | None) -> dict:
    """A turn's input: the user's message, or — for a turn `/approve` or `/deny <reason>` — the answer to every call
    the previous turn's run waits on (Invalid, failing the test with its reason, when nothing waits)."""
    word, _, reason = turn.strip().partition(" ")
    if word not in ANSWERS:
        return {"role": "user", "content": turn}
    if last is not None:
        last.refresh_from_db()
    calls = (last.waiting or {}).get("calls") if last is not None and last.waiting_until is not None else None
    if not calls:
        raise Invalid(f"The turn '{turn}' answers an approval, but the previous turn's run waits for none.")
    approve = word == "/approve"
    return {
        "type": "approval",
        "approvals": [
            {"type": "approval", "tool_call_id": c["tool_call_id"], "approve": approve, "reason": reason or None}
            for c in calls
        ],
    }


def turns_run(*, owner: Organization, agent: Agent, turns: list[str]) -> list[Run]:
    """Send the turns to the agent one after another, each a run through the executor waited for; stops after a run
    that did not complete. Returns the runs."""
    runs: list[Run] = []
    for turn in turns:
        request = RunRequest(
            owner=owner,
            agent_id=agent.id,
            input_messages=[_turn_input(turn, runs[-1] if runs else None)],
            refuse_unconfigured=False,  # the failed run is the test's finding
        )
        runs.append(executor.run_wait(run=executor.run_submit(request)))
        if runs[-1].status != RunStatus.COMPLETED:
            break
    return runs


# --------------------------------------------------------------------------- grading


def case_grade(
    *, owner: Organization, specs: list[dict], case: dict, observed: dict, judges: dict | None = None
) -> list[dict]:
    """Every grader's verdict on one case (a rubric grader calls its judge model, resolved through `judges`:
    core.evals.judge.judge_model); a grader that cannot grade is a grade with its error, never an exception."""
    grades = []
    for i, spec in enumerate(specs):
        name = g.grader_name(spec, i)
        try:
            if spec["kind"] == "rubric":
                grade, _usage = rubric_grade(
                    owner=owner, name=name, spec=spec, case=case, submission=g.extract(spec, observed), judges=judges
                )
            else:
                grade = g.grade_deterministic(name, spec, observed, case.get("ground_truth"))
        except (KeyError, ValueError, TypeError) as exc:
            grade = g.Grade(name, spec.get("kind", "?"), None, None, "", error=f"{type(exc).__name__}: {exc}")
        grades.append(grade.as_dict())
    return grades


def case_run(
    *,
    owner: Organization,
    case: EvalCase,
    target: Target,
    graders: list[dict],
    marker: dict,
    label: str,
    on_copy=None,
    judges: dict | None = None,
    starts: Starts | None = None,
    copy_id: str | None = None,
) -> CaseRun:
    """Run one case on a fresh copy (case_copy), its turns one after another through the run executor, and grade
    what happened with `graders` (the case's own are added; rubric judges resolved through `judges`, shared by an
    experiment's cases; its copy made from the run's shared `starts`, with the id `copy_id` where it can: case_copy);
    `on_copy(copy)` is told the copy before the turns run. Raises what makes the case unable to start (Invalid, AgentFileError); the copy is the
    caller's to keep or delete."""
    copy = case_copy(owner=owner, case=case, target=target, marker=marker, label=label, starts=starts, copy_id=copy_id)
    if on_copy is not None:
        on_copy(copy)
    started = time.perf_counter()
    runs = turns_run(owner=owner, agent=copy, turns=case.turns)
    latency = round((time.perf_counter() - started) * 1000, 1)
    observed = observed_gather(copy, runs)
    data = {"turns": case.turns, "ground_truth": case.ground_truth, "rubric_vars": case.rubric_vars}
    grades = case_grade(owner=owner, specs=graders + (case.graders or []), case=data, observed=observed, judges=judges)
    return CaseRun(copy=copy, runs=runs, observed=observed, grades=grades, latency_ms=latency)
