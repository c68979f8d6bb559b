"""REST endpoints for an agent's messages (send: at once, streamed or queued; list, cancel, reset) and its context
window (Letta v1 paths). Thin: parse, call, present."""

from typing import Literal

from django.http import HttpResponse, StreamingHttpResponse
from ninja import Field, Query, Router, Schema
from pydantic import model_validator

from core.agents import history, presenters, recall
from core.agents.context import CONTEXT_COLUMNS, agent_with_counts, context_overview_json
from core.agents.messages import message_to_letta, messages_to_letta, stop_reason_message, usage_statistics
from core.api.common import SSE_ALSO, SSE_ONLY, PageQuery, clamped, owner, sse_submitted
from core.api.schemas import AgentStateOut, ContextWindowOut, LettaMessageOut, LettaResponseOut, RunOut
from core.runs import executor, runner
from core.runs.request import RunRequest
from core.selectors import agent_get

router = Router(tags=["messages"])


class MessageIn(Schema):
    """A message (`type` message, the default), or an answer to a run that waits: Letta's ApprovalCreate (`type`
    approval: `approvals`, or the deprecated `approve`/`approval_request_id`/`reason`) or ToolReturnCreate (`type`
    tool_return: `tool_returns`). An approval item may carry `arguments`: the call runs with them instead."""

    type: Literal["message", "approval", "tool_return"] | None = None
    role: Literal["user", "system"] = "user"
    content: str | list[dict] = ""
    otid: str | None = Field(None, max_length=100)  # the client's offline id, stored and listed back
    approvals: list[dict] | None = None
    approve: bool | None = None
    approval_request_id: str | None = None
    reason: str | None = None
    tool_returns: list[dict] | None = None
    group_id: str | None = None


class ClientTool(Schema):
    """A tool the client runs itself (Letta's ClientToolSchema); a call to it waits for the client's result."""

    name: str = Field(min_length=1, max_length=200)
    description: str | None = None
    parameters: dict | None = None


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
    client_tools: list[ClientTool] | None = None

    @model_validator(mode="after")
    def _one_input(self):
        # Letta's LettaRequest refuses both at once (422) rather than silently dropping one.
        if self.messages and self.input:
            raise ValueError("Send either 'messages' or 'input', not both.")
        return self


def client_tools(body: LettaRequest) -> list[dict] | None:
    return [t.dict() for t in body.client_tools] if body.client_tools else None


def request_config(body: LettaRequest) -> dict:
    """Letta's LettaRequestConfig.from_letta_request (letta/schemas/job.py): kept on the run, whose message list
    honours its include_return_message_types."""
    return {
        "use_assistant_message": body.use_assistant_message,
        "assistant_message_tool_name": "send_message",
        "assistant_message_tool_kwarg": "message",
        "include_return_message_types": body.include_return_message_types,
    }


def inputs_of(body: LettaRequest) -> list[dict]:
    if body.messages:
        return [m.dict(exclude_none=True) for m in body.messages]
    return [{"role": "user", "content": body.input}] if body.input else []


def run_request(owner, agent_id: str, body: LettaRequest, inputs: list[dict], **more) -> RunRequest:
    """The one request a send becomes (the claim resolves its model onto it); `more` sets other fields (a thread's
    conversation_id; the streaming options for a send whose caller does not stream)."""
    fields = {
        "max_steps": body.max_steps,
        "stream_tokens": body.stream_tokens,
        "background": body.background,  # its stream is recorded, so a caller whose connection broke can resume it
        "client_tools": client_tools(body),
        "request_config": request_config(body),
    }
    return RunRequest(owner=owner, agent_id=agent_id, input_messages=inputs, **(fields | more))


def _submit(request, agent_id: str, body: LettaRequest, *, call: bool = False):
    """Start the run (`call`: execute it here and return it ended; `background` applies to streams only). 404 for
    another owner's agent, 400 for bad input or a model no provider serves (with a how-to), 409 when the agent is
    busy; nothing is claimed then."""
    if call:
        return executor.run_call(
            run_request(owner(request), agent_id, body, inputs_of(body), stream_tokens=False, background=False)
        )
    return executor.run_submit(run_request(owner(request), agent_id, body, inputs_of(body)))


def sse_of(agent_id: str, submit, body: LettaRequest) -> StreamingHttpResponse:
    """The run `submit()` starts as SSE, with the options its body asked for (followed from before it starts)."""
    return sse_submitted(
        agent_id,
        submit,
        types=body.include_return_message_types,
        include_pings=body.include_pings,
        stream_tokens=body.stream_tokens,
        use_assistant_message=body.use_assistant_message,
    )


def send_answer(run, body: LettaRequest) -> dict:
    """The LettaResponse of an ended run, for an agent's or a conversation's send: its reply's messages (only the
    types the body asked for), stop reason, usage, id and error (letta/schemas/letta_response.py)."""
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


@router.post("/agents/{agent_id}/messages", response=LettaResponseOut, openapi_extra=SSE_ALSO, exclude_unset=True)
def messages_send(request, agent_id: str, body: LettaRequest):
    """Run the agent and answer when the run ends (or stream it as SSE with `streaming: true`)."""
    if body.streaming:
        return sse_of(agent_id, lambda: _submit(request, agent_id, body), body)
    run = _submit(request, agent_id, body, call=True)
    return send_answer(run, body)


@router.post("/agents/{agent_id}/messages/stream", response={200: None}, openapi_extra=SSE_ONLY)
def messages_stream(request, agent_id: str, body: LettaRequest):
    return sse_of(agent_id, lambda: _submit(request, agent_id, body), body)


THREAD = Field(
    None, description="Only one thread: `default` (the agent's own, outside any conversation) or a `conv-…` id."
)


class MessageListQuery(PageQuery):
    """Letta's parameters; group_id, include_err, assistant_message_tool_name and assistant_message_tool_kwarg are
    accepted and ignored (send_message/message)."""

    limit: int = 100
    conversation_id: str | None = THREAD
    use_assistant_message: bool = True
    include_return_message_types: list[str] | None = None


@router.get("/agents/{agent_id}/messages", response=list[LettaMessageOut], exclude_unset=True)
def messages_list(request, agent_id: str, q: Query[MessageListQuery]):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    page = {"before": q.before, "after": q.after, "limit": q.limit, "ascending": q.order == "asc"}
    if q.conversation_id:
        rows = recall.thread_messages_list(
            agent=agent, conversation_id=q.conversation_id, hide_assistant_returns=q.use_assistant_message, **page
        )
    else:
        rows = history.agent_messages_list(agent=agent, hide_assistant_returns=q.use_assistant_message, **page)
    return messages_to_letta(
        rows,
        use_assistant_message=q.use_assistant_message,
        types=q.include_return_message_types,
        agent_type=agent.agent_type,
    )


class CancelIn(Schema):
    run_ids: list[str] | None = None


class AllMessagesQuery(PageQuery):
    before: str | None = Field(None, description="A message id: only older messages.")
    after: str | None = Field(None, description="A message id: only newer messages.")
    limit: int = Field(100, description=clamped(1000))
    conversation_id: str | None = THREAD
    include_return_message_types: list[str] | None = None


@router.get("/messages/", response=list[LettaMessageOut], exclude_unset=True)
def messages_list_all(request, q: Query[AllMessagesQuery]):
    """The caller's messages across all its agents; a newest-first page comes back oldest first, as in Letta."""
    rows = recall.messages_list(
        owner=owner(request),
        before=q.before,
        after=q.after,
        limit=q.limit,
        ascending=q.order == "asc",
        conversation_id=q.conversation_id,
    )
    parts = [part for row in rows for part in message_to_letta(row, agent_type=row.agent_type)]
    types = q.include_return_message_types
    return [p for p in parts if p["message_type"] in types] if types else parts


@router.get("/messages/{message_id}", response=list[LettaMessageOut], exclude_unset=True)
def message_retrieve(request, message_id: str):
    """The Letta messages one stored message becomes, last part first (Letta's `to_letta_messages` order)."""
    row = recall.message_get(owner=owner(request), message_id=message_id)
    return message_to_letta(row, agent_type=row.agent_type)[::-1]


@router.post("/agents/{agent_id}/messages/cancel", response=dict[str, str])
def messages_cancel(request, agent_id: str, body: CancelIn | None = None):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    ids = runner.run_cancel(owner=agent.owner, agent_id=agent.id, run_ids=body.run_ids if body else None)
    return dict.fromkeys(ids, "cancellation requested")


@router.patch("/agents/{agent_id}/reset-messages", response=AgentStateOut)
def messages_reset(request, agent_id: str):
    agent = history.agent_messages_reset(agent=agent_get(owner=owner(request), agent_id=agent_id))
    return presenters.agent_state(agent)


@router.get("/agents/{agent_id}/context", response=ContextWindowOut)
def context(request, agent_id: str):
    """The overview's JSON, encoded once for each compiled context (`context_overview_json`), answered as it is:
    the schema documents it, and tests/core/test_context_memo.py checks it against the schema."""
    agent = agent_with_counts(owner=owner(request), agent_id=agent_id, columns=CONTEXT_COLUMNS)
    return HttpResponse(context_overview_json(agent=agent), content_type="application/json")


class LettaAsyncRequest(LettaRequest):
    """Letta's LettaAsyncRequest: a send, and where to POST the run's end (core/runs/callbacks.py)."""

    callback_url: str | None = Field(
        None, max_length=2000, pattern=r"^https?://", description="An http(s) URL the run's end is POSTed to."
    )


@router.post("/agents/{agent_id}/messages/async", response=RunOut)
def messages_send_async(request, agent_id: str, body: LettaAsyncRequest):
    """Queue a run and return it at once (status created); 409 if the agent is busy."""
    # A plain view: every request has a thread of its own (agents_ide.http), so concurrent sends do not queue
    # behind each other's database waits.
    config = request_config(body) | ({"callback_url": body.callback_url} if body.callback_url else {})
    run = executor.run_submit(
        run_request(
            owner(request), agent_id, body, inputs_of(body), background=True, stream_tokens=False, request_config=config
        )
    )
    return presenters.run_out(run)
