"""Letta-style cursor paging (`after`/`before` are item ids) over a short, already-ordered list."""

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


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
    return seq[: max(1, min(limit, 1000))] if limit else seq
