"""Letta-style cursor paging (`after`/`before` are item ids) over a short, already-ordered list."""

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")
MAX_OFFSET = 2**31 - 1


def clamp_limit(limit, maximum: int) -> int:
    """A page size within 1..maximum whatever the client sent (negative, zero or huge)."""
    return max(1, min(int(limit), maximum))


def clamp_offset(offset) -> int:
    """An offset within 0..MAX_OFFSET (SQLite cannot bind integers past 2^63; nothing is that far anyway)."""
    return max(0, min(int(offset or 0), MAX_OFFSET))


def page(items: Sequence[T], *, after: str | None = None, before: str | None = None, limit: int | None = None,
         order: str = "asc") -> list[T]:
    """The items strictly after `after` and before `before` (in the given order), at most `limit` of them.
    An unknown cursor yields an empty page, so SDK auto-pagination always terminates."""
    seq = list(items) if order != "desc" else list(reversed(items))
    ids = [getattr(x, "id") for x in seq]
    if after:
        seq = seq[ids.index(after) + 1:] if after in ids else []
        ids = ids[len(ids) - len(seq):]
    if before:
        seq = seq[: ids.index(before)] if before in ids else []
    return seq[: clamp_limit(limit, 1000)] if limit else seq
