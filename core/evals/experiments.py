"""Experiments: a dataset run against a target in the background, each case on a fresh throwaway agent, graded.

The agent under edit is never changed: every case runs through core.evals.runner (the runner of agent tests too) on
a copy of its starting state with the experiment's model and prompt or block overrides. The copy is kept, marked
`eval_copy` in its metadata, so each case's runs open in the debugger; deleting the experiment deletes them. A run of
an agent's tests is an experiment of its tests dataset too (core.evals.agent_tests): its copies are marked as the
tests' and kept only when asked.
"""

import logging
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from django.db import close_old_connections, connections, transaction
from django.utils import timezone
from django_tasks import task

from core.agents import versions
from core.agents.queries import row_update
from core.agents.services import agent_delete
from core.engine import graders as g
from core.errors import Invalid, NotFound
from core.evals import aggregate, queries, runner
from core.evals.starts import Starts
from core.models import Agent, CaseResult, Dataset, EvalCase, Experiment, Organization, Step
from core.runs import executor

log = logging.getLogger(__name__)
COPY_KEY = "eval_copy"
TEST_COPY_KEY = "agent_test_copy"
MAX_CONCURRENCY = 8
MAX_TARGETS = 8


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


def _default_name(dataset: Dataset, agent: Agent | None, version: int | None, model: str, overrides: dict) -> str:
    parts = [dataset.name, model or (agent.model if agent else "own agents")]
    parts += [f"v{version}"] if version else []
    parts += ["prompt edited"] if "system" in overrides else []
    parts += [f"{', '.join(overrides['blocks'])} edited"] if overrides.get("blocks") else []
    return " · ".join(parts)[:200]


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
    cases: list[EvalCase] | None = None,
    keep_copies: bool = True,
) -> Experiment:
    """Record an experiment of the dataset (or of some of its `cases`) on the target with a pending result per case
    and queue it as a background task (not `queued`: the caller runs or queues it itself); returns it. Invalid when
    nothing could run (no cases, no graders, no agent for a case without a start). Records the agent's current
    version (a first one if it has none)."""
    cases = list(dataset.cases.order_by("position", "created_at")) if cases is None else cases
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
            name=name[:200] or _default_name(dataset, agent, agent_version, model, overrides or {}),
            agent=agent,
            agent_version=agent_version,
            model=model or "",
            overrides=_overrides_check(overrides or {}),
            graders=dataset.graders,
            gate=dataset.gate,
            concurrency=concurrency,
            keep_copies=keep_copies,
            total=len(cases),
            version_at_start=versions.version_current(agent=agent).number if agent is not None else None,
        )
        CaseResult.objects.bulk_create(
            CaseResult(experiment=experiment, case=c, case_key=c.id, position=i, name=c.name)
            for i, c in enumerate(cases)
        )
        if queued:
            executor.queue.woken_after_commit(experiment_task.enqueue(experiment_id=experiment.id))
    return experiment


def experiments_start(
    *, owner: Organization, dataset: Dataset, targets: list[dict], concurrency: int = 2, queued: bool = True
) -> list[Experiment]:
    """Run the dataset against several targets at once (promptfoo's matrix, Letta Evals' model_handles): one
    experiment per target, each `{"agent", "agent_version", "model", "overrides", "name"}` (all optional), recorded
    together or not at all and queued side by side; returns them in the targets' order. Invalid names the target."""
    if not 1 <= len(targets) <= MAX_TARGETS:
        raise Invalid(f"An experiment run has 1 to {MAX_TARGETS} targets.")
    made = []
    with transaction.atomic():
        for i, target in enumerate(targets):
            try:
                made.append(
                    experiment_start(
                        owner=owner,
                        dataset=dataset,
                        agent=target.get("agent"),
                        agent_version=target.get("agent_version"),
                        model=target.get("model") or "",
                        overrides=target.get("overrides") or {},
                        concurrency=concurrency,
                        name=target.get("name") or "",
                        queued=queued,
                    )
                )
            except Invalid as exc:
                raise Invalid(f"Target {i + 1}: {exc.message}") from None
    return made


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


def _marker(experiment: Experiment, case: EvalCase) -> tuple[dict, str]:
    """How a case's copy is marked and named: as a test's copy in a run of an agent's tests (a kept one is listed
    with the owner's agents, to be inspected), else as an experiment's (hidden from that list)."""
    if experiment.dataset.tests_of_id is not None:
        return {TEST_COPY_KEY: {"agent_id": experiment.dataset.tests_of_id, "test_id": case.id}}, "test"
    return {COPY_KEY: {"experiment_id": experiment.id, "case_id": case.id}}, "eval"


def _target(experiment: Experiment) -> runner.Target:
    return runner.Target(
        agent=experiment.agent, version=experiment.agent_version, model=experiment.model, overrides=experiment.overrides
    )


def starts_for(*, experiment: Experiment, results: list[CaseResult]) -> Starts:
    """The starting states the results' cases share, to be read once for the run (core.evals.starts)."""
    target = _target(experiment)
    return Starts(Counter(runner.start_key(r.case, target) for r in results if r.case is not None))


def _case_body(
    experiment: Experiment,
    result: CaseResult,
    copies: list[Agent],
    judges: dict | None,
    starts: Starts | None,
    copy_id: str,
) -> dict:
    """Run and grade one case (core.evals.runner); returns the result's fields. The case's copy is appended to
    `copies` as soon as it exists; rubric judges are resolved through `judges` (core.evals.judge.judge_model), its
    copy made from the run's shared `starts` with the id `copy_id` where it can (else the result is told the copy's
    own id at once)."""
    case = result.case
    if case is None:
        return {"status": "error", "error": "the case was deleted"}
    target = _target(experiment)

    def on_copy(copy: Agent) -> None:
        copies.append(copy)
        if copy.id != copy_id:
            CaseResult.objects.filter(pk=result.pk).update(copy_agent_id=copy.id)

    marker, label = _marker(experiment, case)
    done = runner.case_run(
        owner=experiment.owner,
        case=case,
        target=target,
        graders=experiment.graders,
        marker=marker,
        label=label,
        on_copy=on_copy,
        judges=judges,
        starts=starts,
        copy_id=copy_id,
    )
    observed, scores, failed_run = done.observed, done.grades, done.failed_run
    specs = experiment.graders + (case.graders or [])
    return {
        "status": "done",
        "run_ids": [r.id for r in done.runs],
        "output": g.extract(specs[0], observed) if specs else (observed["reply"] or ""),
        "replies": observed["replies"],
        "scores": scores,
        "score": aggregate.case_score(scores, experiment.gate),
        "passed": aggregate.case_passed(scores, experiment.gate) and failed_run is None,
        "prompt_tokens": observed["tokens"]["prompt"],
        "completion_tokens": observed["tokens"]["completion"],
        "steps": len(observed["steps"]),
        "cost_usd": observed["cost_usd"],
        "latency_ms": done.latency_ms,
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


def case_execute(
    *, experiment: Experiment, result: CaseResult, judges: dict | None = None, starts: Starts | None = None
) -> bool:
    """Run one case and store its result (a case that cannot run is an error result, never a crashed experiment);
    counts it done and deletes its copy unless the experiment keeps them. `judges`: the rubric judges' models the
    run's cases share, each resolved once (core.evals.judge.judge_model); `starts`: their starting states, each read
    once (starts_for). A case of a cancelled experiment is left pending; returns whether the case ran.

    The case is claimed (running, with the id its copy will have) by one statement that also checks the experiment
    was not cancelled, before the copy exists: deleting the experiment then deletes a copy made at any point."""
    copy_id = Agent._meta.pk.get_default()
    if not queries.case_claim(result=result, copy_id=copy_id):
        return False
    copies: list[Agent] = []
    try:
        fields = _case_body(experiment, result, copies, judges, starts, copy_id)
    except Exception as exc:  # noqa: BLE001 - one broken case is that case's error, the others still run
        log.exception("eval case %s failed to run", result.pk)
        fields = {"status": "error", "passed": False, "error": getattr(exc, "message", None) or f"{exc}"}
    fields["copy_agent_id"] = copies[-1].id if copies else ""
    if not experiment.keep_copies:
        for copy in copies:
            agent_delete(agent=copy)  # its blocks are copies no one else uses: they go too
        fields["copy_agent_id"] = ""
    row_update(CaseResult, where={"id": result.pk}, **fields, completed_at=timezone.now())  # not compiled
    queries.experiment_case_done(experiment_id=experiment.pk)
    return True


def _case_on_thread(experiment: Experiment, result: CaseResult, judges: dict, starts: Starts) -> None:
    """case_execute on a pool thread, which closes its database connection after (Django tidies only requests')."""
    close_old_connections()
    try:
        case_execute(experiment=experiment, result=result, judges=judges, starts=starts)
    finally:
        connections.close_all()


def experiment_execute(*, experiment_id: str) -> str:
    """Task body: run the experiment's pending cases, at most `concurrency` at once, then store its figures and
    whether it passed its gate; returns its status."""
    experiment = Experiment.objects.select_related("owner", "agent", "dataset").get(pk=experiment_id)
    if not Experiment.objects.filter(pk=experiment.pk, status="queued").update(
        status="running", started_at=timezone.now()
    ):
        return experiment.status  # cancelled before it started, or taken already
    pending = list(experiment.results.filter(status="pending").select_related("case").order_by("position"))
    judges: dict = {}  # handle -> resolved model: a rubric's judge is resolved once a run, not once a case
    starts = starts_for(experiment=experiment, results=pending)  # a starting state is read once a run too
    if experiment.concurrency <= 1:
        for result in pending:
            case_execute(experiment=experiment, result=result, judges=judges, starts=starts)
    else:
        with ThreadPoolExecutor(max_workers=experiment.concurrency, thread_name_prefix="eval") as pool:
            list(pool.map(lambda r: _case_on_thread(experiment, r, judges, starts), pending))
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
