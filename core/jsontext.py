"""JSON text of plain values, fast: orjson where its text means what `json.dumps`'s does, `json.dumps` otherwise.

A step writes its exact request and the state it was compiled from (tens of kB, growing with the history) and sends
the request's body: json's C encoder spent about 0.5 ms a step on them here, orjson a seventh of it. Its text is
compact and keeps non-ASCII characters as they are (json escapes them): the same JSON. Whatever orjson would encode
differently from json is handed to `json.dumps` instead (dates, dataclasses and subclasses of str, int, dict and list,
which json encodes by their base type or refuses; integers beyond 64 bits; dict keys that are not strings; lone
surrogates, which orjson refuses), except NaN and the infinities, which orjson writes as null: json writes tokens no
JSON parser (PostgreSQL's included) accepts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import orjson

_AS_JSON_WOULD = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS


def dumps(value: Any, default: Callable[[Any], Any] | None = None) -> str:
    """`json.dumps(value, default=default)`'s meaning, in compact text."""
    try:
        return orjson.dumps(value, default=default and _as_json_calls(default), option=_AS_JSON_WOULD).decode()
    except orjson.JSONEncodeError:  # includes a TypeError from the passthrough types: json's own rules decide
        return json.dumps(value, default=default)


def _as_json_calls(default: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`default` for what json hands it only: orjson hands it the passthrough subclasses of str, int, float, dict and
    list too, which json encodes by their base type (a dict subclass is an object, not `str()`'s text)."""

    def call(value: Any) -> Any:
        if isinstance(value, (str, int, float, dict, list, tuple)):
            raise TypeError(type(value).__name__)  # orjson refuses it; json.dumps encodes it
        return default(value)

    return call


def loads(text: str | bytes) -> Any:
    """`json.loads(text)`'s value through orjson's parse, but for one difference: an integer beyond 64 bits comes back
    as the nearest float (json: the exact int), so read with it only text whose numbers are counts, times and the
    like (a provider's stream). Text orjson refuses goes to json: NaN and the infinities, which json reads, and what
    json refuses too (then json's error, a ValueError)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)
