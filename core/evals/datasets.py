"""Datasets and their cases: made by hand, from a conversation, from an agent's tests, or from Letta Evals' JSONL.

An agent's tests are the cases of its own tests dataset (core.agents.agent_tests), each with its expectations as an
`expect` grader (core.engine.graders), so one set of checks serves both; they can be copied into any dataset.
"""

import json

from django.db import transaction
from django.db.models import Max

from core.agents import agent_tests
from core.agents.agentfile.parse import parse_agent_file
from core.engine import graders as g
from core.errors import Invalid, NotFound
from core.evals.aggregate import gate_problems
from core.models import Agent, Dataset, EvalCase, Organization, Step

MAX_TURNS = agent_tests.MAX_TURNS
MAX_CASES = 2000
MAX_GRADERS = 20
MAX_JSONL_BYTES = 10 * 1024 * 1024


def graders_check(graders) -> list[dict]:
    """The grader specs, validated (Invalid with every problem); each gets a name."""
    if not isinstance(graders, list) or len(graders) > MAX_GRADERS:
        raise Invalid(f"Graders are a list of at most {MAX_GRADERS} grader objects.")
    problems = [p for spec in graders for p in g.grader_problems(spec)]
    if problems:
        raise Invalid("Graders: " + "; ".join(problems))
    named = [{**spec, "name": g.grader_name(spec, i)} for i, spec in enumerate(graders)]
    names = [s["name"] for s in named]
    if len(set(names)) != len(names):
        raise Invalid("Every grader of a dataset needs a name of its own.")
    return named


def _gate_check(gate) -> dict:
    problems = gate_problems(gate)
    if problems:
        raise Invalid("Gate: " + "; ".join(problems))
    return gate or {}


def dataset_get(*, owner: Organization, dataset_id: str) -> Dataset:
    found = Dataset.objects.filter(owner=owner, id=dataset_id).first()
    if found is None:
        raise NotFound(f"Dataset '{dataset_id}' not found")
    return found


def datasets_list(*, owner: Organization) -> list[Dataset]:
    return list(Dataset.objects.filter(owner=owner).order_by("-created_at"))


def cases_list(*, dataset: Dataset) -> list[EvalCase]:
    return list(dataset.cases.order_by("position", "created_at"))


def _agent_of(owner: Organization, agent_id: str | None) -> Agent | None:
    if not agent_id:
        return None
    found = Agent.objects.filter(owner=owner, id=agent_id).first()
    if found is None:
        raise NotFound(f"Agent '{agent_id}' not found")
    return found


def dataset_create(
    *,
    owner: Organization,
    name: str,
    description: str = "",
    graders: list | None = None,
    gate: dict | None = None,
    agent_id: str | None = None,
) -> Dataset:
    """Create an empty dataset with its default graders and gate (validated)."""
    if not name.strip():
        raise Invalid("A dataset needs a name.")
    return Dataset.objects.create(
        owner=owner,
        name=name.strip()[:200],
        description=description,
        graders=graders_check(graders or []),
        gate=_gate_check(gate),
        agent=_agent_of(owner, agent_id),
    )


def dataset_update(*, dataset: Dataset, changes: dict) -> Dataset:
    """Change a dataset's name, description, graders, gate or default agent (only those given)."""
    if "graders" in changes:
        dataset.graders = graders_check(changes["graders"])
    if "gate" in changes:
        dataset.gate = _gate_check(changes["gate"])
    if "agent_id" in changes:
        dataset.agent = _agent_of(dataset.owner, changes["agent_id"])
    for key in ("name", "description"):
        if changes.get(key) is not None:
            setattr(dataset, key, changes[key].strip()[:200] if key == "name" else changes[key])
    if not dataset.name:
        raise Invalid("A dataset needs a name.")
    dataset.save()
    return dataset


def _turns(value) -> list[str]:
    turns = [value] if isinstance(value, str) else value
    if (
        not isinstance(turns, list)
        or not turns
        or len(turns) > MAX_TURNS
        or any(not isinstance(t, str) or not t.strip() for t in turns)
    ):
        raise Invalid(f"A case needs 1 to {MAX_TURNS} user turns, each a non-empty string.")
    return turns


def _case_fields(owner: Organization, case: dict) -> dict:
    turns = _turns(case.get("turns", case.get("input")))
    truth = case.get("ground_truth")
    per_turn = isinstance(truth, list) and len(truth) == len(turns) and all(isinstance(t, str) for t in truth)
    if truth is not None and not isinstance(truth, str) and not per_turn:
        raise Invalid("A case's ground truth is a string, or one string per turn.")
    start = case.get("start") or {}
    if not isinstance(start, dict) or set(start) - {"agent_id", "version", "step_id", "before"}:
        raise Invalid(
            'A case\'s start is {"agent_id": ..., "version": N}, {"step_id": ..., "before": false} or nothing.'
        )
    if start:
        _agent_of(owner, start.get("agent_id"))
        if start.get("version") is not None and not isinstance(start["version"], int):
            raise Invalid("A case's start version is a number.")
        if not isinstance(start.get("step_id"), str | None) or not isinstance(start.get("before", False), bool):
            raise Invalid("A case's start step is a step id, and `before` true or false.")
    agent_file = case.get("agent_file")
    if agent_file is not None:
        parse_agent_file(agent_file)  # AgentFileError (422) for one that cannot be imported
    rubric_vars = case.get("rubric_vars") or {}
    if not isinstance(rubric_vars, dict):
        raise Invalid("rubric_vars is an object of names to values.")
    return {
        "name": str(case.get("name") or turns[0])[:200],
        "turns": turns,
        "ground_truth": truth,
        "rubric_vars": rubric_vars,
        "graders": graders_check(case.get("graders") or []),
        "start": start,
        "agent_file": agent_file,
    }


@transaction.atomic
def cases_add(*, dataset: Dataset, cases: list[dict]) -> list[EvalCase]:
    """Append cases (validated all first: none is added if one is wrong); returns them. Locks the dataset's row."""
    Dataset.objects.select_for_update().filter(pk=dataset.pk).first()
    fields = []
    for i, case in enumerate(cases):
        if not isinstance(case, dict):
            raise Invalid(f"Case {i + 1} is not an object.")
        try:
            fields.append(_case_fields(dataset.owner, case))
        except Invalid as exc:
            raise Invalid(f"Case {i + 1}: {exc.message}") from None
    count = dataset.cases.count()
    if count + len(fields) > MAX_CASES:
        raise Invalid(f"A dataset holds at most {MAX_CASES} cases.")
    last = dataset.cases.aggregate(m=Max("position"))["m"]
    start = 0 if last is None else last + 1
    made = EvalCase.objects.bulk_create(
        EvalCase(dataset=dataset, position=start + i, **f) for i, f in enumerate(fields)
    )
    Dataset.objects.filter(pk=dataset.pk).update(updated_at=dataset.updated_at)
    return made


def case_get(*, dataset: Dataset, case_id: str) -> EvalCase:
    found = dataset.cases.filter(id=case_id).first()
    if found is None:
        raise NotFound(f"Case '{case_id}' not found")
    return found


def case_delete(*, dataset: Dataset, case_id: str) -> None:
    """Delete one case (its results in past experiments stay, without it)."""
    case_get(dataset=dataset, case_id=case_id).delete()


def case_from_conversation(
    *, dataset: Dataset, agent: Agent, run_id: str | None = None, conversation_id: str | None = None
) -> EvalCase:
    """Add the user turns of the agent's own thread, of one of its conversations or of one run as a case, its last
    reply the ground truth, starting from the agent as it is; the drafting is the agent tests' own (test_propose:
    NotFound for a run or conversation not the agent's)."""
    draft = agent_tests.test_propose(agent=agent, run_id=run_id, conversation_id=conversation_id)
    if not draft["turns"]:
        raise Invalid("This conversation has no user turns to make a case of.")
    truth = (draft["expect"].get("reply") or {}).get("contains")
    case = {"name": draft["name"], "turns": draft["turns"], "ground_truth": truth, "start": {"agent_id": agent.id}}
    return cases_add(dataset=dataset, cases=[case])[0]


def cases_from_feedback(*, dataset: Dataset, agent: Agent, feedback: str | None = None) -> list[EvalCase]:
    """Add a case for each run of the agent with a step a person marked (thumbs up or down; `feedback` keeps one):
    the run's user turns, starting from the agent; a liked run's reply is the ground truth, a disliked one's comment
    goes to rubric_vars.feedback for a rubric to use."""
    marked = Step.objects.filter(agent=agent, run__isnull=False).exclude(feedback="")
    if feedback:
        marked = marked.filter(feedback=feedback)
    by_run: dict[str, Step] = {}
    for step in marked.order_by("created_at"):
        by_run[step.run_id] = step  # the run's last marked step speaks for it
    cases = []
    for run_id, step in by_run.items():
        draft = agent_tests.test_propose(agent=agent, run_id=run_id)
        if not draft["turns"]:
            continue
        liked = step.feedback == "positive"
        reply = (draft["expect"].get("reply") or {}).get("contains")
        mark = "👍" if liked else "👎"
        cases.append(
            {
                "name": f"{mark} {draft['name']}",
                "turns": draft["turns"],
                "ground_truth": reply if liked else None,
                "rubric_vars": {"feedback": step.feedback_comment or step.feedback},
                "start": {"agent_id": agent.id},
            }
        )
    if not cases:
        raise Invalid("No step of this agent's runs is marked with feedback.")
    return cases_add(dataset=dataset, cases=cases)


def cases_from_agent_tests(*, dataset: Dataset, agent: Agent) -> list[EvalCase]:
    """Add each of the agent's tests as a case whose grader is the test's expectations (an `expect` grader)."""
    tests = [t for t in agent_tests.tests_list(agent=agent) if not t["start"].get("step_id")]
    if not tests:
        raise Invalid("This agent has no tests that start from the agent as it is.")
    cases = [
        {
            "name": t["name"],
            "turns": t["turns"],
            "start": {"agent_id": agent.id},
            "graders": [{"name": "expectations", "kind": "expect", "expect": t["expect"]}],
        }
        for t in tests
    ]
    return cases_add(dataset=dataset, cases=cases)


# --------------------------------------------------------------------------- Letta Evals' JSONL


def case_to_sample(case: EvalCase) -> dict:
    """A case as a Letta Evals dataset row (letta_evals/models/sample.py: Sample), with our extras under extra_vars."""
    row: dict = {"id": case.id, "input": case.turns[0] if len(case.turns) == 1 else case.turns}
    if case.ground_truth is not None:
        row["ground_truth"] = case.ground_truth
    if case.rubric_vars:
        row["rubric_vars"] = case.rubric_vars
    extra = {k: v for k, v in (("name", case.name), ("graders", case.graders), ("start", case.start)) if v}
    if extra:
        row["extra_vars"] = {"agents_ide": extra}
    return row


def sample_to_case(row: dict) -> dict:
    """A Letta Evals dataset row as case fields (unknown keys are ignored, as Letta's loader does)."""
    extra = ((row.get("extra_vars") or {}) if isinstance(row.get("extra_vars"), dict) else {}).get("agents_ide") or {}
    return {
        "name": extra.get("name") or "",
        "turns": row.get("input"),
        "ground_truth": row.get("ground_truth"),
        "rubric_vars": row.get("rubric_vars") or {},
        "graders": extra.get("graders") or [],
        "start": extra.get("start") or {},
    }


def cases_import_jsonl(*, dataset: Dataset, text: str) -> list[EvalCase]:
    """Add the cases of a Letta Evals JSONL dataset (one sample a line); Invalid names the first bad line."""
    if len(text.encode()) > MAX_JSONL_BYTES:
        raise Invalid(f"A dataset file is at most {MAX_JSONL_BYTES // (1024 * 1024)} MB.")
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise Invalid(f"Line {number} is not JSON: {exc}") from None
        if not isinstance(row, dict):
            raise Invalid(f"Line {number} is not a JSON object.")
        rows.append(sample_to_case(row))
    if not rows:
        raise Invalid("The dataset file has no samples.")
    return cases_add(dataset=dataset, cases=rows)


def cases_export_jsonl(*, dataset: Dataset) -> str:
    """The dataset's cases as Letta Evals JSONL."""
    return "".join(json.dumps(case_to_sample(c), ensure_ascii=False) + "\n" for c in cases_list(dataset=dataset))
