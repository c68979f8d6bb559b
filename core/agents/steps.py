"""An owner's steps as Letta lists them (`GET /v1/steps/`), and the Letta `Step` shape: our step record (the exact
request, the raw response, timings) plus Letta's fields; a person's feedback on a step (Letta's
`PATCH /v1/steps/{id}/feedback`), its metrics and provider trace (letta/schemas/step_metrics.py, provider_trace.py)."""

from django.db.models import Q

from core.agents.presenters import step_out
from core.errors import Invalid
from core.models import Message, Organization, Step
from core.pagination import queryset_page
from core.selectors import agent_tags
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
    if feedback:
        qs = qs.filter(feedback=feedback)
    elif has_feedback is not None:
        qs = qs.exclude(feedback="") if has_feedback else qs.filter(feedback="")
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
        "tags": step.tags or [],
        "tid": None,
        "trace_id": None,
        "request_id": None,
        "messages": [],
        "feedback": step.feedback or None,
        "feedback_comment": step.feedback_comment or None,
        "project_id": None,
        "error_type": "llm_error" if step.error else None,
        "error_data": {"message": step.error} if step.error else None,
        "status": "failed" if step.error else "success",
    }


FEEDBACK = ("positive", "negative")
COMMENT_MAX = 10_000


def step_feedback_set(
    *, step: Step, feedback: str | None, tags: list[str] | None = None, comment: str | None = None
) -> Step:
    """Set (or, with None, clear) a person's feedback on the step, as Letta's step_manager.add_feedback_async: tags
    replace the step's when given and not empty; `comment` (ours) replaces the comment when given."""
    if feedback not in (None, *FEEDBACK):
        raise Invalid("feedback must be 'positive', 'negative' or null.")
    if comment is not None and len(comment) > COMMENT_MAX:
        raise Invalid(f"comment is longer than {COMMENT_MAX} characters.")
    step.feedback = feedback or ""
    fields = ["feedback"]
    if tags:
        step.tags, fields = list(dict.fromkeys(tags)), [*fields, "tags"]
    if comment is not None:
        step.feedback_comment, fields = comment, [*fields, "feedback_comment"]
    step.save(update_fields=fields)
    return step


def _ns(ms: float | None) -> int | None:
    return round(ms * 1_000_000) if ms else None


def step_metrics(step: Step) -> dict:
    """Letta's StepMetrics of the step: its timings in nanoseconds. The step's record is written when the step
    ends, so its start is that time less the step's duration."""
    step_ns = _ns(step.total_ms)
    end_ns = round(step.created_at.timestamp() * 1_000_000_000)
    return {
        "id": step.id,
        "organization_id": step.owner_id,
        "provider_id": None,
        "run_id": step.run_id,
        "agent_id": step.agent_id,
        "step_start_ns": end_ns - (step_ns or 0),
        "llm_request_start_ns": None,
        "llm_request_ns": _ns(step.model_ms),
        "tool_execution_ns": _ns(step.tools_ms),
        "step_ns": step_ns,
        "base_template_id": None,
        "template_id": None,
        "project_id": None,
    }


def step_provider_trace(step: Step) -> dict:
    """Letta's ProviderTrace of the step: the exact request sent to the model and its raw response."""
    return {
        "id": f"provider_trace-{step.id.removeprefix('step-')}",
        "request_json": step.request or {},
        "response_json": step.response or {},
        "step_id": step.id,
        "agent_id": step.agent_id,
        "agent_tags": agent_tags(step.agent),
        "call_type": "summarization" if step.kind == "summarizer" else "agent_step",
        "run_id": step.run_id,
        "source": "agents-ide",
        "org_id": step.owner_id,
        "user_id": None,
        "compaction_settings": None,
        "llm_config": {"model": (step.model or "").rpartition("/")[2], "handle": step.model or None},
        "created_at": step.created_at,
    }


def step_messages_page(
    *, step: Step, after: str | None = None, before: str | None = None, limit: int | None = 100, order: str = "asc"
) -> list[Message]:
    """One page of the messages the step stored, by seq (cursors are message ids of the step)."""
    scope = Message.objects.filter(step=step)
    return queryset_page(scope, after=after, before=before, limit=limit, order=order, field="seq", scope=scope)
