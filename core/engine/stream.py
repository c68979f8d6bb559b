"""Token streaming, pure: a model call's deltas as Letta chunks of the message the step will store.

Every chunk of one call carries the id the assistant message will be stored under and holds only the
newly arrived text (Letta's `stream_tokens` semantics), with `"delta": true` so a reader tells chunks from
the complete messages that follow the commit. Native reasoning → reasoning_message; reply text →
assistant_message; a `send_message` call's `message` argument → assistant_message; any call's `thinking`
argument → reasoning_message; other calls' argument fragments → tool_call_message, or approval_request_message for a
call that will wait for a person or a client. Arguments arrive as
fragments of a JSON object, so the values of `message` and `thinking` are read by partial parsing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic_core import from_json

from core.engine.types import Delta

ASSISTANT_TOOL = "send_message"
ASSISTANT_KWARG = "message"
THINKING_KWARG = "thinking"


def partial_object(arguments: str) -> dict[str, Any]:
    """What is readable so far of a JSON object that is still arriving (incomplete escapes held back)."""
    try:
        parsed = from_json(arguments or "{}", allow_partial="trailing-strings")
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def partial_string_values(arguments: str) -> dict[str, str]:
    """The string values readable so far in a JSON object that is still arriving."""
    return {k: v for k, v in partial_object(arguments).items() if isinstance(v, str)}


@dataclass
class _Call:
    name: str = ""
    id: str | None = None
    arguments: str = ""
    sent: dict[str, int] = field(default_factory=dict)  # characters of each streamed value already sent
    held: str = ""  # argument text not sent yet: held while the `thinking` argument streams, so reasoning comes first


class ChunkBuilder:
    """Turns one model call's deltas into chunk events; `feed` returns the chunks a delta produced."""

    def __init__(
        self,
        *,
        message_id: str,
        run_id: str,
        step_id: str,
        date: str,
        use_assistant_message: bool = True,
        thinking_arg: bool = True,
        waits: Callable[[str], bool] | None = None,
    ):
        self.base = {"id": message_id, "date": date, "run_id": run_id, "step_id": step_id, "otid": None, "delta": True}
        self.use_assistant_message = use_assistant_message
        # Whether a call's `thinking` argument shows as reasoning (the MemGPT types ask for it; a letta_v1_agent's
        # tools never declare it, and Letta shows none for a stray one).
        self.thinking_arg = thinking_arg
        # Whether a call to a tool waits for a person or a client: its chunks are approval_request_message, whose
        # `tool_call` and `tool_calls` are the same delta object (Letta's streaming interfaces).
        self.waits = waits
        self.calls: dict[int, _Call] = {}
        self.count = 0
        self._segment, self._last_type = -1, None

    def _chunk(self, message_type: str, **fields: Any) -> dict[str, Any]:
        self.count += 1
        if message_type != self._last_type:  # Letta: one otid per run of same-typed chunks, to group fragments by
            self._segment, self._last_type = self._segment + 1, message_type
        return {
            **self.base,
            "message_type": message_type,
            "otid": segment_otid(self.base["id"], self._segment),
            **fields,
        }

    def feed(self, delta: Delta) -> list[dict[str, Any]]:
        if not delta.text and delta.kind != "tool_call":
            return []
        if delta.kind == "reasoning":
            return [self._chunk("reasoning_message", reasoning=delta.text, source="reasoner_model", signature=None)]
        if delta.kind == "text":
            return [self._chunk("assistant_message", content=delta.text)]
        return self._tool_call(delta)

    def _tool_call(self, delta: Delta) -> list[dict[str, Any]]:
        call = self.calls.setdefault(delta.tool_index, _Call())
        call.name = call.name or delta.tool_name or ""
        call.id = call.id or delta.tool_call_id
        call.arguments += delta.text
        values = partial_string_values(call.arguments)
        out = []
        thinking = self._new_text(call, values, THINKING_KWARG)
        if thinking and self.thinking_arg:
            out.append(
                self._chunk("reasoning_message", reasoning=thinking, source="non_reasoner_model", signature=None)
            )
        waiting = self.waits is not None and bool(call.name) and self.waits(call.name)
        if self.use_assistant_message and call.name == ASSISTANT_TOOL and not waiting:
            message = self._new_text(call, values, ASSISTANT_KWARG)
            if message:
                out.append(self._chunk("assistant_message", content=message))
            return out
        call.held += delta.text
        if set(partial_object(call.arguments)) <= {THINKING_KWARG} and not _closed(call.arguments):
            return out  # the call shows after its reasoning, as the stored message does
        if call.held or not call.sent.get("_announced"):
            call.sent["_announced"] = 1
            tool_call = {"name": call.name or None, "arguments": call.held or None, "tool_call_id": call.id}
            call.held = ""
            if waiting:
                out.append(self._chunk("approval_request_message", tool_call=tool_call, tool_calls=tool_call))
            else:
                out.append(self._chunk("tool_call_message", tool_call=tool_call, tool_calls=[tool_call]))
        return out

    @staticmethod
    def _new_text(call: _Call, values: dict[str, str], key: str) -> str:
        value = values.get(key, "")
        sent = call.sent.get(key, 0)
        if len(value) <= sent:
            return ""
        call.sent[key] = len(value)
        return value[sent:]


_TEXT_FIELDS = {"reasoning_message": "reasoning", "assistant_message": "content"}


def coalesce(events: list[dict[str, Any]], flags: list[bool]) -> tuple[list[dict[str, Any]], list[bool]]:
    """Merge each run of consecutive chunks of one message part (same id, type, otid and caller flag) into one
    chunk holding their text in order: what a reader concatenates is unchanged, with fewer events to send.
    Other events, and chunks of different parts, pass through in order. `flags` pairs each event with its
    caller flag (core.runs.emit)."""
    out: list[dict[str, Any]] = []
    out_flags: list[bool] = []
    for event, flag in zip(events, flags, strict=True):
        last = out[-1] if out else None
        if (
            last is not None
            and event.get("delta")
            and last.get("delta")
            and out_flags[-1] == flag
            and all(last.get(k) == event.get(k) for k in ("id", "message_type", "otid"))
            and (merged := _merged(last, event)) is not None
        ):
            out[-1] = merged
            continue
        out.append(event)
        out_flags.append(flag)
    return out, out_flags


def _merged(first: dict[str, Any], then: dict[str, Any]) -> dict[str, Any] | None:
    """Two chunks of one part as one, or None when they do not merge (fragments of two different calls)."""
    field = _TEXT_FIELDS.get(first["message_type"])
    if field is not None:
        return {**first, field: (first.get(field) or "") + (then.get(field) or "")}
    one, two = first.get("tool_call") or {}, then.get("tool_call") or {}
    kind = first["message_type"]
    if kind not in ("tool_call_message", "approval_request_message") or not one.get("tool_call_id"):
        return None  # a call without an id cannot be told from the next one
    if one["tool_call_id"] != two.get("tool_call_id"):
        return None
    call = {**one, "arguments": ((one.get("arguments") or "") + (two.get("arguments") or "")) or None}
    return {**first, "tool_call": call, "tool_calls": call if kind == "approval_request_message" else [call]}


def segment_otid(message_id: str, index: int) -> str | None:
    """Letta's otid for part `index` of a message: the id's UUID with its low 7 bits set to the index."""
    try:
        value = uuid.UUID(message_id[-36:]).int
    except ValueError:
        return None
    return str(uuid.UUID(int=(value & ~0x7F) | (index & 0x7F)))


def _closed(arguments: str) -> bool:
    try:
        from_json(arguments)
    except ValueError:
        return False
    return True
