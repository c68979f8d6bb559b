"""An owner's steps as Letta lists them (`GET /v1/steps/`), and the Letta `Step` shape: our step record (the exact
request, the raw response, timings) plus Letta's fields. Feedback is not kept here: a filter on it matches nothing."""

from django.db.models import Q

from core.agents.presenters import step_out
from core.models import Organization, Step
from core.pagination import queryset_page
from memory.selectors import parse_time_bound


def steps_list(
    *,
    owner: Organization,
    agent_id: str | None = None,
    model: str | None = None,
    start_date: str | None = None,
    end_date: str | None = None,
    has_feedback: bool | None = None,
    feedback: str | None = None,
    after: str | None = None,
    before: str | None = None,
    limit: int = 50,
) -> list[Step]:
    """One page of the owner's steps, always newest first (Letta's route turns `order` into a boolean its manager
    then compares with "asc", so every order lists newest first); cursors are step ids (NotFound for another's)."""
    scope = Step.objects.filter(owner=owner)
    qs = scope
    if agent_id:
        qs = qs.filter(agent_id=agent_id)
    if model:  # a bare model name or `provider/model`, as steps store the model they called
        qs = qs.filter(Q(model=model) | Q(model__endswith=f"/{model}"))
    start, end = parse_time_bound(start_date), parse_time_bound(end_date, end=True)
    if start:
        qs = qs.filter(created_at__gte=start)
    if end:
        qs = qs.filter(created_at__lte=end)
    if feedback or has_feedback:
        qs = qs.none()
    return queryset_page(qs.defer("state"), after=after, before=before, limit=limit, order="desc", scope=scope)


def step_letta(step: Step) -> dict:
    """Letta's `Step` (`letta/schemas/step.py`) over our step record's fields."""
    usage = step.usage or {}
    provider = (step.model or "").rpartition("/")[0]
    return {
        **step_out(step),
        "origin": None,
        "organization_id": step.owner_id,
        "provider_id": None,
        "provider_name": provider or None,
        "provider_category": None,
        "model_handle": step.model or None,
        "model_endpoint": None,
        "context_window_limit": None,
        "cached_input_tokens": usage.get("cached_tokens"),
        "cache_write_tokens": None,
        "reasoning_tokens": usage.get("reasoning_tokens"),
        "completion_tokens_details": None,
        "prompt_tokens_details": None,
        "tags": [],
        "tid": None,
        "trace_id": None,
        "request_id": None,
        "messages": [],
        "feedback": None,
        "project_id": None,
        "error_type": "llm_error" if step.error else None,
        "error_data": {"message": step.error} if step.error else None,
        "status": "failed" if step.error else "success",
    }
