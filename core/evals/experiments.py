"""Experiments: a dataset run against a target in the background, each case on a fresh throwaway agent, graded.

The agent under edit is never changed: every case starts from a copy of it (at a version, with the experiment's
model and prompt or block overrides), from another agent named by the case, or from the case's agent file imported
anew. The copy is kept, marked `eval_copy` in its metadata, so each case's runs open in the debugger; deleting the
experiment deletes them. The turns go through the run executor like any message (core.runs.agent_tests.turns_run);
what happened is gathered as the agent tests gather it and graded by core.engine.graders and core.evals.judge.
"""

import logging
import time
from concurrent.futures import ThreadPoolExecutor

from django.db import close_old_connections, connections, transaction
from django.db.models import F
from django.utils import timezone
from django_tasks import task

from core.agents import versions
from core.agents.agentfile.importer import agentfile_import
from core.agents.agentfile.parse import parse_agent_file
from core.agents.services import agent_delete, agent_update
from core.engine import graders as g
from core.errors import Invalid, NotFound
from core.evals import aggregate
from core.evals.judge import rubric_grade
from core.models import Agent, CaseResult, Dataset, EvalCase, Experiment, Organization, RunStatus, Step
from core.runs import agent_tests, executor, timetravel
from memory.models import Block
from memory.services import block_update

log = logging.getLogger(__name__)
COPY_KEY = "eval_copy"
MAX_CONCURRENCY = 8


def experiment_get(*, owner: Organization, experiment_id: str) -> Experiment:
    found = Experiment.objects.filter(owner=owner, id=experiment_id).select_related("dataset").first()
    if found is None:
        raise NotFound(f"Experiment '{experiment_id}' not found")
    return found


def experiments_list(*, owner: Organization, dataset: Dataset | None = None) -> list[Experiment]:
    scope = Experiment.objects.filter(owner=owner)
    if dataset is not None:
        scope = scope.filter(dataset=dataset)
    return list(scope.select_related("dataset").order_by("-created_at"))


def results_list(*, experiment: Experiment) -> list[CaseResult]:
    return list(experiment.results.order_by("position"))


def results_with_links(*, experiment: Experiment) -> list[CaseResult]:
    """The results, each with `links`: (run id, its first step id or None) to open the run in the debugger."""
    results = results_list(experiment=experiment)
    run_ids = [run_id for r in results for run_id in r.run_ids]
    first: dict[str, str] = {}
    for run_id, step_id in Step.objects.filter(run_id__in=run_ids).order_by("-created_at").values_list("run_id", "id"):
        first[run_id] = step_id  # the oldest one is written last
    for r in results:
        r.links = [(run_id, first.get(run_id)) for run_id in r.run_ids]
    return results


def _overrides_check(overrides) -> dict:
    if not isinstance(overrides, dict) or set(overrides) - {"system", "blocks"}:
        raise Invalid('Overrides are {"system": "...", "blocks": {"label": "value"}}.')
    if "system" in overrides and not isinstance(overrides["system"], str):
        raise Invalid("The system prompt override is text.")
    blocks = overrides.get("blocks") or {}
    if not isinstance(blocks, dict) or not all(isinstance(v, str) for v in blocks.values()):
        raise Invalid("Block overrides are an object of block labels to values.")
    return overrides


def experiment_start(
    *,
    owner: Organization,
    dataset: Dataset,
    agent: Agent | None = None,
    agent_version: int | None = None,
    model: str = "",
    overrides: dict | None = None,
    concurrency: int = 2,
    name: str = "",
    queued: bool = True,
) -> Experiment:
    """Record an experiment of the dataset on the target with a pending result per case and queue it as a background
    task (not `queued`: the caller runs experiment_execute itself); returns it. Invalid when nothing could run (no cases, no graders, no agent for a case without a start)."""
    cases = list(dataset.cases.order_by("position", "created_at"))
    if not cases:
        raise Invalid("This dataset has no cases to run.")
    if not dataset.graders and not any(c.graders for c in cases):
        raise Invalid("This dataset has no graders: add one to the dataset or to its cases.")
    agent = agent or dataset.agent
    if agent is None and any(not c.start and c.agent_file is None for c in cases):
        raise Invalid("Name the agent to run the cases on: some cases have no starting state of their own.")
    if agent_version is not None:
        if agent is None:
            raise Invalid("A version needs an agent.")
        versions.version_get(agent=agent, number=agent_version)  # NotFound for one the agent never had
    if not 1 <= concurrency <= MAX_CONCURRENCY:
        raise Invalid(f"Concurrency is 1 to {MAX_CONCURRENCY}.")
    with transaction.atomic():
        experiment = Experiment.objects.create(
            owner=owner,
            dataset=dataset,
            name=name[:200] or f"{dataset.name} · {model or (agent.model if agent else 'own agents')}",
            agent=agent,
            agent_version=agent_version,
            model=model or "",
            overrides=_overrides_check(overrides or {}),
            graders=dataset.graders,
            gate=dataset.gate,
            concurrency=concurrency,
            total=len(cases),
        )
        CaseResult.objects.bulk_create(
            CaseResult(experiment=experiment, case=c, position=i, name=c.name) for i, c in enumerate(cases)
        )
        if queued:
            executor.queue.woken_after_commit(experiment_task.enqueue(experiment_id=experiment.id))
    return experiment


def experiment_delete(*, experiment: Experiment) -> None:
    """Delete an experiment, its results and its cases' throwaway agents (with their runs)."""
    for agent in Agent.objects.filter(id__in=[r.copy_agent_id for r in experiment.results.all() if r.copy_agent_id]):
        agent_delete(agent=agent)
    experiment.delete()


def dataset_delete(*, dataset: Dataset) -> None:
    """Delete a dataset with its cases and experiments (the experiments' throwaway agents too)."""
    for experiment in dataset.experiments.all():
        experiment_delete(experiment=experiment)
    dataset.delete()


# --------------------------------------------------------------------------- one case


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
    for block in Block.objects.filter(agentblock__agent=copy, label__in=list(values)):
        if block.value != values[block.label]:
            block_update(block=block, changes={"value": values[block.label]})


def _case_copy(experiment: Experiment, case: EvalCase) -> Agent:
    """A fresh agent for the case: its agent file imported, or a copy of its start (else the experiment's agent)
    at the version asked, with the experiment's model and overrides."""
    marker = {COPY_KEY: {"experiment_id": experiment.id, "case_id": case.id}}
    if case.agent_file is not None:
        imported = agentfile_import(owner=experiment.owner, parsed=parse_agent_file(case.agent_file))
        copy = Agent.objects.get(pk=imported.agent_ids[0])
        Agent.objects.filter(pk=copy.pk).update(metadata={**(copy.metadata or {}), **marker})
    else:
        start = case.start or {}
        source = Agent.objects.filter(owner=experiment.owner, id=start.get("agent_id")).first() or experiment.agent
        if source is None:
            raise Invalid("The case's starting agent no longer exists.")
        meta = {k: v for k, v in (source.metadata or {}).items() if k != agent_tests.METADATA_KEY}
        copy = timetravel.agent_copy(
            agent=source, name=f"{source.name} · eval {case.name[:60]}", metadata={**meta, **marker}
        )
        number = start.get("version") if start else experiment.agent_version
        if number is not None:
            _version_apply(copy, source, number)
    copy = Agent.objects.get(pk=copy.pk)
    changes = {}
    if experiment.model:
        changes["model"] = experiment.model
    if "system" in experiment.overrides:
        changes["system"] = experiment.overrides["system"]
    if changes:
        with versions.recording_paused():
            agent_update(agent=copy, changes=changes)
    _blocks_set(copy, experiment.overrides.get("blocks") or {})
    return Agent.objects.get(pk=copy.pk)


def case_grade(*, owner: Organization, specs: list[dict], case: dict, observed: dict) -> tuple[list[dict], dict]:
    """Every grader's verdict on one case (rubric graders call their judge); returns the grades and the judges'
    usage summed."""
    grades, judged = [], {"prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}
    for i, spec in enumerate(specs):
        name = g.grader_name(spec, i)
        try:
            if spec["kind"] == "rubric":
                grade, usage = rubric_grade(
                    owner=owner, name=name, spec=spec, case=case, submission=g.extract(spec, observed)
                )
                for key in judged:
                    judged[key] = None if judged[key] is None or usage[key] is None else judged[key] + usage[key]
            else:
                grade = g.grade_deterministic(name, spec, observed, case.get("ground_truth"))
        except (KeyError, ValueError, TypeError) as exc:
            grade = g.Grade(name, spec.get("kind", "?"), None, None, "", error=f"{type(exc).__name__}: {exc}")
        grades.append(grade.as_dict())
    return grades, judged


def _case_body(experiment: Experiment, result: CaseResult) -> dict:
    """Run and grade one case; returns the result's fields."""
    case = result.case
    if case is None:
        return {"status": "error", "error": "the case was deleted"}
    copy = _case_copy(experiment, case)
    CaseResult.objects.filter(pk=result.pk).update(status="running", copy_agent_id=copy.id)
    started = time.perf_counter()
    runs = agent_tests.turns_run(owner=experiment.owner, agent=copy, turns=case.turns)
    latency = round((time.perf_counter() - started) * 1000, 1)
    observed = agent_tests.observed_gather(copy, runs)
    case_data = {"turns": case.turns, "ground_truth": case.ground_truth, "rubric_vars": case.rubric_vars}
    specs = experiment.graders + (case.graders or [])
    scores, _judged = case_grade(owner=experiment.owner, specs=specs, case=case_data, observed=observed)
    failed_run = next((r for r in runs if r.status != RunStatus.COMPLETED), None)
    tokens = observed["tokens"]
    return {
        "status": "done",
        "run_ids": [r.id for r in runs],
        "output": g.extract(specs[0], observed) if specs else (observed["reply"] or ""),
        "replies": observed["replies"],
        "scores": scores,
        "score": aggregate.case_score(scores, experiment.gate),
        "passed": aggregate.case_passed(scores, experiment.gate) and failed_run is None,
        "prompt_tokens": tokens["prompt"],
        "completion_tokens": tokens["completion"],
        "cost_usd": observed["cost_usd"],
        "latency_ms": latency,
        "error": f"run {failed_run.status}: {failed_run.error or failed_run.stop_reason}" if failed_run else "",
    }


def experiment_cancel(*, experiment: Experiment) -> Experiment:
    """Stop a queued or running experiment: cases not started yet are not run (the ones running finish); its
    figures are those of the cases done. Invalid once it has ended."""
    if not Experiment.objects.filter(pk=experiment.pk, status__in=("queued", "running")).update(status="cancelled"):
        raise Invalid("This experiment has already ended.")
    experiment.refresh_from_db()
    if not experiment.results.filter(status="running").exists():
        experiment_finish(experiment=experiment)
    return experiment


def _cancelled(experiment: Experiment) -> bool:
    return Experiment.objects.filter(pk=experiment.pk, status="cancelled").exists()


def case_execute(*, experiment: Experiment, result: CaseResult) -> None:
    """Run one case and store its result (a case that cannot run is an error result, never a crashed experiment);
    counts it done. A case of a cancelled experiment is left pending."""
    if _cancelled(experiment):
        return
    try:
        fields = _case_body(experiment, result)
    except Exception as exc:  # noqa: BLE001 - one broken case is that case's error, the others still run
        log.exception("eval case %s failed to run", result.pk)
        fields = {"status": "error", "passed": False, "error": getattr(exc, "message", None) or f"{exc}"}
    CaseResult.objects.filter(pk=result.pk).update(**fields, completed_at=timezone.now())
    Experiment.objects.filter(pk=experiment.pk).update(done=F("done") + 1)


def _case_on_thread(experiment: Experiment, result: CaseResult) -> None:
    """case_execute on a pool thread, which closes its database connection after (Django tidies only requests')."""
    close_old_connections()
    try:
        case_execute(experiment=experiment, result=result)
    finally:
        connections.close_all()


def experiment_execute(*, experiment_id: str) -> str:
    """Task body: run the experiment's pending cases, at most `concurrency` at once, then store its figures and
    whether it passed its gate; returns its status."""
    experiment = Experiment.objects.select_related("owner", "agent").get(pk=experiment_id)
    if not Experiment.objects.filter(pk=experiment.pk, status="queued").update(
        status="running", started_at=timezone.now()
    ):
        return experiment.status  # cancelled before it started, or taken already
    pending = list(experiment.results.filter(status="pending").select_related("case").order_by("position"))
    if experiment.concurrency <= 1:
        for result in pending:
            case_execute(experiment=experiment, result=result)
    else:
        with ThreadPoolExecutor(max_workers=experiment.concurrency, thread_name_prefix="eval") as pool:
            list(pool.map(lambda r: _case_on_thread(experiment, r), pending))
    return experiment_finish(experiment=experiment)


def experiment_finish(*, experiment: Experiment) -> str:
    """Compute and store the experiment's figures from its results; returns its status."""
    rows = list(
        experiment.results.values(
            "status", "scores", "passed", "prompt_tokens", "completion_tokens", "cost_usd", "latency_ms", "error"
        )
    )
    figures = aggregate.aggregates(rows, experiment.gate)
    status = "cancelled" if _cancelled(experiment) else "completed"
    Experiment.objects.filter(pk=experiment.pk).update(
        status=status,
        aggregates=figures,
        gate_passed=aggregate.gate_passed(figures),
        completed_at=timezone.now(),
    )
    return status


@task()
def experiment_task(*, experiment_id: str) -> str:
    """Task-queue entry point of experiment_execute."""
    return experiment_execute(experiment_id=experiment_id)
