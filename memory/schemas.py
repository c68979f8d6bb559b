"""API schemas of the memory app (Letta v1 field names)."""

from datetime import datetime
from typing import Annotated, Any

from ninja import Field, Schema
from pydantic import BaseModel

from memory.services import MAX_BLOCK_LIMIT

Label = Annotated[
    str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_-]+$", description="Unique among an agent's blocks.")
]
BlockValue = Annotated[str, Field(max_length=MAX_BLOCK_LIMIT, description="At most the block's `limit` characters.")]
BlockLimit = Annotated[int, Field(ge=1, le=MAX_BLOCK_LIMIT, description="Characters the value may hold.")]
PassageTag = Annotated[str, Field(max_length=100)]


class BlockIn(Schema):
    label: Label
    value: BlockValue = ""
    limit: BlockLimit | None = None
    description: str | None = ""
    read_only: bool = False
    metadata: dict | None = None


def _not_nullable(schema: dict) -> None:
    schema.pop("default", None)


class BlockUpdateIn(Schema):
    """Only the fields given change; `value`, `label` and `limit` cannot be null (leave them out instead)."""

    label: Label = Field(None, json_schema_extra=_not_nullable)
    value: BlockValue = Field(None, json_schema_extra=_not_nullable)
    limit: BlockLimit = Field(None, json_schema_extra=_not_nullable)
    description: str | None = None
    read_only: bool | None = None
    metadata: dict | None = None


class PassageIn(Schema):
    text: Annotated[str, Field(min_length=1)]
    tags: list[PassageTag] | None = None
    created_at: datetime | None = None


# --- responses: what memory's presenters and endpoints return. Output models are plain pydantic models: ninja's
# Schema reads its input through a per-object attribute getter, slower on big outputs and blind to open keys.


class BlockOut(BaseModel):
    """Letta's Block."""

    id: str
    label: str
    value: str
    limit: int
    description: str
    read_only: bool
    metadata: dict[str, Any]
    version: int
    created_at: datetime
    updated_at: datetime


class BlockAgentOut(BaseModel):
    id: str
    name: str


class BlockHistoryOut(BaseModel):
    """One change of a block's value or fields, with its unified diff."""

    id: str
    version: int
    old_value: str
    new_value: str
    changes: dict[str, Any] = Field(description="Other fields changed: {field: [old, new]}.")
    actor_type: str
    actor: str | None
    agent_id: str | None
    step_id: str | None
    tool_call_id: str | None
    created_at: datetime
    diff: list[str]


class PassageEmbeddingOut(BaseModel):
    handle: str
    embedding_model: str
    embedding_dim: int | None


class PassageOut(BaseModel):
    """Letta's Passage; vectors are not sent."""

    id: str
    text: str
    tags: list[str]
    metadata: dict[str, Any]
    source: str
    agent_id: str | None  # None: a shared archive's passage
    archive_id: str | None
    file_id: str | None
    embedding: list[float] | None
    embedding_config: PassageEmbeddingOut | None
    created_at: datetime
    updated_at: datetime
    is_deleted: bool


class PassageHitOut(BaseModel):
    id: str
    timestamp: str = Field(json_schema_extra={"format": "date-time"})
    content: str
    tags: list[str]


class PassageSearchOut(BaseModel):
    results: list[PassageHitOut]
    count: int


class ArchivalStatusOut(BaseModel):
    search_mode: str = Field(description="How archival memory is searched for this agent.")
    embedding: str | None
    num_archival_memory: int
    num_recall_memory_outside_window: int
