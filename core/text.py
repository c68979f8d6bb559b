"""Text that both databases can store: finding NUL bytes and lone surrogates in input, and replacing them in output;
and JSON a person sent, parsed with a bound on its nesting (`json_input`).

Input from clients is checked at the edge (`text_problem`, `first_bad_string`) and refused with a 4xx; text the
server did not choose (a tool's stdout, a model's reply) is made storable (`storable`) at the persistence boundary,
because PostgreSQL refuses NUL in text and JSON, and neither database can encode a lone surrogate.
"""

from __future__ import annotations

import json
import re

REPLACEMENT = "\ufffd"
# A str holds a valid pair as one code point, so any code point in this range is a lone surrogate.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _has_lone_surrogate(text: str) -> bool:
    if text.isascii():  # O(1) in CPython: most text takes this path
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def text_problem(text: str) -> str | None:
    """Why `text` cannot be stored as given ("a NUL character", "a lone surrogate"), or None."""
    if "\x00" in text:
        return "a NUL character (\\u0000)"
    if _has_lone_surrogate(text):
        return "a lone surrogate (an unpaired \\ud800-\\udfff escape)"
    return None


def _str_clean(text: str) -> bool:
    return "\x00" not in text and (text.isascii() or not _has_lone_surrogate(text))


_SCALARS = (int, float, bool, type(None))


def _all_clean(value) -> bool:
    """Whether every string in a JSON-like value is storable: run on every save of a step's whole request, so it
    is written for speed. A container is first encoded by json's C encoder, which writes NUL as \\u0000 and every
    non-ASCII character as \\uXXXX: without either escape in the encoding, no string in it can be bad. Otherwise
    (or for values json cannot encode) the strings are checked one by one."""
    kind = type(value)
    if kind is dict or kind is list:
        try:
            encoded = json.dumps(value)
        except (TypeError, ValueError):
            return _walk_clean(value)
        return ("\\u0000" not in encoded and "\\ud" not in encoded) or _walk_clean(value)
    return _walk_clean(value)


def _walk_clean(value) -> bool:
    kind = type(value)
    if kind is str:
        return _str_clean(value)
    if kind is dict:
        for key, item in value.items():
            if (type(key) is str and not _str_clean(key)) or (type(item) not in _SCALARS and not _walk_clean(item)):
                return False
        return True
    if kind is list or kind is tuple:
        for item in value:  # noqa: SIM110 - a plain loop: this runs on every stored step
            if type(item) not in _SCALARS and not _walk_clean(item):
                return False
        return True
    if isinstance(value, str):  # subclasses (SafeString, ...): the slow, general path
        return _str_clean(value)
    if isinstance(value, dict):
        return all((not isinstance(k, str) or _str_clean(k)) and _walk_clean(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(_walk_clean(v) for v in value)
    return True


def first_bad_string(value, path: str = "") -> tuple[str, str] | None:
    """(where, problem) of the first string in a JSON-like value (keys included) that cannot be stored, or None."""
    if _all_clean(value):
        return None
    return _first_bad(value, path)


def _first_bad(value, path: str) -> tuple[str, str] | None:
    if isinstance(value, str):
        problem = text_problem(value)
        return (path or "value", problem) if problem else None
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and (problem := text_problem(key)):
                return (f"{path or 'object'} key", problem)
            if found := _first_bad(item, where):
                return found
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            if found := _first_bad(item, f"{path}[{i}]"):
                return found
    return None


def storable_text(text: str) -> str:
    """`text` with NUL characters and lone surrogates replaced by U+FFFD (unchanged, and not copied, if clean)."""
    if "\x00" in text:
        text = text.replace("\x00", REPLACEMENT)
    if _has_lone_surrogate(text):
        text = _SURROGATE.sub(REPLACEMENT, text)
    return text


def storable(value):
    """A JSON-like value with every string (keys included) made storable; returns `value` itself if already clean."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        if _all_clean(value):
            return value
        return {storable_text(k) if isinstance(k, str) else k: storable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if _all_clean(value):
            return value
        return type(value)(storable(v) for v in value)
    return value


# json's parser and encoder, orjson (255 levels), pydantic and the databases each recurse, or refuse, at a depth of
# their own: JSON nested deeper than any of them expects fails wherever it next lands (a RecursionError is a 500).
# Agent files may nest 64 levels (core.agents.agentfile.model.MAX_DEPTH); a request body wraps one in a few more.
MAX_JSON_DEPTH = 100


class JSONTooDeep(ValueError):
    """JSON nested deeper than the bound (a ValueError, so code refusing bad JSON refuses this too)."""

    def __init__(self, max_depth: int):
        super().__init__(f"JSON nested deeper than {max_depth} levels is not accepted.")
        self.max_depth = max_depth


def json_input(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH):
    """`json.loads(text)` for JSON a person sent (a form field, a request body, a websocket frame): nesting deeper
    than `max_depth` raises JSONTooDeep; other bad JSON raises json.JSONDecodeError as json.loads does."""
    try:
        value = json.loads(text)
    except RecursionError:  # the parser recursed once per level until Python stopped it
        raise JSONTooDeep(max_depth) from None
    if _json_deeper_than(value, text, max_depth):
        raise JSONTooDeep(max_depth)
    return value


def _json_deeper_than(value, text: str | bytes, limit: int) -> bool:
    """Whether a parsed value nests containers more than `limit` levels (iterative: no recursion)."""
    opening = (b"[", b"{") if isinstance(text, bytes) else ("[", "{")
    if text.count(opening[0]) + text.count(opening[1]) <= limit:  # counted in C: the usual, shallow case
        return False
    stack = [(value, 1)] if type(value) in (dict, list) else []
    while stack:
        container, depth = stack.pop()
        if depth > limit:
            return True
        for item in container.values() if type(container) is dict else container:
            if type(item) is dict or type(item) is list:
                stack.append((item, depth + 1))
    return False
