"""Letta-style cursor paging, the one helper every list endpoint uses.

`after`/`before` are item ids relative to the order asked for: `after` continues in that order, `before`
goes back (the `limit` items nearest the cursor, still listed in the order asked for). Past the end a page
is empty, so the SDK's auto-pagination (which sends the last item's id as the next `after`, or the first
one's as the next `before`) always terminates. A cursor naming nothing the caller could list is a 404, as in
Letta: an empty page would pass a typo off as "no more items".
"""

from collections.abc import Sequence
from typing import TypeVar

from django.db.models import Q, QuerySet

from core.errors import NotFound

T = TypeVar("T")
MAX_OFFSET = 2**31 - 1


def clamp_limit(limit, maximum: int) -> int:
    """A page size within 1..maximum whatever the client sent (negative, zero or huge)."""
    return max(1, min(int(limit), maximum))


def clamp_offset(offset) -> int:
    """An offset within 0..MAX_OFFSET (SQLite cannot bind integers past 2^63; nothing is that far anyway)."""
    return max(0, min(int(offset or 0), MAX_OFFSET))


def cursor_unknown(name: str, cursor: str) -> NotFound:
    """The 404 for a cursor that names no item of the list."""
    return NotFound(f"The `{name}` cursor '{cursor}' names no item of this list (unknown id, or not yours).")


def page(
    items: Sequence[T],
    *,
    after: str | None = None,
    before: str | None = None,
    limit: int | None = None,
    order: str = "asc",
    maximum: int = 1000,
) -> list[T]:
    """One page of an already-ordered (ascending) short list of objects with an `id`; NotFound for an unknown
    cursor."""
    seq = list(items) if order != "desc" else list(reversed(items))
    ids = [x.id for x in seq]
    for name, cursor in (("after", after), ("before", before)):
        if cursor and cursor not in ids:
            raise cursor_unknown(name, cursor)
    if after:
        seq = seq[ids.index(after) + 1 :]
        ids = ids[len(ids) - len(seq) :]
    if before:
        seq = seq[: ids.index(before)] if before in ids else []  # `before` at or ahead of `after`: nothing between
    if not limit:
        return seq
    size = clamp_limit(limit, maximum)
    return seq[-size:] if before and not after else seq[:size]


def queryset_page(
    qs: QuerySet,
    *,
    after: str | None = None,
    before: str | None = None,
    limit: int | None = 50,
    order: str = "desc",
    field: str = "created_at",
    maximum: int = 1000,
    scope: QuerySet | None = None,
) -> list:
    """One page of `qs` ordered by (`field`, id); ties on `field` (rows made in one transaction) break on id.

    Cursors are looked up in `scope` (default `qs`): the caller's whole list before its filters, so a cursor
    need not match them, while another owner's id is unknown (NotFound). `field` may be an annotation of both.
    """
    ascending = order == "asc"
    lookup = qs if scope is None else scope
    for name, cursor, forward in (("after", after, True), ("before", before, False)):
        if not cursor:
            continue
        found = lookup.prefetch_related(None).filter(pk=cursor).values_list(field, flat=True)[:1]
        if not found:
            raise cursor_unknown(name, cursor)
        ref = found[0]
        op = "gt" if forward == ascending else "lt"
        qs = qs.filter(Q(**{f"{field}__{op}": ref}) | Q(**{field: ref, f"pk__{op}": cursor}))
    backwards = bool(before and not after)
    desc = ascending == backwards
    rows = list(
        qs.order_by(*((f"-{field}", "-pk") if desc else (field, "pk")))[: clamp_limit(limit or maximum, maximum)]
    )
    return rows[::-1] if backwards else rows


def seq_page(
    qs: QuerySet,
    *,
    scope: QuerySet,
    after: str | None = None,
    before: str | None = None,
    limit: int | None = 100,
    ascending: bool = False,
    maximum: int = 1000,
) -> list:
    """One page of an agent's messages as Letta's message_manager.list_messages pages them: `after` means newer
    than that message and `before` older, whatever the order; the `limit` rows first in the order asked for, a
    newest-first page handed back oldest first (letta/server/server.py get_agent_recall_async). Cursors are looked
    up in `scope`; NotFound for one not there."""
    for name, cursor, op in (("after", after, "gt"), ("before", before, "lt")):
        if not cursor:
            continue
        found = scope.filter(pk=cursor).values_list("seq", flat=True)[:1]
        if not found:
            raise cursor_unknown(name, cursor)
        qs = qs.filter(**{f"seq__{op}": found[0]})
    rows = list(qs.order_by("seq" if ascending else "-seq")[: clamp_limit(limit or maximum, maximum)])
    return rows if ascending else rows[::-1]
