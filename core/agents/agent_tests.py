"""An agent's regression tests, stored: a test is a case (core.models.EvalCase) of the agent's own tests dataset
(Dataset.tests_of), its expectations the case's `expect` grader, so one model of a case and its graders serves tests
and evals. A test travels in `.af` exports under the agent's metadata (`agent_tests`) and becomes a case again on
import. A run of the tests is an experiment (core.models.Experiment) of that dataset, one CaseResult a test; here it
is read back in the shape of a test run (the API's, the IDE's, `manage.py agent_test`'s). Running tests is
core.evals.agent_tests.
"""

import logging

from django.db import transaction
from django.db.models import Max

from core.agents.messages import messages_to_letta
from core.engine import expectations
from core.errors import Invalid, NotFound
from core.models import Agent, CaseResult, Conversation, Dataset, EvalCase, Experiment, Message, Run, Step

log = logging.getLogger(__name__)
METADATA_KEY = "agent_tests"
MAX_TURNS = 20


def _readable(test) -> bool:
    """Whether a test from outside (an agent file's metadata) has the shape every reader relies on."""
    start = test.get("start") if isinstance(test, dict) else None
    return (
        isinstance(test, dict)
        and isinstance(test.get("id"), str | None)
        and isinstance(test.get("name"), str)
        and isinstance(test.get("turns"), list)
        and all(isinstance(t, str) for t in test["turns"])
        and isinstance(test.get("expect"), dict)
        and isinstance(start, dict | None)
        and isinstance((start or {}).get("step_id"), str | None)
    )


def _expect_of(case: EvalCase) -> dict | None:
    return next((s["expect"] for s in case.graders or [] if isinstance(s, dict) and s.get("kind") == "expect"), None)


def case_to_test(case: EvalCase) -> dict:
    """A case of an agent's tests dataset in the shape of a test (the API's, the IDE's and the agent file's)."""
    start = case.start or {}
    return {
        "id": case.id,
        "name": case.name,
        "turns": case.turns,
        "expect": _expect_of(case),
        "start": {"step_id": start.get("step_id"), "before": bool(start.get("before"))},
    }


def _cases(agent: Agent):
    return EvalCase.objects.filter(dataset__tests_of=agent).order_by("position", "created_at")


def tests_list(*, agent: Agent) -> list[dict]:
    """The agent's tests: the cases of its tests dataset that carry expectations."""
    return [case_to_test(c) for c in _cases(agent) if _expect_of(c) is not None]


def _tests_dataset(agent: Agent) -> Dataset:
    """The agent's tests dataset, made on first use. Caller holds the agent's row lock."""
    found = Dataset.objects.filter(tests_of=agent).first()
    if found is None:
        found = Dataset.objects.create(
            owner_id=agent.owner_id, name=f"Tests · {agent.name}"[:200], agent=agent, tests_of=agent
        )
    return found


def case_fields(clean: dict) -> dict:
    step_id = clean["start"]["step_id"]
    return {
        "name": clean["name"],
        "turns": clean["turns"],
        "graders": [{"name": "expectations", "kind": "expect", "expect": clean["expect"]}],
        "start": {"step_id": step_id, "before": clean["start"]["before"]} if step_id else {},
    }


def agent_locked(agent: Agent) -> Agent:
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
        "id": test.get("id"),
        "name": name[:200],
        "turns": turns,
        "expect": expect,
        "start": {"step_id": start.get("step_id"), "before": bool(start.get("before"))},
    }


@transaction.atomic
def test_save(*, agent: Agent, test: dict) -> dict:
    """Add a test to the agent (a case of its tests dataset), or replace the one with the same id; returns it
    (validated). Locks the agent's row; NotFound if the agent is gone."""
    clean = _clean(test)
    agent = agent_locked(agent)
    if clean["start"]["step_id"] and not Step.objects.filter(agent=agent, id=clean["start"]["step_id"]).exists():
        raise Invalid(f"Step '{clean['start']['step_id']}' is not one of this agent's steps.")
    dataset = _tests_dataset(agent)
    fields = case_fields(clean)
    if clean["id"] and dataset.cases.filter(id=clean["id"]).update(**fields):
        return case_to_test(dataset.cases.get(id=clean["id"]))
    if clean["id"] and EvalCase.objects.filter(id=clean["id"]).exists():
        raise Invalid(f"Test id '{clean['id']}' is taken by another agent's test or case.")
    last = dataset.cases.aggregate(m=Max("position"))["m"]
    case = EvalCase.objects.create(
        **({"id": clean["id"]} if clean["id"] else {}),
        dataset=dataset,
        position=0 if last is None else last + 1,
        **fields,
    )
    return case_to_test(case)


@transaction.atomic
def tests_adopt(*, agent: Agent, tests) -> int:
    """Give a new agent the tests an agent file carried (new ids, as everything imported gets); returns how many
    could not be read and were left out. Locks the agent's row."""
    readable = [t for t in tests if _readable(t)] if isinstance(tests, list) else []
    kept = []
    for test in readable:
        try:
            kept.append(_clean({**test, "id": None}))
        except Invalid:
            continue
    if kept:
        dataset = _tests_dataset(agent_locked(agent))
        EvalCase.objects.bulk_create(
            EvalCase(dataset=dataset, position=i, **case_fields(clean)) for i, clean in enumerate(kept)
        )
    return (len(tests) if isinstance(tests, list) else 1) - len(kept)


@transaction.atomic
def test_delete(*, agent: Agent, test_id: str) -> list[dict]:
    """Delete one of the agent's tests; returns the tests left. Locks the agent's row; NotFound if the agent or the
    test is gone."""
    agent = agent_locked(agent)
    if not _cases(agent).filter(id=test_id).delete()[0]:
        raise NotFound(f"Test '{test_id}' not found")
    return tests_list(agent=agent)


def test_run_get(*, agent: Agent, run_id: str) -> Experiment:
    """A run of the agent's tests: an experiment of its tests dataset. NotFound for any other id."""
    found = Experiment.objects.filter(agent=agent, dataset__tests_of=agent, id=run_id).first()
    if found is None:
        raise NotFound(f"Test run '{run_id}' not found")
    return found


def run_status(run: Experiment) -> str:
    """A test run's status from its experiment's: created, running, then passed (its gate, or every test, passed),
    failed or cancelled."""
    if run.status == "queued":
        return "created"
    if run.status == "completed":
        return "passed" if run.gate_passed else "failed"
    return run.status


def test_result(result: CaseResult) -> dict:
    """One test's result from its case result: its expectations' failures (a run that did not complete is one when
    no expectation failed), or the error that kept it from running or from being checked."""
    expect = next((s for s in result.scores or [] if s.get("kind") == "expect"), {})
    failures = list(expect.get("failures") or [])
    error = (
        result.error if result.status == "error" else next((s["error"] for s in result.scores if s.get("error")), "")
    )
    if result.status == "done" and result.error and not failures and not error:
        failures = [
            {
                "expectation": "the run completes",
                "expected": "completed",
                "actual": result.error.removeprefix("run "),
                "step_id": None,
            }
        ]
    return {
        "test_id": result.case_key,
        "name": result.name,
        "passed": bool(result.passed) and not error,
        "failures": [] if error else failures,
        "run_ids": result.run_ids,
        "copy_agent_id": result.copy_agent_id or None,
        "error": error or None,
        "cost_usd": result.cost_usd,
        "steps": result.steps,
        "duration_ms": result.latency_ms,
    }


def test_run_out(run: Experiment) -> dict:
    """A run of the agent's tests in the shape of a test run: the tests it runs, the results of those done."""
    rows = list(run.results.order_by("position"))
    results = [test_result(r) for r in rows if r.status in ("done", "error")]
    return {
        "id": run.id,
        "agent_id": run.agent_id,
        "status": run_status(run),
        "test_ids": [r.case_key for r in rows],
        "model": run.model or None,
        "results": results,
        "passed": sum(1 for r in results if r["passed"]),
        "failed": sum(1 for r in results if not r["passed"]),
        "created_at": run.created_at,
        "completed_at": run.completed_at,
    }


# --------------------------------------------------------------------------- proposals


def _in_context(agent: Agent, conversation_id: str | None) -> list[str]:
    """The in-context message ids of the agent's own thread, or of one of its conversations (NotFound for one that is
    not the agent's, or deleted)."""
    if conversation_id is None:
        return agent.message_ids or []
    found = Conversation.objects.filter(agent=agent, id=conversation_id, deleted=False).only("message_ids").first()
    if found is None:
        raise NotFound(f"Conversation '{conversation_id}' not found")
    return found.message_ids or []


def test_propose(*, agent: Agent, run_id: str | None = None, conversation_id: str | None = None) -> dict:
    """A test drafted from what happened (reads only): the user turns in context of the agent's own thread or of one
    of its conversations (or of one run), the tools called in order, a reply-contains from the last reply and the
    stop reason. NotFound for a run or conversation not the agent's."""

    if run_id:
        runs = list(Run.objects.filter(agent=agent, id=run_id))
        if not runs:
            raise NotFound(f"Run '{run_id}' not found")
        rows = list(Message.objects.filter(agent=agent, run_id=run_id).order_by("seq"))
    else:
        in_context = _in_context(agent, conversation_id)
        rows = list(Message.objects.filter(agent=agent, id__in=in_context).order_by("seq"))
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
