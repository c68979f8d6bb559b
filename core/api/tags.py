"""REST endpoint for the tags an owner uses (Letta's `GET /v1/tags/`). Thin: parse, call, present."""

from typing import Literal

from ninja import Field, Query, Router

from core.agents.tags import tags_list
from core.api.common import PageQuery, clamped, owner

router = Router(tags=["tags"])


class TagListQuery(PageQuery):
    before: str | None = Field(None, description="A tag: only tags before it in the order asked for.")
    after: str | None = Field(None, description="A tag: only tags after it in the order asked for.")
    limit: int = Field(50, description=clamped(1000))
    order: Literal["asc", "desc"] = "asc"
    order_by: Literal["name"] = "name"
    name: str | None = Field(None, description="Only tags containing this text (case-insensitive).")
    query_text: str | None = Field(None, description="Deprecated by Letta in favour of name.")


@router.get("/tags/", response=list[str])
def tags(request, q: Query[TagListQuery]):
    return tags_list(
        owner=owner(request),
        name=q.name or q.query_text,
        after=q.after,
        before=q.before,
        limit=q.limit,
        ascending=q.order == "asc",
    )
