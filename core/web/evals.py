"""The Evals pages: datasets and their cases, experiments with live progress and results, and the compare view of
two experiments case by case. Thin: parse the form, call a service or selector (core.evals), render."""

import json

from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.views.decorators.http import require_http_methods, require_POST

from core.errors import DomainError, Invalid, NotFound
from core.evals import compare, datasets, experiments
from core.models import Agent
from core.text import JSONTooDeep, json_input
from core.web.common import agent_or_404, org


def _dataset_or_404(request, dataset_id: str):
    try:
        return datasets.dataset_get(owner=org(request), dataset_id=dataset_id)
    except NotFound as exc:
        raise Http404(str(exc)) from exc


def _experiment_or_404(request, experiment_id: str):
    try:
        return experiments.experiment_get(owner=org(request), experiment_id=experiment_id)
    except NotFound as exc:
        raise Http404(str(exc)) from exc


def _json_field(text: str, what: str, default):
    if not text.strip():
        return default
    try:
        return json_input(text)
    except (JSONTooDeep, ValueError) as exc:
        raise Invalid(f"{what} is not valid JSON: {exc}") from None


def _agents(request):
    return list(
        Agent.objects.filter(owner=org(request)).exclude(metadata__has_key=experiments.COPY_KEY).order_by("name")
    )


@login_required
def evals_page(request, error: str = "", status: int = 200):
    owner = org(request)
    ctx = {
        "datasets": datasets.datasets_list(owner=owner),
        "experiments": experiments.experiments_list(owner=owner)[:20],
        "agents": _agents(request),
        "error": error,
        "nav": "evals",
    }
    return TemplateResponse(request, "core/evals/index.html", ctx, status=status)


@login_required
@require_POST
def dataset_create(request):
    try:
        dataset = datasets.dataset_create(
            owner=org(request),
            name=request.POST.get("name", ""),
            description=request.POST.get("description", ""),
            graders=[{"name": "answer", "kind": "contains"}],
            agent_id=request.POST.get("agent_id") or None,
        )
    except DomainError as exc:
        return evals_page(request, error=exc.message, status=400)
    return redirect("eval_dataset", dataset.id)


def _experiments_ctx(dataset) -> dict:
    found = experiments.experiments_list(owner=dataset.owner, dataset=dataset)
    return {"experiments": found, "experiments_running": any(e.status in ("queued", "running") for e in found)}


@login_required
def dataset_page(request, dataset_id: str, error: str = "", status: int = 200):
    dataset = _dataset_or_404(request, dataset_id)
    agents = _agents(request)
    names = {a.id: a.name for a in agents}
    cases = datasets.cases_list(dataset=dataset)
    for case in cases:
        case.start_name = names.get((case.start or {}).get("agent_id"), "")
    ctx = {
        "dataset": dataset,
        "cases": cases,
        **_experiments_ctx(dataset),
        "target_rows": range(1, TARGET_ROWS + 1),
        "agents": agents,
        "graders_json": json.dumps(dataset.graders, indent=2),
        "gate_json": json.dumps(dataset.gate, indent=2) if dataset.gate else "",
        "error": error,
        "nav": "evals",
    }
    return TemplateResponse(request, "core/evals/dataset.html", ctx, status=status)


@login_required
def dataset_experiments(request, dataset_id: str):
    """The dataset's experiments (the list re-reads itself every second while one runs)."""
    dataset = _dataset_or_404(request, dataset_id)
    ctx = {"dataset": dataset, **_experiments_ctx(dataset)}
    return TemplateResponse(request, "core/evals/_dataset_experiments.html", ctx)


def _dataset_action(request, dataset_id: str, action) -> HttpResponse:
    """Run one write on the dataset; back to its page, or the page again with the reason (400)."""
    dataset = _dataset_or_404(request, dataset_id)
    try:
        action(dataset)
    except DomainError as exc:
        return dataset_page(request, dataset_id, error=exc.message, status=400)
    return redirect("eval_dataset", dataset.id)


def _case_from_form(data) -> dict:
    turns = [t.strip() for t in data.get("turns", "").split("\n---\n") if t.strip()]
    truth = data.get("ground_truth", "").strip() or None
    return {"turns": turns, "ground_truth": truth, "name": data.get("name", "")}


@login_required
@require_POST
def case_add(request, dataset_id: str):
    return _dataset_action(
        request, dataset_id, lambda d: datasets.cases_add(dataset=d, cases=[_case_from_form(request.POST)])
    )


@login_required
@require_POST
def case_delete(request, dataset_id: str, case_id: str):
    return _dataset_action(request, dataset_id, lambda d: datasets.case_delete(dataset=d, case_id=case_id))


def _agent(request) -> Agent:
    found = Agent.objects.filter(owner=org(request), id=request.POST.get("agent_id", "")).first()
    if found is None:
        raise Invalid("Choose an agent.")
    return found


@login_required
@require_POST
def cases_from_agent(request, dataset_id: str):
    """Add an agent's conversation as a case ("add these turns as a case"), its runs marked with feedback, or its
    tests as cases."""
    if request.POST.get("source") == "feedback":
        return _dataset_action(
            request, dataset_id, lambda d: datasets.cases_from_feedback(dataset=d, agent=_agent(request))
        )
    if request.POST.get("source") == "tests":
        return _dataset_action(
            request, dataset_id, lambda d: datasets.cases_from_agent_tests(dataset=d, agent=_agent(request))
        )
    return _dataset_action(
        request,
        dataset_id,
        lambda d: datasets.case_from_conversation(dataset=d, agent=_agent(request), run_id=request.POST.get("run_id")),
    )


@login_required
@require_POST
def cases_import(request, dataset_id: str):
    return _dataset_action(
        request, dataset_id, lambda d: datasets.cases_import_jsonl(dataset=d, text=request.POST.get("jsonl", ""))
    )


@login_required
@require_POST
def dataset_settings(request, dataset_id: str):
    def save(d):
        changes = {
            "graders": _json_field(request.POST.get("graders", ""), "The graders", []),
            "gate": _json_field(request.POST.get("gate", ""), "The gate", {}),
        }
        datasets.dataset_update(dataset=d, changes=changes)

    return _dataset_action(request, dataset_id, save)


@login_required
@require_POST
def dataset_delete(request, dataset_id: str):
    experiments.dataset_delete(dataset=_dataset_or_404(request, dataset_id))
    return redirect("evals")


@login_required
def dataset_export(request, dataset_id: str):
    text = datasets.cases_export_jsonl(dataset=_dataset_or_404(request, dataset_id))
    response = HttpResponse(text, content_type="application/jsonl")
    response["Content-Disposition"] = f'attachment; filename="{dataset_id}.jsonl"'
    return response


TARGET_ROWS = 3


def _targets_from_form(data, agent) -> list[dict]:
    """The run form's target rows (model, system prompt, name each); a row left empty after the first is skipped,
    the first left empty is the agent as it is."""
    version = data.get("agent_version", "").strip()
    columns = [data.getlist("model"), data.getlist("system"), data.getlist("name")]
    count = min(max(map(len, columns)), experiments.MAX_TARGETS)
    targets = []
    for i in range(count):
        model, system, name = (column[i] if i < len(column) else "" for column in columns)
        if i and not model.strip() and not system.strip():
            continue
        targets.append(
            {
                "agent": agent,
                "agent_version": int(version) if version.isdigit() else None,
                "model": model.strip(),
                "overrides": {"system": system} if system.strip() else {},
                "name": name.strip(),
            }
        )
    return targets or [{"agent": agent, "agent_version": int(version) if version.isdigit() else None}]


@login_required
@require_POST
def experiment_start(request, dataset_id: str):
    """Start one experiment per target row of the dataset page's form (agent and version shared; a model, system
    prompt override and name per row); one goes to its page, several to the dataset's list of experiments."""
    data = request.POST
    dataset = _dataset_or_404(request, dataset_id)
    try:
        agent = Agent.objects.filter(owner=org(request), id=data.get("agent_id", "")).first()
        started = experiments.experiments_start(
            owner=dataset.owner,
            dataset=dataset,
            targets=_targets_from_form(data, agent),
            concurrency=int(data["concurrency"]) if data.get("concurrency", "").isdigit() else 2,
        )
    except DomainError as exc:
        return dataset_page(request, dataset_id, error=exc.message, status=400)
    if len(started) == 1:
        return redirect("eval_experiment", started[0].id)
    return redirect(reverse("eval_dataset", args=[dataset.id]) + "#experiments")


@login_required
def experiment_page(request, experiment_id: str):
    """An experiment's progress, figures and results; while it runs the body polls itself (htmx) and is swapped."""
    experiment = _experiment_or_404(request, experiment_id)
    ctx = {
        "experiment": experiment,
        "results": experiments.results_with_links(experiment=experiment),
        "running": experiment.status in ("queued", "running"),
        "others": experiments.experiments_list(owner=experiment.owner, dataset=experiment.dataset),
        "nav": "evals",
    }
    template = "core/evals/_experiment_body.html" if request.htmx else "core/evals/experiment.html"
    return TemplateResponse(request, template, ctx)


@login_required
@require_POST
def experiment_cancel(request, experiment_id: str):
    experiment = _experiment_or_404(request, experiment_id)
    try:
        experiments.experiment_cancel(experiment=experiment)
    except DomainError:
        pass  # it ended meanwhile: its page shows how
    return redirect("eval_experiment", experiment.id)


@login_required
@require_POST
def experiment_delete(request, experiment_id: str):
    experiment = _experiment_or_404(request, experiment_id)
    dataset_id = experiment.dataset_id
    experiments.experiment_delete(experiment=experiment)
    return redirect("eval_dataset", dataset_id)


@login_required
def compare_page(request):
    """Experiment b against a, case by case; `only` keeps one verdict (worse: the regressions)."""
    a = _experiment_or_404(request, request.GET.get("a", ""))
    b = _experiment_or_404(request, request.GET.get("b", ""))
    only = request.GET.get("only") or None
    try:
        comparison = compare.experiments_compare(a=a, b=b, only=only)
    except DomainError as exc:
        return HttpResponse(exc.message, status=400, content_type="text/plain")
    ctx = {"a": a, "b": b, "comparison": comparison, "only": only, "verdicts": compare.VERDICTS, "nav": "evals"}
    return TemplateResponse(request, "core/evals/compare.html", ctx)


def _agent_datasets(agent: Agent) -> list:
    """The datasets a conversation of the agent can go to: those made for it (not its own tests' dataset)."""
    return list(agent.datasets.filter(owner=agent.owner, tests_of__isnull=True).order_by("-created_at"))


@login_required
@require_http_methods(["GET", "POST"])
def conversation_to_dataset(request, agent_id: str):
    """'Add to dataset' beside the conversation: the form (GET; ?close=1 empties the panel), then the user turns of
    the conversation shown (the agent's own thread, or `conversation`) as a case of a dataset of the agent or, when a
    name is typed, of a new one (POST). A refusal comes back in the form, inline, as a 422 (the form opts in to htmx
    swapping it, data-swap-refusals in static/ide/agent_tests.js, as the test editor does); nothing is stored then.
    A conversation not the agent's is a 404."""
    agent = agent_or_404(request, agent_id)
    if request.method == "GET" and request.GET.get("close"):
        return HttpResponse("")
    conversation = (request.GET.get("conversation") or request.POST.get("conversation") or "")[:64]
    if conversation and not agent.conversations.filter(id=conversation, deleted=False).exists():
        raise Http404("no such conversation")
    ctx = {
        "agent": agent,
        "datasets": _agent_datasets(agent),
        "chosen": "",
        "new_name": "",
        "error": "",
        "conversation": conversation,
    }
    if request.method == "GET":
        return TemplateResponse(request, "core/evals/_add_case.html", ctx)
    chosen = request.POST.get("dataset", "")
    new_name = request.POST.get("new_name", "").strip()[:200]
    ctx.update(chosen=chosen, new_name=new_name)
    try:
        with transaction.atomic():
            if new_name or chosen == "new":  # a name typed wins over the choice
                if not new_name:
                    raise Invalid("Name the new dataset.")
                dataset = datasets.dataset_create(
                    owner=agent.owner,
                    name=new_name,
                    graders=[{"name": "answer", "kind": "contains"}],
                    agent_id=agent.id,
                )
            else:
                dataset = next((d for d in ctx["datasets"] if d.id == chosen), None)
                if dataset is None:
                    raise Invalid("Choose a dataset, or name a new one.")
            case = datasets.case_from_conversation(dataset=dataset, agent=agent, conversation_id=conversation or None)
    except DomainError as exc:
        ctx["error"] = exc.message
        return TemplateResponse(request, "core/evals/_add_case.html", ctx, status=422)
    return TemplateResponse(request, "core/evals/_case_added.html", {"agent": agent, "dataset": dataset, "case": case})


urlpatterns = [
    path("", evals_page, name="evals"),
    path("new/", dataset_create, name="eval_dataset_create"),
    path("compare/", compare_page, name="eval_compare"),
    path("agents/<str:agent_id>/add-case/", conversation_to_dataset, name="eval_conversation_to_dataset"),
    path("datasets/<str:dataset_id>/", dataset_page, name="eval_dataset"),
    path("datasets/<str:dataset_id>/cases/", case_add, name="eval_case_add"),
    path("datasets/<str:dataset_id>/cases/<str:case_id>/delete/", case_delete, name="eval_case_delete"),
    path("datasets/<str:dataset_id>/from-agent/", cases_from_agent, name="eval_cases_from_agent"),
    path("datasets/<str:dataset_id>/import/", cases_import, name="eval_cases_import"),
    path("datasets/<str:dataset_id>/export/", dataset_export, name="eval_dataset_export"),
    path("datasets/<str:dataset_id>/settings/", dataset_settings, name="eval_dataset_settings"),
    path("datasets/<str:dataset_id>/delete/", dataset_delete, name="eval_dataset_delete"),
    path("datasets/<str:dataset_id>/run/", experiment_start, name="eval_experiment_start"),
    path("datasets/<str:dataset_id>/experiments/", dataset_experiments, name="eval_dataset_experiments"),
    path("experiments/<str:experiment_id>/", experiment_page, name="eval_experiment"),
    path("experiments/<str:experiment_id>/cancel/", experiment_cancel, name="eval_experiment_cancel"),
    path("experiments/<str:experiment_id>/delete/", experiment_delete, name="eval_experiment_delete"),
]
