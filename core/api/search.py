"""REST endpoints for Letta's organization-wide message search (`POST /v1/messages/search`) and the cache warm-up
Letta Code calls before it. Thin: parse, call the selector, present.

Letta searches with Turbopuffer (vectors and full text, fused); here it is full text where the database offers it,
else every term of the query, case-insensitively, so `search_mode` is accepted and the same search answers all.
"""

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Field, Router, Schema
from pydantic import BaseModel

from core.agents.messages import message_to_letta
from core.agents.recall import messages_search
from core.api.common import owner

router = Router(tags=["messages"])

SEARCHED = ("system_message", "user_message", "reasoning_message", "assistant_message")


class MessageSearchIn(Schema):
    query: Annotated[str, Field(max_length=2000)]
    search_mode: Literal["vector", "fts", "hybrid"] = "hybrid"
    agent_id: str | None = None
    conversation_id: str | None = Field(None, description="`default` (the agents' own threads) or a `conv-…` id.")
    limit: int = Field(50, ge=1, le=100)
    start_date: datetime | None = None
    end_date: datetime | None = None


class _ListResultBase(BaseModel):
    message_id: str
    agent_id: str
    conversation_id: str | None
    created_at: datetime


class SystemMessageListResult(_ListResultBase):
    message_type: Literal["system_message"]
    content: str


class UserMessageListResult(_ListResultBase):
    message_type: Literal["user_message"]
    content: str


class ReasoningMessageListResult(_ListResultBase):
    message_type: Literal["reasoning_message"]
    reasoning: str


class AssistantMessageListResult(_ListResultBase):
    message_type: Literal["assistant_message"]
    content: str


MessageSearchResult = Annotated[
    SystemMessageListResult | UserMessageListResult | ReasoningMessageListResult | AssistantMessageListResult,
    Field(discriminator="message_type"),
]


def _results(rows) -> list[dict[str, Any]]:
    """Letta's `*ListResult` items for the rows, in order: one per searchable part of each message."""
    out = []
    for row in rows:
        for part in message_to_letta(row, agent_type=row.agent_type):
            if part["message_type"] not in SEARCHED:
                continue
            text = {"reasoning": part["reasoning"]} if "reasoning" in part else {"content": part["content"]}
            out.append(
                {
                    "message_type": part["message_type"],
                    **text,
                    "message_id": row.id,
                    "agent_id": row.agent_id,
                    "conversation_id": row.conversation_id,
                    "created_at": row.created_at,
                }
            )
    return out


@router.post("/messages/search", response=list[MessageSearchResult])
def messages_search_all(request, body: MessageSearchIn):
    """The caller's messages across its agents matching the query, best first (a message may give several results:
    its reasoning and its reply)."""
    rows = messages_search(
        owner=owner(request),
        query=body.query,
        agent_id=body.agent_id,
        conversation_id=body.conversation_id,
        start=body.start_date,
        end=body.end_date,
        limit=body.limit,
    )
    return _results(rows)[: body.limit]


class CacheWarmIn(Schema):
    collection: Annotated[str, Field(max_length=100)] = "messages"
    scope: dict[str, Any] | None = None


class CacheWarmOut(BaseModel):
    collection: str
    status: str
    warmed: bool


@router.post("/_internal_search/cache-warm", response={202: CacheWarmOut})
def search_cache_warm(request, body: CacheWarmIn | None = None):
    """Nothing to warm: the search reads the database's own index. Answers as Letta does once warmed."""
    return 202, {"collection": body.collection if body else "messages", "status": "ok", "warmed": True}
