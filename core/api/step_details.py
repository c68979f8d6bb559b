"""REST endpoints for what Letta's SDK reads of one step or run beyond its record (letta/server/rest_api/routers/v1/
steps.py, runs.py): a step's feedback (`PATCH /v1/steps/{id}/feedback`), metrics, provider trace and messages, and a
run's trace. Thin: parse, call, present."""

from datetime import datetime
from typing import Any, Literal

from ninja import Field, Query, Router, Schema

from core.agents import history
from core.agents.messages import messages_to_letta
from core.agents.steps import (
    COMMENT_MAX,
    step_feedback_set,
    step_letta,
    step_messages_page,
    step_metrics,
    step_provider_trace,
)
from core.agents.traces import run_trace
from core.api.common import PageQuery, clamped, owner
from core.api.schemas import LettaMessageOut
from core.api.steps import LettaStepOut

router = Router(tags=["steps"])


class FeedbackIn(Schema):
    """Letta's ModifyFeedbackRequest, plus a free-text `comment` (ours)."""

    feedback: Literal["positive", "negative"] | None = Field(None, description="null clears it.")
    tags: list[str] | None = Field(None, description="Replace the step's tags (when given and not empty).")
    comment: str | None = Field(None, max_length=COMMENT_MAX, description="Why (replaces the comment when given).")


class StepMetricsOut(Schema):
    """Letta's StepMetrics (letta/schemas/step_metrics.py): the step's timings in nanoseconds."""

    id: str
    organization_id: str | None
    provider_id: str | None
    run_id: str | None
    agent_id: str | None
    step_start_ns: int | None
    llm_request_start_ns: int | None
    llm_request_ns: int | None
    tool_execution_ns: int | None
    step_ns: int | None
    base_template_id: str | None
    template_id: str | None
    project_id: str | None


class ProviderTraceOut(Schema):
    """Letta's ProviderTrace (letta/schemas/provider_trace.py): the request sent to the model and its raw answer."""

    id: str
    request_json: dict[str, Any]
    response_json: dict[str, Any]
    step_id: str | None
    agent_id: str | None
    agent_tags: list[str] | None
    call_type: str | None
    run_id: str | None
    source: str | None
    org_id: str | None
    user_id: str | None
    compaction_settings: dict[str, Any] | None
    llm_config: dict[str, Any] | None
    created_at: datetime


class StepMessagesQuery(PageQuery):
    limit: int | None = Field(100, description=clamped(1000))
    order: Literal["asc", "desc"] = "asc"


@router.patch("/steps/{step_id}/feedback", response=LettaStepOut)
def step_feedback(request, step_id: str, body: FeedbackIn):
    """Set or clear a person's feedback on the step (stored on it)."""
    step = history.step_get(owner=owner(request), step_id=step_id)
    return step_letta(step_feedback_set(step=step, feedback=body.feedback, tags=body.tags, comment=body.comment))


@router.get("/steps/{step_id}/metrics", response=StepMetricsOut)
def step_metrics_retrieve(request, step_id: str):
    return step_metrics(history.step_get(owner=owner(request), step_id=step_id))


@router.get("/steps/{step_id}/trace", response=ProviderTraceOut | None)
def step_trace_retrieve(request, step_id: str):
    return step_provider_trace(history.step_get(owner=owner(request), step_id=step_id))


@router.get("/steps/{step_id}/messages", response=list[LettaMessageOut], exclude_unset=True)
def step_messages_list(request, step_id: str, q: Query[StepMessagesQuery]):
    """The messages the step stored (its model's reply and its tools' returns), oldest first by default."""
    step = history.step_get(owner=owner(request), step_id=step_id)
    rows = step_messages_page(step=step, after=q.after, before=q.before, limit=q.limit, order=q.order)
    return messages_to_letta(rows, agent_type=step.agent.agent_type, reverse=q.order == "desc")


class SpanOut(Schema):
    """One span as a row of ClickHouse's otel_traces table, which Letta's route answers with."""

    Timestamp: datetime
    TraceId: str
    SpanId: str
    ParentSpanId: str
    TraceState: str
    SpanName: str
    SpanKind: str
    ServiceName: str
    ScopeName: str
    SpanAttributes: dict[str, str]
    Duration: int = Field(description="Nanoseconds.")
    StatusCode: Literal["Ok", "Error"]
    StatusMessage: str


class RunTraceQuery(Schema):
    limit: int = Field(1000, ge=1, le=5000, description="The most spans to return.")


@router.get("/runs/{run_id}/trace", response=list[SpanOut], tags=["runs"])
def run_trace_retrieve(request, run_id: str, q: Query[RunTraceQuery]):
    """The run's spans (the run, its steps, their tool executions) in Letta's otel_traces row shape."""
    return run_trace(run=history.run_get(owner=owner(request), run_id=run_id), limit=q.limit)
