"""OpenAI-compatible chat completions (Letta's `POST /v1/chat/completions`, letta/server/rest_api/routers/v1/
chat_completions.py): `model` names an agent, the last user message is sent to it through the one send path, and its
reply comes back as an OpenAI `chat.completion`, or with `stream: true` as `chat.completion.chunk` events ending
`data: [DONE]` (Letta's OpenAIChatCompletionsStreamTransformer, letta/services/streaming_service.py). Only the
agent's assistant messages are shown; its reasoning and tool calls stay inside. Errors on this route answer in
OpenAI's shape (`{"error": {...}}`, agents_ide/api.py), so OpenAI clients read them."""

import json
import time
from typing import Literal

from django.http import JsonResponse, StreamingHttpResponse
from ninja import Field, Router, Schema

from core.api.common import followed_submit, owner
from core.api.messages import LettaRequest, MessageIn, inputs_of, run_request
from core.errors import DomainError
from core.models import RunStatus
from core.runs import executor
from core.runs.streaming import caller_events
from core.selectors import agent_get
from core.sse import event_stream

router = Router(tags=["chat"])

PATH_PREFIX = "/v1/chat/"
_ERROR_TYPES = {401: "authentication_error", 403: "permission_error", 404: "invalid_request_error"}
_ERROR_CODES = {401: "invalid_api_key", 404: "model_not_found", 409: "agent_busy", 413: "request_too_large"}
_FINISH = {"max_steps": "length"}  # every other end of a run is a "stop", as Letta's transformer says


class OpenAIErrorDetail(Schema):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class OpenAIErrorOut(Schema):
    """OpenAI's error body, which every error on these routes answers with (declared in agents_ide/openapi.py)."""

    error: OpenAIErrorDetail


def openai_error(message: str, status: int, *, param: str | None = None) -> dict:
    """OpenAI's error body (what its SDKs read into `err.message`, `.type`, `.code`, `.param`)."""
    kind = _ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "server_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": _ERROR_CODES.get(status)}}


class ChatMessage(Schema):
    """One message of OpenAI's `messages`; only the last `user` one is sent (the agent keeps the rest itself)."""

    role: str
    content: str | list[dict] | None = None


class StreamOptions(Schema):
    include_usage: bool = False


class ChatCompletionIn(Schema):
    """OpenAI's request (Letta's ChatCompletionRequest); the sampling fields are accepted and ignored: the agent's
    own model settings apply."""

    model: str = Field(description="The agent's id (`agent-…`).")
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    n: int | None = Field(1, ge=1)
    stop: str | list[str] | None = None
    max_tokens: int | None = None
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    frequency_penalty: float | None = Field(None, ge=-2, le=2)
    user: str | None = None


class ChatMessageOut(Schema):
    role: Literal["assistant"] = "assistant"
    content: str


class ChoiceOut(Schema):
    index: int = 0
    message: ChatMessageOut
    finish_reason: str
    logprobs: None = None


class UsageOut(Schema):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class ChatCompletionOut(Schema):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChoiceOut]
    usage: UsageOut


class _BadInput(DomainError):
    status = 400

    def __init__(self, message: str, param: str):
        super().__init__(message)
        self.param = param


def _user_content(body: ChatCompletionIn) -> str | list[dict]:
    """The content of the last user message (text parts only: the agent's input is text here)."""
    last = next((m for m in reversed(body.messages) if m.role == "user"), None)
    if last is None:
        raise _BadInput(
            "No user message found in the request. Please include at least one message with role='user'.", "messages"
        )
    if isinstance(last.content, list):
        if any(part.get("type") != "text" or not isinstance(part.get("text"), str) for part in last.content):
            raise _BadInput(
                "Only text content parts ({'type': 'text', 'text': ...}) can be sent to an agent.", "messages"
            )
        return [{"type": "text", "text": part["text"]} for part in last.content]
    return last.content or ""


def _letta_request(request, body: ChatCompletionIn) -> tuple[LettaRequest, str]:
    """The send the completion becomes, and the model name its answer carries; 400 for a `model` that is no agent id,
    404 for an agent the caller does not own."""
    if not body.model.startswith("agent-"):
        raise _BadInput(
            "For this endpoint, the 'model' field should contain an agent ID (format: 'agent-...'). "
            f"Received: '{body.model}'",
            "model",
        )
    agent = agent_get(owner=owner(request), agent_id=body.model)
    letta = LettaRequest(messages=[MessageIn(role="user", content=_user_content(body))], stream_tokens=body.stream)
    return letta, agent.model.split("/", 1)[-1]


def _text(content) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


@router.post("/chat/completions", response=ChatCompletionOut, openapi_extra={"operationId": "create_chat_completion"})
def chat_completion_create(request, body: ChatCompletionIn):
    """Send the last user message to the agent named by `model` (a run, as any send) and answer with its reply."""
    try:
        letta, model = _letta_request(request, body)
    except _BadInput as exc:
        return JsonResponse(openai_error(exc.message, exc.status, param=exc.param), status=exc.status)
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return _stream(request, body.model, letta, model, include_usage)
    run = executor.run_call(
        run_request(owner(request), body.model, letta, inputs_of(letta), stream_tokens=False, background=False)
    )
    if run.status == RunStatus.FAILED:
        return JsonResponse(openai_error(run.error or "The agent's run failed.", 502), status=502)
    replies = [m for m in executor.run_reply(run=run) if m["message_type"] == "assistant_message"]
    usage = run.usage or {}
    return {
        "id": f"chatcmpl-{run.id}",
        "created": int(run.created_at.timestamp()),
        "model": model,
        "choices": [
            {
                "message": {"content": "\n\n".join(_text(m.get("content")) for m in replies)},
                "finish_reason": _FINISH.get(run.stop_reason, "stop"),
            }
        ],
        "usage": {k: usage.get(k, 0) for k in ("prompt_tokens", "completion_tokens", "total_tokens")},
    }


def _stream(request, agent_id: str, letta: LettaRequest, model: str, include_usage: bool) -> StreamingHttpResponse:
    run, subscription = followed_submit(
        agent_id, lambda: executor.run_submit(run_request(owner(request), agent_id, letta, inputs_of(letta)))
    )
    events = caller_events(run=run, types=["assistant_message"], stream_tokens=True, subscription=subscription)
    chunks = ChunkWriter(completion_id=f"chatcmpl-{run.id}", model=model, include_usage=include_usage)
    return event_stream(chunks.frames(events))


def _data(payload: dict) -> str:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"


class ChunkWriter:
    """A run's caller events as OpenAI chat.completion.chunk SSE frames: the role on the first content chunk, each
    assistant text as it arrives (two assistant messages apart by a blank line, as the non-streamed answer joins
    them), the finish chunk at the run's stop reason, the usage chunk if asked, then `[DONE]`."""

    def __init__(self, *, completion_id: str, model: str, include_usage: bool):
        self.id, self.model, self.include_usage = completion_id, model, include_usage
        self.created = int(time.time())
        self.message_id: str | None = None
        self.first = True

    def _chunk(self, choices: list[dict], **more) -> str:
        chunk = {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model}
        return _data({**chunk, "choices": choices, **more})

    def _content(self, event: dict) -> str | None:
        text = _text(event.get("content"))
        if not text:
            return None
        if self.message_id is not None and event.get("id") != self.message_id:
            text = "\n\n" + text
        self.message_id = event.get("id")
        delta = {"content": text}
        if self.first:
            delta, self.first = {"role": "assistant", **delta}, False
        return self._chunk([{"index": 0, "delta": delta, "finish_reason": None, "logprobs": None}])

    def _frame(self, event: dict) -> str | None:
        kind = event.get("message_type")
        if kind == "assistant_message":
            return self._content(event)
        if kind == "ping":
            return ": ping\n\n"  # an SSE comment: keeps proxies from closing an idle stream, clients skip it
        if kind == "stop_reason":
            finish = _FINISH.get(event.get("stop_reason"), "stop")
            return self._chunk([{"index": 0, "delta": {}, "finish_reason": finish, "logprobs": None}])
        if kind == "usage_statistics" and self.include_usage:
            usage = {k: event.get(k) or 0 for k in ("prompt_tokens", "completion_tokens", "total_tokens")}
            return self._chunk([], usage=usage)
        if kind == "error_message":
            body = openai_error(event.get("message") or "The agent's run failed.", 500)
            return _data(body)
        return None

    async def frames(self, events):
        async for event in events:
            if (frame := self._frame(event)) is not None:
                yield frame
        yield "data: [DONE]\n\n"
