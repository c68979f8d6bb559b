"""The tags an owner uses (Letta's `GET /v1/tags/`): its agents' tags, de-duplicated and sorted by name. Blocks
have no tags here, so Letta's union with block tags is the agents' tags alone."""

from core.models import AgentTag, Organization
from core.pagination import clamp_limit

TAGS_MAX = 1000


def tags_list(
    *,
    owner: Organization,
    name: str | None = None,
    after: str | None = None,
    before: str | None = None,
    limit: int = 50,
    ascending: bool = True,
) -> list[str]:
    """Distinct tags of the owner's agents in name order; `name` keeps those containing it (case-insensitively);
    `after`/`before` are tags compared by name in the order asked for (a tag need not exist to be a cursor)."""
    qs = AgentTag.objects.filter(agent__owner=owner)
    if name:
        qs = qs.filter(tag__icontains=name)
    later, earlier = ("gt", "lt") if ascending else ("lt", "gt")
    if after:
        qs = qs.filter(**{f"tag__{later}": after})
    if before:
        qs = qs.filter(**{f"tag__{earlier}": before})
    tags = qs.order_by("tag" if ascending else "-tag").values_list("tag", flat=True).distinct()
    return list(tags[: clamp_limit(limit, TAGS_MAX)])
