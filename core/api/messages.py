"""REST endpoints for messages, runs, steps and the context window (Letta v1 paths). Thin: parse, call, present."""

from typing import Literal

from django.http import StreamingHttpResponse
from ninja import Field, Query, Router, Schema
from pydantic import model_validator

from core.agents import history, presenters
from core.agents.context import context_overview
from core.agents.messages import messages_to_letta, stop_reason_message, usage_statistics
from core.api.agents import owner
from core.api.schemas import AgentStateOut, ContextWindowOut, LettaMessageOut, LettaResponseOut, RunOut, StepOut
from core.providers import model_resolve
from core.runs import executor, runner
from core.runs.streaming import sse_events
from core.selectors import agent_get

router = Router(tags=["messages"])

_SSE = {
    "text/event-stream": {
        "schema": {
            "type": "string",
            "description": "Server-sent events: each `data:` line holds one Letta message as JSON (then "
            "`stop_reason` and `usage_statistics`; `ping` while waiting), the last is `data: [DONE]`.",
        }
    }
}
SSE_ALSO = {"responses": {200: {"content": _SSE}}}  # with `streaming: true`
SSE_ONLY = {"responses": {200: {"description": "The run as it happens.", "content": _SSE}}}


class MessageIn(Schema):
    role: Literal["user", "system"] = "user"
    content: str | list[dict] = ""
    otid: str | None = Field(None, max_length=100)  # the client's offline id, stored and listed back


class LettaRequest(Schema):
    messages: list[MessageIn] | None = None
    input: str | list[dict] | None = None
    max_steps: int | None = Field(None, ge=1, le=1000)
    use_assistant_message: bool = True
    streaming: bool = False
    stream_tokens: bool = False
    include_pings: bool = True
    include_return_message_types: list[str] | None = None
    background: bool = False

    @model_validator(mode="after")
    def _one_input(self):
        # Letta's LettaRequest refuses both at once (422) rather than silently dropping one.
        if self.messages and self.input:
            raise ValueError("Send either 'messages' or 'input', not both.")
        return self


def _inputs(body: LettaRequest) -> list[dict]:
    if body.messages:
        return [m.dict(exclude_none=True) for m in body.messages]
    return [{"role": "user", "content": body.input}] if body.input else []


def _submit(request, agent_id: str, body: LettaRequest, *, call: bool = False):
    """Start the run (`call`: execute it here and return it ended)."""
    org = owner(request)
    agent = agent_get(owner=org, agent_id=agent_id)
    inputs = runner.input_normalize(_inputs(body))
    resolved = model_resolve(owner=org, handle=agent.model)  # 400 with a how-to when no provider serves it
    if call:
        return executor.run_call(
            owner=org, agent_id=agent.id, input_messages=inputs, max_steps=body.max_steps, resolved=resolved
        )
    return executor.run_submit(
        owner=org, agent_id=agent.id, input_messages=inputs, max_steps=body.max_steps, stream_tokens=body.stream_tokens
    )


def _stream(request, run, body: LettaRequest) -> StreamingHttpResponse:
    response = StreamingHttpResponse(
        sse_events(
            run=run,
            types=body.include_return_message_types,
            include_pings=body.include_pings,
            stream_tokens=body.stream_tokens,
        ),
        content_type="text/event-stream",
    )
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


@router.post("/agents/{agent_id}/messages", response=LettaResponseOut, openapi_extra=SSE_ALSO, exclude_unset=True)
def messages_send(request, agent_id: str, body: LettaRequest):
    """Run the agent and answer when the run ends (or stream it as SSE with `streaming: true`)."""
    if body.streaming:
        return _stream(request, _submit(request, agent_id, body), body)
    run = _submit(request, agent_id, body, call=True)
    messages = executor.run_reply(run=run, use_assistant_message=body.use_assistant_message)
    if body.include_return_message_types:
        messages = [m for m in messages if m["message_type"] in body.include_return_message_types]
    return {
        "messages": messages,
        "stop_reason": stop_reason_message(run.stop_reason),
        "usage": usage_statistics({**(run.usage or {}), "run_ids": [run.id]}),
        "run_id": run.id,
        "error": run.error or None,
    }


@router.post("/agents/{agent_id}/messages/stream", response={200: None}, openapi_extra=SSE_ONLY)
def messages_stream(request, agent_id: str, body: LettaRequest):
    return _stream(request, _submit(request, agent_id, body), body)


class MessageListQuery(Schema):
    """Letta's parameters; group_id, conversation_id, include_err, assistant_message_tool_name and
    assistant_message_tool_kwarg are accepted and ignored (one conversation per agent; send_message/message)."""

    before: str | None = None
    after: str | None = None
    limit: int = 100
    order: Literal["asc", "desc"] = "desc"
    order_by: Literal["created_at"] = "created_at"
    use_assistant_message: bool = True
    include_return_message_types: list[str] | None = None


@router.get("/agents/{agent_id}/messages", response=list[LettaMessageOut], exclude_unset=True)
def messages_list(request, agent_id: str, q: Query[MessageListQuery]):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    rows = history.agent_messages_list(
        agent=agent,
        before=q.before,
        after=q.after,
        limit=q.limit,
        ascending=q.order == "asc",
        hide_assistant_returns=q.use_assistant_message,
    )
    return messages_to_letta(
        rows,
        use_assistant_message=q.use_assistant_message,
        types=q.include_return_message_types,
        agent_type=agent.agent_type,
    )


class CancelIn(Schema):
    run_ids: list[str] | None = None


@router.post("/agents/{agent_id}/messages/cancel", response=dict[str, str])
def messages_cancel(request, agent_id: str, body: CancelIn | None = None):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    ids = runner.run_cancel(owner=agent.owner, agent_id=agent.id, run_ids=body.run_ids if body else None)
    return dict.fromkeys(ids, "cancellation requested")


@router.patch("/agents/{agent_id}/reset-messages", response=AgentStateOut)
def messages_reset(request, agent_id: str):
    agent = history.agent_messages_reset(agent=agent_get(owner=owner(request), agent_id=agent_id))
    return presenters.agent_state(agent)


@router.get("/agents/{agent_id}/context", response=ContextWindowOut, exclude_unset=True)
def context(request, agent_id: str):
    return context_overview(agent=agent_get(owner=owner(request), agent_id=agent_id))


def run_out(run) -> dict:
    return {
        "id": run.id,
        "agent_id": run.agent_id,
        "status": run.status,
        "stop_reason": run.stop_reason or None,
        "background": run.background,
        "created_at": run.created_at,
        "completed_at": run.completed_at,
        "usage": run.usage,
        "error": run.error or None,
        "cancel_requested": run.cancel_requested,
        "max_steps": run.max_steps,
        "input_messages": run.input_messages,
    }


def step_out(step) -> dict:
    return {
        "id": step.id,
        "run_id": step.run_id,
        "agent_id": step.agent_id,
        "index": step.index,
        "kind": step.kind,
        "model": step.model,
        "request": step.request,
        "response": step.response,
        "context_sections": step.context_sections,
        "tokenizer": step.tokenizer,
        "usage": step.usage,
        "prompt_tokens": step.usage.get("prompt_tokens"),
        "completion_tokens": step.usage.get("completion_tokens"),
        "total_tokens": step.usage.get("total_tokens"),
        "model_ms": step.model_ms,
        "tools_ms": step.tools_ms,
        "total_ms": step.total_ms,
        "stop_reason": step.stop_reason or None,
        "error": step.error or None,
        "created_at": step.created_at,
    }


class RunListQuery(Schema):
    agent_id: str | None = None
    agent_ids: list[str] | None = None
    active: bool = False
    statuses: list[str] | None = None
    background: bool | None = None
    stop_reason: str | None = None
    after: str | None = None
    before: str | None = None
    limit: int = Field(50, description="Page size; values outside 1..1000 are clamped to it.")
    order: Literal["asc", "desc"] = "desc"
    order_by: Literal["created_at"] = "created_at"
    ascending: bool | None = Field(None, description="Deprecated by Letta in favour of order.")


class PageQuery(Schema):
    after: str | None = None
    before: str | None = None
    limit: int | None = Field(None, description="Page size (all rows when absent); clamped to 1..10000.")
    order: Literal["asc", "desc"] = "asc"
    order_by: Literal["created_at"] = "created_at"


@router.get("/runs/", response=list[RunOut], tags=["runs"])
def runs_list(request, q: Query[RunListQuery]):
    order = q.order if q.ascending is None else ("asc" if q.ascending else "desc")
    agent_ids = [*(q.agent_ids or []), *([q.agent_id] if q.agent_id else [])]
    runs = history.runs_list(
        owner=owner(request),
        agent_ids=agent_ids,
        active=q.active,
        statuses=q.statuses,
        background=q.background,
        stop_reason=q.stop_reason,
        after=q.after,
        before=q.before,
        limit=q.limit,
        order=order,
    )
    return [run_out(r) for r in runs]


@router.get("/runs/{run_id}", response=RunOut, tags=["runs"])
def run_retrieve(request, run_id: str):
    return run_out(history.run_get(owner=owner(request), run_id=run_id))


@router.get("/runs/{run_id}/messages", response=list[LettaMessageOut], tags=["runs"], exclude_unset=True)
def run_messages(request, run_id: str, q: Query[PageQuery]):
    run = history.run_get(owner=owner(request), run_id=run_id)
    rows = history.run_messages(
        run=run, after=q.after, before=q.before, limit=q.limit, order=q.order, hide_assistant_returns=True
    )
    return messages_to_letta(rows, agent_type=run.agent.agent_type)


@router.get("/runs/{run_id}/steps", response=list[StepOut], tags=["runs"])
def run_steps(request, run_id: str, q: Query[PageQuery]):
    run = history.run_get(owner=owner(request), run_id=run_id)
    return [
        step_out(s) for s in history.run_steps(run=run, after=q.after, before=q.before, limit=q.limit, order=q.order)
    ]


@router.get("/steps/{step_id}", response=StepOut, tags=["runs"])
def step_retrieve(request, step_id: str):
    return step_out(history.step_get(owner=owner(request), step_id=step_id))
