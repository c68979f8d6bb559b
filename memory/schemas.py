"""API schemas of the memory app (Letta v1 field names)."""

from datetime import datetime

from ninja import Schema


class BlockIn(Schema):
    label: str
    value: str = ""
    limit: int | None = None
    description: str | None = ""
    read_only: bool = False
    metadata: dict | None = None


class BlockUpdateIn(Schema):
    label: str | None = None
    value: str | None = None
    limit: int | None = None
    description: str | None = None
    read_only: bool | None = None
    metadata: dict | None = None


class PassageIn(Schema):
    text: str
    tags: list[str] | None = None
    created_at: datetime | None = None
