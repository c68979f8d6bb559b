"""REST endpoints for evals (core.evals), our own routes under /v1/evals: datasets and cases, Letta Evals' JSONL and
suite YAML, experiments and their results, and the comparison of two. Thin: parse, call a service, present."""

from datetime import datetime
from typing import Any, Literal

from django.http import HttpResponse
from ninja import Field, Router, Schema

from core.api.common import owner
from core.evals import compare, datasets, experiments, suite
from core.providers import model_resolve
from core.selectors import agent_get

router = Router(tags=["evals"])


class DatasetIn(Schema):
    name: str = Field(..., min_length=1, max_length=200)
    description: str = Field("", max_length=10_000)
    graders: list[dict] = Field(default_factory=list, description="grader specs: {name, kind, extractor, ...}")
    gate: dict = Field(default_factory=dict, description="{metric_key, metric: avg_score|accuracy, op, value}")
    agent_id: str | None = Field(None, description="the agent cases without a start run on by default")


class DatasetPatch(Schema):
    name: str | None = Field(None, min_length=1, max_length=200)
    description: str | None = Field(None, max_length=10_000)
    graders: list[dict] | None = None
    gate: dict | None = None
    agent_id: str | None = None


class DatasetOut(Schema):
    id: str
    name: str
    description: str
    graders: list[dict]
    gate: dict
    agent_id: str | None
    created_at: datetime


class CaseIn(Schema):
    name: str = Field("", max_length=200)
    turns: list[str] = Field(..., min_length=1, max_length=datasets.MAX_TURNS)
    ground_truth: str | list[str] | None = None
    rubric_vars: dict = Field(default_factory=dict)
    graders: list[dict] = Field(default_factory=list, description="in addition to the dataset's")
    start: dict = Field(default_factory=dict, description='{"agent_id", "version"}: where the case starts')
    agent_file: dict | None = Field(None, description="or an agent file the case starts from")


class CaseOut(Schema):
    id: str
    position: int
    name: str
    turns: list[str]
    ground_truth: Any = None
    rubric_vars: dict
    graders: list[dict]
    start: dict
    has_agent_file: bool = False

    @staticmethod
    def resolve_has_agent_file(case) -> bool:
        return case.agent_file is not None


class FromAgentIn(Schema):
    agent_id: str
    run_id: str | None = Field(None, description="from-conversation: the turns of this run only")
    conversation_id: str | None = Field(
        None, description="from-conversation: the turns of this conversation of the agent (none: its own thread)"
    )


class FromFeedbackIn(Schema):
    agent_id: str
    feedback: Literal["positive", "negative"] | None = Field(None, description="only steps marked so")


class TextIn(Schema):
    jsonl: str = Field(..., max_length=datasets.MAX_JSONL_BYTES)


class SuiteIn(Schema):
    suite: str = Field(..., max_length=suite.MAX_SUITE_BYTES, description="the Letta Evals suite YAML")
    dataset: str = Field(..., max_length=datasets.MAX_JSONL_BYTES, description="its dataset, JSONL")


class SuiteOut(Schema):
    dataset: DatasetOut
    model_handles: list[str]


class ExperimentIn(Schema):
    dataset_id: str
    agent_id: str | None = None
    agent_version: int | None = Field(None, ge=1)
    model: str | None = Field(None, max_length=200)
    overrides: dict = Field(default_factory=dict, description='{"system": str, "blocks": {label: value}}')
    concurrency: int = Field(2, ge=1, le=experiments.MAX_CONCURRENCY)
    name: str = Field("", max_length=200)


class TargetIn(Schema):
    agent_id: str | None = None
    agent_version: int | None = Field(None, ge=1)
    model: str | None = Field(None, max_length=200)
    overrides: dict = Field(default_factory=dict, description='{"system": str, "blocks": {label: value}}')
    name: str = Field("", max_length=200)


class ExperimentsIn(Schema):
    targets: list[TargetIn] = Field(..., min_length=1, max_length=experiments.MAX_TARGETS)
    concurrency: int = Field(2, ge=1, le=experiments.MAX_CONCURRENCY)


class ResultOut(Schema):
    position: int
    case_id: str | None
    name: str
    status: str
    run_ids: list[str]
    copy_agent_id: str
    output: str
    replies: list[str]
    scores: list[dict]
    score: float | None
    passed: bool | None
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    latency_ms: float | None
    error: str


class ExperimentOut(Schema):
    id: str
    dataset_id: str
    name: str
    agent_id: str | None
    agent_version: int | None
    model: str
    overrides: dict
    concurrency: int
    status: str
    total: int
    done: int
    aggregates: dict
    gate_passed: bool | None
    created_at: datetime
    completed_at: datetime | None
    results: list[ResultOut] | None = None

    @staticmethod
    def resolve_results(experiment) -> list | None:
        return getattr(experiment, "result_rows", None)  # read with its results: the one experiment's route


class CaseSideOut(Schema):
    result_id: int
    status: str
    score: float | None
    passed: bool | None
    output: str
    scores: list[dict]
    run_ids: list[str]
    copy_agent_id: str
    error: str


class CaseComparisonOut(Schema):
    case_id: str | None
    name: str
    verdict: str = Field(description="b against a: better, worse, same, only_a or only_b")
    a: CaseSideOut | None
    b: CaseSideOut | None
    changes: list[dict] = Field(description="the graders whose verdict moved: {grader, a, b, reason (b's)}")


class ComparisonOut(Schema):
    a_id: str
    b_id: str
    cases: list[CaseComparisonOut]
    counts: dict[str, int]
    deltas: dict[str, float | None] = Field(description="b minus a: pass rate, gate, tokens, cost, latency, graders")


class DeletedEvalOut(Schema):
    deleted: str


def _dataset(request, dataset_id: str):
    return datasets.dataset_get(owner=owner(request), dataset_id=dataset_id)


@router.get("/evals/datasets", response=list[DatasetOut])
def datasets_list(request):
    return datasets.datasets_list(owner=owner(request))


@router.post("/evals/datasets", response=DatasetOut)
def dataset_create(request, body: DatasetIn):
    return datasets.dataset_create(owner=owner(request), **body.dict())


@router.get("/evals/datasets/{dataset_id}", response=DatasetOut)
def dataset_read(request, dataset_id: str):
    return _dataset(request, dataset_id)


@router.patch("/evals/datasets/{dataset_id}", response=DatasetOut)
def dataset_update(request, dataset_id: str, body: DatasetPatch):
    return datasets.dataset_update(dataset=_dataset(request, dataset_id), changes=body.dict(exclude_unset=True))


@router.delete("/evals/datasets/{dataset_id}", response=DeletedEvalOut)
def dataset_delete(request, dataset_id: str):
    experiments.dataset_delete(dataset=_dataset(request, dataset_id))
    return {"deleted": dataset_id}


@router.get("/evals/datasets/{dataset_id}/cases", response=list[CaseOut])
def cases_list(request, dataset_id: str):
    return datasets.cases_list(dataset=_dataset(request, dataset_id))


@router.post("/evals/datasets/{dataset_id}/cases", response=list[CaseOut])
def cases_add(request, dataset_id: str, body: list[CaseIn]):
    return datasets.cases_add(dataset=_dataset(request, dataset_id), cases=[c.dict() for c in body])


@router.post("/evals/datasets/{dataset_id}/cases/from-agent-tests", response=list[CaseOut])
def cases_from_agent_tests(request, dataset_id: str, body: FromAgentIn):
    """Add the agent's tests as cases, each graded by its expectations."""
    agent = agent_get(owner=owner(request), agent_id=body.agent_id)
    return datasets.cases_from_agent_tests(dataset=_dataset(request, dataset_id), agent=agent)


@router.post("/evals/datasets/{dataset_id}/cases/from-feedback", response=list[CaseOut])
def cases_from_feedback(request, dataset_id: str, body: FromFeedbackIn):
    """Add a case for each of the agent's runs with a step marked thumbs up or down (`feedback`: only those)."""
    agent = agent_get(owner=owner(request), agent_id=body.agent_id)
    return datasets.cases_from_feedback(dataset=_dataset(request, dataset_id), agent=agent, feedback=body.feedback)


@router.post("/evals/datasets/{dataset_id}/cases/from-conversation", response=CaseOut)
def case_from_conversation(request, dataset_id: str, body: FromAgentIn):
    """Add the user turns of the agent's own thread, of one of its conversations or of one run as a case, its last
    reply the ground truth."""
    agent = agent_get(owner=owner(request), agent_id=body.agent_id)
    dataset = _dataset(request, dataset_id)
    return datasets.case_from_conversation(
        dataset=dataset, agent=agent, run_id=body.run_id, conversation_id=body.conversation_id
    )


@router.delete("/evals/datasets/{dataset_id}/cases/{case_id}", response=DeletedEvalOut)
def case_delete(request, dataset_id: str, case_id: str):
    datasets.case_delete(dataset=_dataset(request, dataset_id), case_id=case_id)
    return {"deleted": case_id}


@router.post("/evals/datasets/{dataset_id}/import", response=list[CaseOut])
def cases_import(request, dataset_id: str, body: TextIn):
    """Add the cases of a Letta Evals JSONL dataset."""
    return datasets.cases_import_jsonl(dataset=_dataset(request, dataset_id), text=body.jsonl)


@router.get("/evals/datasets/{dataset_id}/export", response={200: str})
def cases_export(request, dataset_id: str):
    """The cases as Letta Evals JSONL (application/jsonl)."""
    text = datasets.cases_export_jsonl(dataset=_dataset(request, dataset_id))
    return HttpResponse(text, content_type="application/jsonl")


@router.get("/evals/datasets/{dataset_id}/suite", response={200: str})
def suite_export(request, dataset_id: str):
    """The dataset's graders, gate and agent as a Letta Evals suite YAML (its dataset: the export route)."""
    text = suite.suite_export(dataset=_dataset(request, dataset_id), base_url=request.build_absolute_uri("/"))
    return HttpResponse(text, content_type="application/yaml")


@router.post("/evals/suites/import", response=SuiteOut)
def suite_import(request, body: SuiteIn):
    """Create a dataset from a Letta Evals suite YAML and its JSONL dataset."""
    imported = suite.suite_import(owner=owner(request), suite_yaml=body.suite, dataset_jsonl=body.dataset)
    return {"dataset": imported.dataset, "model_handles": imported.model_handles}


@router.post("/evals/experiments", response=ExperimentOut)
def experiment_start(request, body: ExperimentIn):
    """Run the dataset against the target in the background; poll the experiment for progress and results."""
    org = owner(request)
    dataset = datasets.dataset_get(owner=org, dataset_id=body.dataset_id)
    agent = agent_get(owner=org, agent_id=body.agent_id) if body.agent_id else None
    if body.model:
        model_resolve(owner=org, handle=body.model)
    fields = body.dict(exclude={"dataset_id", "agent_id"})
    return experiments.experiment_start(
        owner=org, dataset=dataset, agent=agent, **{**fields, "model": body.model or ""}
    )


@router.post("/evals/datasets/{dataset_id}/experiments", response=list[ExperimentOut])
def experiments_start(request, dataset_id: str, body: ExperimentsIn):
    """Run the dataset against several targets side by side (models, versions, prompt or block overrides): one
    experiment per target, all started or none."""
    org = owner(request)
    dataset = _dataset(request, dataset_id)
    targets = []
    for t in body.targets:
        if t.model:
            model_resolve(owner=org, handle=t.model)
        agent = agent_get(owner=org, agent_id=t.agent_id) if t.agent_id else None
        targets.append({**t.dict(exclude={"agent_id"}), "agent": agent})
    return experiments.experiments_start(owner=org, dataset=dataset, targets=targets, concurrency=body.concurrency)


@router.get("/evals/experiments", response=list[ExperimentOut], exclude_none=True)
def experiments_list(request):
    return experiments.experiments_list(owner=owner(request))


@router.get("/evals/datasets/{dataset_id}/experiments", response=list[ExperimentOut], exclude_none=True)
def dataset_experiments(request, dataset_id: str):
    return experiments.experiments_list(owner=owner(request), dataset=_dataset(request, dataset_id))


@router.get("/evals/experiments/{experiment_id}", response=ExperimentOut)
def experiment_read(request, experiment_id: str):
    experiment = experiments.experiment_get(owner=owner(request), experiment_id=experiment_id)
    experiment.result_rows = experiments.results_list(experiment=experiment)
    return experiment


@router.post("/evals/experiments/{experiment_id}/cancel", response=ExperimentOut)
def experiment_cancel(request, experiment_id: str):
    """Stop the experiment: cases not started are not run; its figures are those of the cases done."""
    experiment = experiments.experiment_get(owner=owner(request), experiment_id=experiment_id)
    return experiments.experiment_cancel(experiment=experiment)


@router.delete("/evals/experiments/{experiment_id}", response=DeletedEvalOut)
def experiment_delete(request, experiment_id: str):
    experiment = experiments.experiment_get(owner=owner(request), experiment_id=experiment_id)
    experiments.experiment_delete(experiment=experiment)
    return {"deleted": experiment_id}


@router.get("/evals/compare/{a}/{b}", response=ComparisonOut)
def experiments_compare(
    request, a: str, b: str, only: Literal["better", "worse", "same", "only_a", "only_b"] | None = None
):
    """Experiment b against a, case by case (`only=worse`: the regressions), with the aggregate deltas."""
    org = owner(request)
    first = experiments.experiment_get(owner=org, experiment_id=a)
    second = experiments.experiment_get(owner=org, experiment_id=b)
    return compare.experiments_compare(a=first, b=second, only=only)
