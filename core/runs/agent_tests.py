"""Agent regression tests: pinned behaviour, run on throwaway copies of the agent.

A test lives in its agent's metadata (`agent_tests`), so it travels in `.af` exports and is restored on
import. Running tests never touches the agent: each test gets a copy (the agent as it is now, or a fork at a
step), its turns go through the run executor like any message, what happened is gathered as plain data and
checked by the pure expectations (core.engine.expectations); the copy is deleted unless kept.
"""

import json
import logging
import time

from django.db import transaction
from django.utils import timezone
from django_tasks import task

from core import ids
from core.agents import versions
from core.agents.messages import messages_to_letta
from core.agents.services import agent_delete
from core.engine import expectations
from core.errors import Invalid, NotFound
from core.events import agent_group, send_event
from core.models import Agent, AgentTestRun, Message, Organization, Run, RunStatus, Step
from core.runs import executor, timetravel
from core.runs.request import RunRequest
from memory.models import BlockHistory, Passage
from memory.selectors import agent_blocks

log = logging.getLogger(__name__)
METADATA_KEY = "agent_tests"
MAX_TURNS = 20


def _stored(agent: Agent) -> list:
    stored = (agent.metadata or {}).get(METADATA_KEY)
    return stored if isinstance(stored, list) else []


def _listable(test) -> bool:
    """Whether a stored test has the shape every reader relies on: metadata is also written by agent updates and
    agent-file imports, which do not check what is under METADATA_KEY."""
    start = test.get("start") if isinstance(test, dict) else None
    return (
        isinstance(test, dict)
        and isinstance(test.get("id"), str)
        and isinstance(test.get("name"), str)
        and isinstance(test.get("turns"), list)
        and all(isinstance(t, str) for t in test["turns"])
        and isinstance(test.get("expect"), dict)
        and isinstance(start, dict)
        and isinstance(start.get("step_id"), str | None)
    )


def tests_list(*, agent: Agent) -> list[dict]:
    """The agent's tests (a stored entry of another shape is left out)."""
    return [t for t in _stored(agent) if _listable(t)]


def _locked(agent: Agent) -> Agent:
    """The agent's row, locked for the caller's transaction; NotFound once the agent is deleted (it may have been
    since the caller looked it up)."""
    found = Agent.objects.select_for_update().filter(pk=agent.pk).first()
    if found is None:
        raise NotFound(f"Agent '{agent.pk}' not found")
    return found


def _clean(test: dict) -> dict:
    name = str(test.get("name") or "").strip()
    turns = test.get("turns")
    if not name:
        raise Invalid("A test needs a name.")
    if (
        not isinstance(turns, list)
        or not turns
        or len(turns) > MAX_TURNS
        or any(not isinstance(t, str) or not t.strip() for t in turns)
    ):
        raise Invalid(f"A test needs 1 to {MAX_TURNS} user turns, each a non-empty string.")
    expect = test.get("expect")
    if not isinstance(expect, dict):
        raise Invalid('The expectations are a JSON object, such as {"reply": {"contains": "hello"}}.')
    if not expect:
        raise Invalid("A test needs at least one expectation.")
    problems = expectations.validate(expect)
    if problems:
        raise Invalid("Expectations: " + "; ".join(problems))
    start = test.get("start") or {}
    if not isinstance(start, dict) or not isinstance(start.get("step_id"), str | None):
        raise Invalid('The start is {"step_id": "step-...", "before": false}, or nothing.')
    if test.get("id") is not None and not isinstance(test["id"], str):
        raise Invalid("A test's id is a string.")
    return {
        "id": test.get("id") or ids.new_id("test"),
        "name": name[:200],
        "turns": turns,
        "expect": expect,
        "start": {"step_id": start.get("step_id"), "before": bool(start.get("before"))},
    }


def _is(test, test_id: str) -> bool:
    return isinstance(test, dict) and test.get("id") == test_id


@transaction.atomic
def test_save(*, agent: Agent, test: dict) -> dict:
    """Add a test to the agent, or replace the one with the same id; returns it (validated). Locks the agent's row;
    NotFound if the agent is gone."""
    clean = _clean(test)
    agent = _locked(agent)
    if clean["start"]["step_id"] and not Step.objects.filter(agent=agent, id=clean["start"]["step_id"]).exists():
        raise Invalid(f"Step '{clean['start']['step_id']}' is not one of this agent's steps.")
    kept = [t for t in _stored(agent) if not _is(t, clean["id"])]
    agent.metadata = {**(agent.metadata or {}), METADATA_KEY: kept + [clean]}
    agent.save(update_fields=["metadata", "updated_at"])
    return clean


@transaction.atomic
def test_delete(*, agent: Agent, test_id: str) -> list[dict]:
    """Delete one of the agent's tests; returns the tests left. Locks the agent's row; NotFound if the agent or the
    test is gone."""
    agent = _locked(agent)
    stored = _stored(agent)
    if not any(_is(t, test_id) for t in stored):
        raise NotFound(f"Test '{test_id}' not found")
    agent.metadata = {**agent.metadata, METADATA_KEY: [t for t in stored if not _is(t, test_id)]}
    agent.save(update_fields=["metadata", "updated_at"])
    return tests_list(agent=agent)


def test_run_get(*, agent: Agent, run_id: str) -> AgentTestRun:
    found = AgentTestRun.objects.filter(agent=agent, id=run_id).first()
    if found is None:
        raise NotFound(f"Test run '{run_id}' not found")
    return found


def _selected(agent: Agent, test_ids: list[str] | None) -> list[dict]:
    tests = tests_list(agent=agent)
    if test_ids:
        unknown = set(test_ids) - {t["id"] for t in tests}
        if unknown:
            raise NotFound(f"No test {', '.join(sorted(unknown))} on this agent")
        tests = [t for t in tests if t["id"] in test_ids]
    if not tests:
        raise Invalid("This agent has no tests to run.")
    return tests


def tests_start(
    *,
    owner: Organization,
    agent: Agent,
    test_ids: list[str] | None = None,
    model: str | None = None,
    keep: bool = False,
) -> AgentTestRun:
    """Queue a run of the agent's tests (all, or the given ids) as a background task; returns the test run. Locks the
    agent's row while the run is recorded; NotFound if the agent is gone."""
    with transaction.atomic():
        agent = _locked(agent)
        tests = _selected(agent, test_ids)
        run = AgentTestRun.objects.create(
            owner=owner,
            agent=agent,
            test_ids=[t["id"] for t in tests],
            model=model or "",
            keep=keep,
            agent_version=versions.version_current(agent=agent),
        )
        executor.queue.woken_after_commit(agent_tests_task.enqueue(test_run_id=run.id))
    return run


# --------------------------------------------------------------------------- running


def observed_gather(copy: Agent, runs: list[Run]) -> dict:
    """What happened on the copy, as plain data for the expectations and the eval graders (core.engine.graders)."""

    run_ids = [r.id for r in runs]
    rows = list(Message.objects.filter(run_id__in=run_ids).order_by("seq"))
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
    steps = list(Step.objects.filter(run_id__in=run_ids, kind="agent").order_by("created_at"))
    costs = [s.usage.get("cost_usd") for s in steps]
    blocks = agent_blocks(agent=copy)
    block_steps = {
        h.block.label: h.step_id
        for h in BlockHistory.objects.filter(block__in=blocks, step_id__in=[s.id for s in steps])
        .select_related("block")
        .order_by("version")
    }
    asked = [
        (c.get("name"), m.step_id)
        for m in rows
        if m.role == "assistant"
        for c in m.tool_calls or []
        if c.get("id") in ((m.tool_return or {}).get("waiting") or {})
    ]
    arguments = {c.get("id"): c.get("arguments") for m in rows if m.role == "assistant" for c in m.tool_calls or []}
    return {
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
        "blocks": {b.label: b.value for b in blocks},
        "block_steps": block_steps,
        "passages": list(Passage.objects.filter(agent=copy).order_by("created_at").values_list("text", flat=True)),
        "stop_reason": runs[-1].stop_reason if runs else None,
        "steps": [{"id": s.id, "prompt_tokens": s.usage.get("prompt_tokens")} for s in steps],
        "tokens": {
            "prompt": sum(s.usage.get("prompt_tokens") or 0 for s in steps),
            "completion": sum(s.usage.get("completion_tokens") or 0 for s in steps),
            "total": sum(s.usage.get("total_tokens") or 0 for s in steps),
        },
        "cost_usd": None if any(c is None for c in costs) else round(sum(costs), 10),
    }


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


def _copy_for(agent: Agent, test: dict, model: str) -> Agent:
    meta = {"agent_test_copy": {"agent_id": agent.id, "test_id": test["id"]}}
    name = f"{agent.name} · test {test['name']}"
    step_id = test["start"].get("step_id")
    if step_id:
        step = Step.objects.filter(agent=agent, id=step_id).first()
        if step is None:
            raise Invalid(f"The test starts at step '{step_id}', which no longer exists.")
        copy = timetravel.agent_fork(agent=agent, step=step, before=test["start"].get("before", False), name=name)
        Agent.objects.filter(pk=copy.pk).update(metadata={**copy.metadata, **meta})
    else:
        copy = timetravel.agent_copy(agent=agent, name=name, metadata={**(agent.metadata or {}), **meta})
    if model:
        Agent.objects.filter(pk=copy.pk).update(model=model)
    return Agent.objects.get(pk=copy.pk)


def test_execute(*, agent: Agent, test: dict, model: str = "", keep: bool = False) -> dict:
    """Run one test on a throwaway copy (every turn through the run executor) and check it; returns its result."""
    started = time.perf_counter()
    result = {
        "test_id": test["id"],
        "name": test["name"],
        "passed": False,
        "failures": [],
        "run_ids": [],
        "copy_agent_id": None,
        "error": None,
    }
    copy = None
    try:
        copy = _copy_for(agent, test, model)
        runs = turns_run(owner=agent.owner, agent=copy, turns=test["turns"])
        result["run_ids"] = [r.id for r in runs]
        observed = observed_gather(copy, runs)
        result["failures"] = expectations.evaluate(test["expect"], observed)
        if runs and runs[-1].status != RunStatus.COMPLETED and not result["failures"]:
            result["failures"] = [
                {
                    "expectation": "the run completes",
                    "expected": "completed",
                    "actual": f"{runs[-1].status}: {runs[-1].error or runs[-1].stop_reason}",
                    "step_id": None,
                }
            ]
        result["passed"] = not result["failures"]
        result["cost_usd"] = observed["cost_usd"]
        result["steps"] = len(observed["steps"])
    except Exception as exc:  # noqa: BLE001 - a broken test is a failed test with its reason, never a crashed suite
        log.exception("agent test %s failed to run", test["id"])
        result["error"] = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
    finally:
        if copy is not None:
            if keep:
                result["copy_agent_id"] = copy.id
            else:
                agent_delete(agent=copy)  # its blocks are copies no one else uses: they go too
    result["duration_ms"] = round((time.perf_counter() - started) * 1000, 1)
    return result


def tests_execute(*, test_run_id: str) -> str:
    """Task body: run the tests of a test run one after another, recording each result as it comes (and telling
    open tabs); returns "passed" or "failed"."""
    run = AgentTestRun.objects.select_related("agent").get(pk=test_run_id)
    by_id = {t["id"]: t for t in tests_list(agent=run.agent)}
    AgentTestRun.objects.filter(pk=run.pk).update(status="running", started_at=timezone.now())
    results = []
    for test_id in run.test_ids:
        test = by_id.get(test_id)
        if test is None:
            results.append({"test_id": test_id, "passed": False, "failures": [], "error": "the test was deleted"})
        else:
            results.append(test_execute(agent=run.agent, test=test, model=run.model, keep=run.keep))
        AgentTestRun.objects.filter(pk=run.pk).update(results=results)
        send_event(
            agent_group(run.agent_id),
            {"message_type": "agent_test_result", "test_run_id": run.id, "result": results[-1]},
        )
    status = "passed" if all(r["passed"] for r in results) else "failed"
    AgentTestRun.objects.filter(pk=run.pk).update(status=status, completed_at=timezone.now())
    send_event(agent_group(run.agent_id), {"message_type": "agent_test_run", "test_run_id": run.id, "status": status})
    return status


def test_run_out(run: AgentTestRun) -> dict:
    results = run.results or []
    return {
        "id": run.id,
        "agent_id": run.agent_id,
        "status": run.status,
        "test_ids": run.test_ids,
        "model": run.model or None,
        "results": results,
        "passed": sum(1 for r in results if r.get("passed")),
        "failed": sum(1 for r in results if not r.get("passed")),
        "created_at": run.created_at,
        "completed_at": run.completed_at,
    }


# --------------------------------------------------------------------------- proposals


def test_propose(*, agent: Agent, run_id: str | None = None) -> dict:
    """A test drafted from what happened (reads only): the user turns of the current conversation (or of one run),
    the tools called in order, a reply-contains from the last reply and the stop reason."""

    if run_id:
        runs = list(Run.objects.filter(agent=agent, id=run_id))
        if not runs:
            raise NotFound(f"Run '{run_id}' not found")
        rows = list(Message.objects.filter(agent=agent, run_id=run_id).order_by("seq"))
    else:
        rows = list(Message.objects.filter(agent=agent, id__in=agent.message_ids or []).order_by("seq"))
        runs = list(Run.objects.filter(agent=agent, id__in={m.run_id for m in rows if m.run_id}).order_by("created_at"))
    texts = [(m.body or m.text).strip() for m in rows if m.role == "user" and not m.kind]
    turns = [t for t in texts if t][-MAX_TURNS:]
    calls = [
        {"name": c.get("name")} for m in rows if m.role == "assistant" for c in m.tool_calls or [] if c.get("name")
    ]
    replies = [
        e.get("content")
        for e in messages_to_letta([m for m in rows if m.role == "assistant"])
        if e["message_type"] == "assistant_message" and e.get("content")
    ]
    expect: dict = {}
    if calls:
        expect["tools"] = {"calls": calls, "order": "sequence"}
    if replies:
        expect["reply"] = {"contains": replies[-1].strip()[:80]}
    if runs and runs[-1].stop_reason:
        expect["stop_reason"] = runs[-1].stop_reason
    name = turns[0][:60] if turns else "new test"
    return {"name": name, "turns": turns, "expect": expect}


@task()
def agent_tests_task(*, test_run_id: str) -> str:
    """Task-queue entry point of tests_execute."""
    return tests_execute(test_run_id=test_run_id)
