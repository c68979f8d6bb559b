"""Letta message presenters: stored Message rows → Letta v1 message dicts (the SSE, REST and websocket shape).

One row may become several dicts (an assistant row: reasoning, then one per tool call); they share the
row's id, as in Letta, and each carries an `otid`: the client's own for an input message, else one derived
from the id per part (Letta's Message.generate_otid_from_id). A `send_message` call is shown as an
assistant_message unless asked otherwise, and then its tool return is what Letta's API hides
(`hide_assistant_returns`); the IDE shows everything. A letta_v1_agent's text beside tool calls is its reply
(assistant_message); for the MemGPT types it was never shown to the user. A letta_v1_agent shows reasoning only
when its model sent some: a `thinking` argument it was never offered shows nothing, as in Letta.
"""

import json
import logging
from typing import Any

from django.db.models import Q

from core.engine.stream import segment_otid as derived_otid
from core.engine.types import uses_heartbeats
from core.models import Message

ASSISTANT_TOOL = "send_message"
ASSISTANT_KWARG = "message"
APPROVAL_RESPONSE = "approval_response"  # the kind of a stored answer to a run that waited (kept out of the window)
UNRENDERABLE = "unrenderable"  # the kind of the marker shown for a stored message no presenter can show

log = logging.getLogger(__name__)


def _base(row: Message, message_type: str, part: int = 0) -> dict[str, Any]:
    out = {
        "id": row.id,
        "date": row.created_at.isoformat() if row.created_at else None,
        "message_type": message_type,
        "run_id": row.run_id,
        "step_id": row.step_id,
        "seq_id": row.seq,
        "name": row.name or None,
        "otid": row.otid or derived_otid(row.id, part),
        "sender_id": row.sender_agent_id or None,
    }
    if row.kind:
        out["kind"] = row.kind
    return out


def _str(value: Any) -> str | None:
    """A stored value as text (None stays None): a shape written by another version must not fail a list."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def _lines(value: Any) -> list[str] | None:
    """stdout/stderr as Letta lists them: ours are stored as text, an agent file's or an older row's as a list."""
    if not value:
        return None
    parts = value if isinstance(value, list) else [value]
    return [_str(p) or "" for p in parts]


def _tool_call(call: dict) -> dict[str, Any]:
    return {
        "name": _str(call.get("name")),
        "arguments": _str(call.get("arguments")) or "{}",
        "tool_call_id": _str(call.get("id")),
    }


def _call_args(arguments: str) -> dict[str, Any] | None:
    try:
        parsed = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _signature(row: Message) -> str | None:
    signed = [b.get("signature") for b in row.thinking_blocks or () if isinstance(b, dict) and b.get("signature")]
    return signed[-1] if signed else None


def _shows_reasoning(row: Message, agent_type: str | None) -> bool:
    """A letta_v1_agent shows only its model's own reasoning: Letta's LettaAgentV3 pops a `thinking` argument its
    tools never declared and shows none for it (letta/agents/letta_agent_v3.py _handle_ai_response)."""
    if not row.reasoning:
        return False
    return row.reasoning_source == "native" or agent_type is None or uses_heartbeats(agent_type)


def _assistant(row: Message, use_assistant_message: bool, agent_type: str | None) -> list[dict[str, Any]]:
    out = []
    if _shows_reasoning(row, agent_type):
        source = "reasoner_model" if row.reasoning_source == "native" else "non_reasoner_model"
        out.append(
            {
                **_base(row, "reasoning_message", len(out)),
                "reasoning": row.reasoning,
                "source": source,
                "signature": _signature(row),
            }
        )
    reply = not row.tool_calls or (agent_type is not None and not uses_heartbeats(agent_type))
    if row.body and reply:
        out.append({**_base(row, "assistant_message", len(out)), "content": row.body})
    waited = (row.tool_return or {}).get("waiting") or {}
    asked = []  # the calls that waited for a person or a client: one approval_request_message, after the others
    for call in row.tool_calls or []:
        if call.get("id") in waited:
            asked.append(_tool_call(call))
            continue
        args = _call_args(_str(call.get("arguments")) or "")
        if (
            use_assistant_message
            and call.get("name") == ASSISTANT_TOOL
            and args is not None
            and ASSISTANT_KWARG in args
        ):
            out.append({**_base(row, "assistant_message", len(out)), "content": str(args[ASSISTANT_KWARG])})
            continue
        tool_call = _tool_call(call)
        out.append({**_base(row, "tool_call_message", len(out)), "tool_call": tool_call, "tool_calls": [tool_call]})
    if asked:
        out.append({**_base(row, "approval_request_message", len(out)), "tool_call": asked[0], "tool_calls": asked})
    return out


def _approval_response(row: Message) -> dict[str, Any]:
    """Letta's approval_response_message: the answers (`approvals`), the first approval copied to the deprecated
    single fields."""
    try:
        approvals = json.loads(row.text or "[]")
    except ValueError:
        approvals = []
    approvals = [a for a in approvals if isinstance(a, dict)] if isinstance(approvals, list) else []
    first = next((a for a in approvals if isinstance(a, dict) and a.get("type") == "approval"), None)
    return {
        **_base(row, "approval_response_message"),
        "approvals": approvals,
        "approve": first.get("approve") if first else None,
        "approval_request_id": first.get("tool_call_id") if first else None,
        "reason": first.get("reason") if first else None,
    }


def tool_return_text(text: str) -> str:
    """What a tool returned, as Letta lists it (schemas/message.py _parse_tool_response): the `message` of the
    {"status", "message", "time"} the model read, the stored text itself when it is not that."""
    if not text.startswith("{"):
        return text
    try:
        doc = json.loads(text)
    except ValueError:
        return text
    if isinstance(doc, dict) and doc.get("status") in ("OK", "Failed") and "message" in doc:
        return doc["message"] if isinstance(doc["message"], str) else json.dumps(doc["message"], ensure_ascii=False)
    return text


def _tool_return(row: Message) -> dict[str, Any]:
    ret = row.tool_return or {}
    one = {
        "tool_return": tool_return_text(row.text),
        "status": _str(ret.get("status")) or "success",
        "tool_call_id": row.tool_call_id,
        "stdout": _lines(ret.get("stdout")),
        "stderr": _lines(ret.get("stderr")),
    }
    duration = ret.get("duration_ms")
    return {
        **_base(row, "tool_return_message"),
        **one,
        "tool_returns": [{"type": "tool", **one}],
        "duration_ms": duration if isinstance(duration, int | float) and not isinstance(duration, bool) else None,
        "sandbox": _str(ret.get("sandbox")) or None,
    }


def message_to_letta(
    row: Message, *, use_assistant_message: bool = True, agent_type: str | None = None
) -> list[dict[str, Any]]:
    """The Letta message dicts for one stored message (`agent_type` None: the MemGPT types' shapes); a stored shape
    no presenter can show becomes one marker message (logged), so it never fails a whole list or page."""
    try:
        return _parts(row, use_assistant_message, agent_type)
    except Exception:  # noqa: BLE001 - any stored shape: the list around it must still answer
        log.warning("message %s could not be shown", row.id, exc_info=True)
        return [unrenderable(row)]


def unrenderable(row: Message) -> dict[str, Any]:
    """The marker shown in place of a stored message that cannot be shown: a system_message naming it."""
    return {
        **_base(row, "system_message"),
        "kind": UNRENDERABLE,
        "content": f"[This stored {row.role} message ({row.id}) could not be shown: its stored shape is not one this "
        "server knows. The server log has the details.]",
    }


def _parts(row: Message, use_assistant_message: bool, agent_type: str | None) -> list[dict[str, Any]]:
    if row.role == "assistant":
        return _assistant(row, use_assistant_message, agent_type)
    if row.role == "tool":
        return [_tool_return(row)]
    if row.role == "system":
        return [{**_base(row, "system_message"), "content": row.text}]
    if row.kind == APPROVAL_RESPONSE:
        return [_approval_response(row)]
    return [{**_base(row, "user_message"), "content": unpacked(row.text)}]


def unpacked(text: str) -> str:
    """A user message's text as Letta lists it (letta/system.py unpack_message): the `message` of a packed
    `user_message` JSON (an initial message sequence's), anything else (heartbeats, login events) as stored."""
    if not text.startswith("{"):
        return text
    try:
        doc = json.loads(text)
    except ValueError:
        return text
    if isinstance(doc, dict) and doc.get("type") == "user_message" and isinstance(doc.get("message"), str):
        return doc["message"]
    return text


def shown_as_assistant(call: dict) -> bool:
    """Whether a stored tool call lists as an assistant_message (a send_message call with its `message`)."""
    args = _call_args(call.get("arguments", ""))
    return call.get("name") == ASSISTANT_TOOL and args is not None and ASSISTANT_KWARG in args


def is_assistant_return(row: Message, calls: dict[str, dict]) -> bool:
    """Whether a row is the return of a send_message call shown as an assistant_message (Letta does not list
    it); `calls` maps call ids to the stored calls at hand, else the row's own name and status decide."""
    if row.role != "tool" or (row.tool_return or {}).get("status", "success") != "success":
        return False  # a send_message that failed (a rule refused it, say) shows why
    call = calls.get(row.tool_call_id)
    return shown_as_assistant(call) if call is not None else row.name == ASSISTANT_TOOL


def in_reply(row: Message) -> bool:
    """Whether a run's stored message goes back to the caller that asked for the run: Letta answers with the call's
    new messages minus the user-role ones (the input, heartbeats, warnings, summaries) and another agent's input."""
    if row.role == "user" or row.kind == "summary":
        return False
    return not (row.role == "system" and row.kind in ("", "agent_message"))


def assistant_returns() -> Q:
    """The rows `is_assistant_return` picks out, as a filter, so a list can leave them out before paging (a page
    is then never short for what it hid): successful returns of send_message (a failed one shows why)."""
    return Q(role="tool", name=ASSISTANT_TOOL) & (
        Q(tool_return__status="success") | Q(tool_return__status__isnull=True)
    )


def assistant_calls(rows) -> dict[str, dict]:
    """Every tool call of the assistant rows given, by call id."""
    return {c.get("id"): c for r in rows if r.role == "assistant" for c in r.tool_calls or ()}


def messages_to_letta(
    rows,
    *,
    use_assistant_message: bool = True,
    types: list[str] | None = None,
    agent_type: str | None = None,
    hide_assistant_returns: bool = False,
    reverse: bool = False,
) -> list[dict[str, Any]]:
    """Letta message dicts for rows in order, optionally only the given message types; with
    `hide_assistant_returns` (and use_assistant_message) send_message's tool returns are left out, as Letta does.
    `reverse` is for rows given newest first: each row's parts come last first too, so the whole list reads newest
    first (Letta's Message.to_letta_messages_from_list with reverse, as run_manager.get_run_messages asks for a
    desc page)."""
    rows = list(rows)
    if hide_assistant_returns and use_assistant_message:
        calls = assistant_calls(rows)
        rows = [r for r in rows if not is_assistant_return(r, calls)]
    step = -1 if reverse else 1
    out = [
        d
        for row in rows
        for d in message_to_letta(row, use_assistant_message=use_assistant_message, agent_type=agent_type)[::step]
    ]
    return [d for d in out if d["message_type"] in types] if types else out


def usage_statistics(usage: dict) -> dict[str, Any]:
    """Letta's usage_statistics message for a run's accumulated usage."""
    return {
        "message_type": "usage_statistics",
        "completion_tokens": usage.get("completion_tokens", 0),
        "prompt_tokens": usage.get("prompt_tokens", 0),
        "total_tokens": usage.get("total_tokens", 0),
        "step_count": usage.get("step_count", 0),
        "run_ids": usage.get("run_ids"),
    }


def stop_reason_message(stop_reason: str) -> dict[str, Any]:
    return {"message_type": "stop_reason", "stop_reason": stop_reason}
