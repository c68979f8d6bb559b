"""API schemas of the memory app (Letta v1 field names)."""

from datetime import datetime
from typing import Annotated

from ninja import Field, Schema

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
