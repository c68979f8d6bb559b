"""REST endpoints for conversations (Letta's `/v1/conversations`): more threads on one agent. A path's conversation
is `conv-…`, or `default` with an `agent_id` (agent-direct mode: the agent's own thread, as `/v1/agents/{id}/…`
addresses it), or — Letta's deprecated form — the agent's own id. Thin: parse, call, present."""

import re
from dataclasses import asdict
from datetime import datetime
from typing import Any, Literal

from django.http import HttpResponse
from ninja import Field, Query, Router, Schema
from pydantic import BaseModel

from core.agents import conversations as conv
from core.agents.context import agent_context, agent_with_counts
from core.agents.messages import messages_to_letta
from core.api.agents import CompactIn, CompactionOut
from core.api.common import SSE_ALSO, SSE_ONLY, PageQuery, owner
from core.api.messages import LettaRequest, inputs_of, run_request, send_answer, sse_of
from core.api.schemas import ErrorOut, LettaMessageOut, LettaResponseOut
from core.errors import Conflict, Invalid, NotFound
from core.models import Agent, Conversation
from core.runs import executor, runner
from core.runs.overflow import agent_compact
from core.runs.persistence import thread_view
from core.runs.streaming import run_resumable, sse_resume
from core.selectors import agent_get
from core.sse import event_stream

router = Router(tags=["conversations"])

_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
_CONV = re.compile(rf"^conv-{_UUID}$")
_THREAD = re.compile(rf"^(default|conv-{_UUID}|agent-{_UUID})$")


class ConversationOut(BaseModel):
    id: str
    agent_id: str
    summary: str | None
    in_context_message_ids: list[str]
    isolated_block_ids: list[str]
    model: str | None
    model_settings: dict[str, Any] | None
    last_message_at: datetime | None
    created_at: datetime
    updated_at: datetime
    created_by_id: str | None = None
    last_updated_by_id: str | None = None


def _out(c: Conversation, *, hydrated: bool = False) -> dict:
    """Letta fills in_context_message_ids only when one conversation is retrieved."""
    return {
        "id": c.id,
        "agent_id": c.agent_id,
        "summary": c.summary,
        "in_context_message_ids": list(c.message_ids or []) if hydrated else [],
        "isolated_block_ids": [],
        "model": c.model or None,
        "model_settings": c.model_settings or None,
        "last_message_at": c.last_message_at,
        "created_at": c.created_at,
        "updated_at": c.updated_at,
    }


def _conversation(request, conversation_id: str) -> Conversation:
    if not _CONV.match(conversation_id):
        raise Invalid(f"'{conversation_id}' is not a conversation id (conv-<uuid4>)")
    return conv.conversation_get(owner=owner(request), conversation_id=conversation_id)


def _thread(request, conversation_id: str, agent_id: str | None) -> tuple[Agent, Conversation | None]:
    """The agent and conversation a path names (None: the agent's own thread)."""
    if not _THREAD.match(conversation_id):
        raise Invalid(f"'{conversation_id}' is not a conversation id: default, conv-<uuid4> or agent-<uuid4>")
    if conversation_id.startswith("agent-"):
        return agent_get(owner=owner(request), agent_id=conversation_id), None
    if conversation_id == "default":
        if not agent_id:
            raise NotFound("Conversation not found with id 'default' (send agent_id for the agent's own thread)")
        return agent_get(owner=owner(request), agent_id=agent_id), None
    found = conv.conversation_get(owner=owner(request), conversation_id=conversation_id)
    return found.agent, found


class ConversationCreateIn(Schema):
    summary: str | None = None
    isolated_block_labels: list[str] | None = None
    model: str | None = None
    model_settings: dict[str, Any] | None = None


@router.post("/conversations/", response=ConversationOut)
def conversation_create(request, agent_id: str, body: ConversationCreateIn | None = None):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    body = body or ConversationCreateIn()
    created = conv.conversation_create(
        agent=agent,
        summary=body.summary,
        model=body.model,
        model_settings=body.model_settings,
        isolated_block_labels=body.isolated_block_labels,
    )
    return _out(created)


class ConversationListQuery(PageQuery):
    agent_id: str | None = None
    limit: int = Field(50, ge=1, le=1000)
    summary_search: str | None = None
    order_by: Literal["created_at", "last_run_completion", "last_message_at"] = "created_at"


@router.get("/conversations/", response=list[ConversationOut])
def conversations_list(request, q: Query[ConversationListQuery]):
    rows = conv.conversations_list(
        owner=owner(request),
        agent_id=q.agent_id,
        limit=q.limit,
        after=q.after,
        before=q.before,
        summary_search=q.summary_search,
        ascending=q.order == "asc",
        order_by=q.order_by,
    )
    return [_out(c) for c in rows]


@router.get("/conversations/{conversation_id}", response=ConversationOut)
def conversation_retrieve(request, conversation_id: str):
    return _out(_conversation(request, conversation_id), hydrated=True)


class ConversationUpdateIn(Schema):
    summary: str | None = None
    model: str | None = None
    model_settings: dict[str, Any] | None = None
    last_message_at: datetime | None = None


@router.patch("/conversations/{conversation_id}", response=ConversationOut)
def conversation_update(request, conversation_id: str, body: ConversationUpdateIn):
    found = _conversation(request, conversation_id)
    return _out(conv.conversation_update(conversation=found, **body.dict()))


_NULL = {"description": "null, as Letta answers", "content": {"application/json": {"schema": {"type": "null"}}}}


@router.delete("/conversations/{conversation_id}", response={200: None}, openapi_extra={"responses": {200: _NULL}})
def conversation_delete(request, conversation_id: str):
    """Delete softly; answers `null`, as Letta does."""
    conv.conversation_delete(conversation=_conversation(request, conversation_id))
    return HttpResponse(b"null", content_type="application/json")


@router.post("/conversations/{conversation_id}/fork", response=ConversationOut)
def conversation_fork(request, conversation_id: str, agent_id: str | None = None):
    agent, source = _thread(request, conversation_id, agent_id)
    return _out(conv.conversation_fork(owner=owner(request), source=source, agent=agent))


@router.post("/conversations/{conversation_id}/cancel", response=dict[str, str])
def conversation_cancel(request, conversation_id: str, agent_id: str | None = None):
    agent, found = _thread(request, conversation_id, agent_id)
    active = conv.conversation_active_runs(agent=agent, conversation=found, waiting=True)
    if not active:
        raise Conflict(f"CONFLICT: No active runs to cancel for conversation {conversation_id}")
    cancelled = runner.run_cancel(owner=agent.owner, agent_id=agent.id, run_ids=active)
    return dict.fromkeys(cancelled, "cancelled")


class ConversationMessageRequest(LettaRequest):
    agent_id: str | None = None
    streaming: bool = True  # unlike the agent route, a conversation streams unless asked not to


@router.post(
    "/conversations/{conversation_id}/messages", response=LettaResponseOut, openapi_extra=SSE_ALSO, exclude_unset=True
)
def conversation_messages_send(request, conversation_id: str, body: ConversationMessageRequest):
    """Run the thread's agent on the message: an SSE stream by default, the LettaResponse with `streaming: false`."""
    agent, found = _thread(request, conversation_id, body.agent_id)
    inputs = inputs_of(body)
    if not inputs:
        raise Invalid("Messages must not be empty")
    thread = found.id if found is not None else None
    if body.streaming:

        def submit():
            return executor.run_submit(run_request(agent.owner, agent.id, body, inputs, conversation_id=thread))

        return sse_of(agent.id, submit, body)
    run = executor.run_call(
        run_request(agent.owner, agent.id, body, inputs, conversation_id=thread, stream_tokens=False, background=False)
    )
    return send_answer(run, body)


class ConversationMessagesQuery(PageQuery):
    agent_id: str | None = None
    limit: int = Field(100, ge=1, le=1000)
    include_return_message_types: list[str] | None = None


@router.get("/conversations/{conversation_id}/messages", response=list[LettaMessageOut], exclude_unset=True)
def conversation_messages_list(request, conversation_id: str, q: Query[ConversationMessagesQuery]):
    """The thread's messages: a conversation's in the order asked for (newest first by default); the agent's own
    thread as `GET /v1/agents/{id}/messages` lists it, outside any conversation."""
    agent, found = _thread(request, conversation_id, q.agent_id)
    if found is not None:
        rows = conv.conversation_messages(
            conversation=found, before=q.before, after=q.after, limit=q.limit, ascending=q.order == "asc"
        )
    else:
        rows = conv.default_thread_messages(
            agent=agent, before=q.before, after=q.after, limit=q.limit, ascending=q.order == "asc"
        )
    return messages_to_letta(rows, types=q.include_return_message_types, agent_type=agent.agent_type)


class ThreadCompactIn(CompactIn):
    agent_id: str | None = None


@router.post("/conversations/{conversation_id}/compact", response={200: CompactionOut, 502: ErrorOut})
def conversation_compact(request, conversation_id: str, body: ThreadCompactIn | None = None):
    """Compact the thread's in-context messages now, as `POST /v1/agents/{id}/summarize` does for the agent's own."""
    agent, found = _thread(request, conversation_id, body.agent_id if body else None)
    overrides = body.compaction_settings.dict(exclude_unset=True) if body and body.compaction_settings else None
    return asdict(agent_compact(agent=agent, conversation_id=found.id if found else None, overrides=overrides))


class RecompileIn(Schema):
    agent_id: str | None = None


@router.post("/conversations/{conversation_id}/recompile", response=str)
def conversation_recompile(request, conversation_id: str, dry_run: bool = False, body: RecompileIn | None = None):
    """The thread's system prompt as its next call sends it. It is compiled afresh at every step from the agent's
    prompt and memory, so there is nothing to store: `dry_run` changes nothing."""
    agent, found = _thread(request, conversation_id, body.agent_id if body else None)
    counted = agent_with_counts(owner=agent.owner, agent_id=agent.id)
    return agent_context(agent=thread_view(counted, found.id if found else None)).request["messages"][0]["content"]


class ThreadStreamIn(Schema):
    agent_id: str | None = None
    run_id: str | None = None
    otid: str | None = Field(None, max_length=100)
    starting_after: int = Field(0, ge=0)
    include_pings: bool = True
    poll_interval: float | None = None  # accepted: events are pushed here, not polled
    batch_size: int | None = None


@router.post("/conversations/{conversation_id}/stream", response={200: None, 410: ErrorOut}, openapi_extra=SSE_ONLY)
def conversation_stream(request, conversation_id: str, body: ThreadStreamIn | None = None):
    """Resume the stream of the thread's background run — the one named by `run_id` or by the `otid` of a message
    sent in it, else its newest active run — after `starting_after`, live until the run ends."""
    body = body or ThreadStreamIn()
    agent, found = _thread(request, conversation_id, body.agent_id)
    run = conv.thread_run_for_stream(agent=agent, conversation=found, run_id=body.run_id, otid=body.otid)
    run_resumable(run)
    return event_stream(sse_resume(run=run, starting_after=body.starting_after, include_pings=body.include_pings))
