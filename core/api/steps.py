"""REST endpoints for steps (Letta's `/v1/steps`): the owner's steps across runs, and one step, in Letta's `Step`
shape over our step record. Thin: parse, call, present."""

from typing import Any, Literal

from ninja import Field, Query, Router

from core.agents import history
from core.agents.steps import step_letta, steps_list
from core.api.common import PageQuery, clamped, owner
from core.api.schemas import StepOut

router = Router(tags=["steps"])


class LettaStepOut(StepOut):
    """Letta's Step: our record's fields (the exact request, the raw response, timings) and Letta's own."""

    origin: str | None
    organization_id: str
    provider_id: str | None
    provider_name: str | None
    provider_category: str | None
    model_handle: str | None
    model_endpoint: str | None
    context_window_limit: int | None
    cached_input_tokens: int | None
    cache_write_tokens: int | None
    reasoning_tokens: int | None
    completion_tokens_details: dict[str, Any] | None
    prompt_tokens_details: dict[str, Any] | None
    tags: list[str]
    tid: str | None
    trace_id: str | None
    request_id: str | None
    messages: list[dict[str, Any]]
    feedback: Literal["positive", "negative"] | None
    feedback_comment: str | None = Field(None, description="The comment given with the feedback (ours).")
    project_id: str | None
    error_type: str | None
    error_data: dict[str, Any] | None
    status: Literal["pending", "success", "failed", "cancelled"]


class StepListQuery(PageQuery):
    """Letta's filters; `order` and `order_by` are accepted and, as in Letta, steps always list newest first;
    trace_ids, tags and project_id are accepted and ignored."""

    limit: int = Field(50, description=clamped(1000))
    start_date: str | None = None
    end_date: str | None = None
    model: str | None = None
    agent_id: str | None = None
    trace_ids: list[str] | None = None
    feedback: Literal["positive", "negative"] | None = None
    has_feedback: bool | None = None
    tags: list[str] | None = None
    project_id: str | None = None


@router.get("/steps/", response=list[LettaStepOut])
def steps_list_all(request, q: Query[StepListQuery]):
    steps = steps_list(
        owner=owner(request),
        agent_id=q.agent_id,
        model=q.model,
        start_date=q.start_date,
        end_date=q.end_date,
        has_feedback=q.has_feedback,
        feedback=q.feedback,
        after=q.after,
        before=q.before,
        limit=q.limit,
    )
    return [step_letta(s) for s in steps]


@router.get("/steps/{step_id}", response=LettaStepOut)
def step_retrieve(request, step_id: str):
    return step_letta(history.step_get(owner=owner(request), step_id=step_id))
