"""Runs that wait for a person or a client, pure: which calls of a reply wait, what an answer may say, and the
text the model reads for each answer (Letta's wire: letta/schemas/message.py ApprovalCreate, letta_agent_v3.py).

A reply waits when one of its valid calls needs approval (a `requires_approval` rule), is a client-side tool
(the client runs it and returns the result), or hits a tool-call breakpoint (core.engine.breakpoints, which also says
when a run waits before its model call). Nothing of that reply runs until every
waiting call is answered; its other calls ("deferred") run with the answers.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from core.engine.breakpoints import ToolBreakpoint
from core.engine.rules import needs_approval
from core.engine.types import ToolRule, ToolSpec

DENIED = "Error: request to call tool denied. User reason: {reason}"
DENIED_ON_CANCEL = "The user cancelled the request, so the tool call was denied."
DENIED_ON_EXPIRY = "Nobody answered the approval request in time, so the tool call was denied."
PENDING = (
    "CONFLICT: Cannot send a new message: The agent is waiting for approval on a tool call. Please approve or deny "
    "the pending request before continuing."
)
NOTHING_PENDING = (
    "Cannot process approval response: No tool call is currently awaiting approval. Please send a regular message "
    "to interact with the agent."
)


class AnswerError(ValueError):
    """An answer that cannot be taken (wrong ids, missing fields); its text is Letta's where Letta has one."""


@dataclass(frozen=True, slots=True)
class Answer:
    """One waiting call's answer: approve (optionally with edited `arguments`), deny with a reason, or the result of
    a client-side tool (`tool_return`, `status`, `stdout`, `stderr`)."""

    tool_call_id: str
    kind: str  # "approval" | "tool"
    approve: bool = False
    reason: str | None = None
    arguments: dict[str, Any] | None = None
    tool_return: str = ""
    status: str = "success"
    stdout: tuple[str, ...] = ()
    stderr: tuple[str, ...] = ()

    def to_letta(self) -> dict[str, Any]:
        """Letta's ApprovalReturn / ToolReturn item (approval_response_message's `approvals`)."""
        if self.kind == "approval":
            out: dict[str, Any] = {
                "type": "approval",
                "tool_call_id": self.tool_call_id,
                "approve": self.approve,
                "reason": self.reason,
            }
            if self.arguments is not None:
                out["arguments"] = self.arguments
            return out
        return {
            "type": "tool",
            "tool_call_id": self.tool_call_id,
            "status": self.status,
            "tool_return": self.tool_return,
            "stdout": list(self.stdout) or None,
            "stderr": list(self.stderr) or None,
        }


def _text(value: Any) -> str:
    """A ToolReturn's `tool_return`: a string, or content parts whose texts are joined."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(str(p.get("text", "")) for p in value if isinstance(p, dict) and p.get("type") == "text")
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False, default=str)


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise AnswerError(f"{where} must be a list of strings")


def _one(item: Any, i: int) -> Answer:
    where = f"approvals[{i}]"
    if not isinstance(item, dict):
        raise AnswerError(f"{where} must be an object")
    call_id = item.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        raise AnswerError(f"{where}.tool_call_id is required")
    kind = item.get("type")
    if kind == "approval":
        if not isinstance(item.get("approve"), bool):
            raise AnswerError(f"{where}.approve must be true or false")
        reason = item.get("reason")
        args = item.get("arguments")
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError as exc:
                raise AnswerError(f"{where}.arguments is not JSON: {exc}") from None
        if args is not None and not isinstance(args, dict):
            raise AnswerError(f"{where}.arguments must be an object of the tool's arguments")
        return Answer(call_id, "approval", item["approve"], None if reason is None else str(reason), args)
    if kind == "tool":
        status = item.get("status", "success")
        if status not in ("success", "error"):
            raise AnswerError(f"{where}.status must be 'success' or 'error'")
        return Answer(
            call_id,
            "tool",
            tool_return=_text(item.get("tool_return")),
            status=status,
            stdout=_strings(item.get("stdout"), f"{where}.stdout"),
            stderr=_strings(item.get("stderr"), f"{where}.stderr"),
        )
    raise AnswerError(f"{where}.type must be 'approval' or 'tool'")


def answers_parse(message: dict[str, Any]) -> list[Answer]:
    """The answers of one input message of type `approval` (or `tool_return`), legacy single form included."""
    if message.get("type") == "tool_return":
        items = message.get("tool_returns")
        items = [{"type": "tool", **x} if isinstance(x, dict) else x for x in items or []]
    else:
        items = message.get("approvals")
        if not items and message.get("approval_request_id") is not None and "approve" in message:
            items = [
                {
                    "type": "approval",
                    "tool_call_id": message["approval_request_id"],
                    "approve": message["approve"],
                    "reason": message.get("reason"),
                }
            ]
    if not isinstance(items, list) or not items:
        raise AnswerError("Invalid approval response. Approval response message does not contain any approvals.")
    return [_one(item, i) for i, item in enumerate(items)]


def answers_match(expected: Sequence[str], answers: Sequence[Answer]) -> list[Answer]:
    """The answers in the order of the waiting calls; AnswerError (Letta's text) unless they answer exactly those
    calls, once each. A legacy answer naming the approval message (`message-…`) answers its first call."""
    answers = list(answers)
    if len(answers) == 1 and answers[0].tool_call_id.startswith("message-") and expected:
        answers = [Answer(**{**_fields(answers[0]), "tool_call_id": expected[0]})]
    got = [a.tool_call_id for a in answers]
    if sorted(set(got)) != sorted(set(expected)) or len(got) != len(set(got)):
        raise AnswerError(f"Invalid tool call IDs. Expected '{sorted(expected)}', but received '{sorted(got)}'.")
    by_id = {a.tool_call_id: a for a in answers}
    return [by_id[i] for i in expected]


def _fields(answer: Answer) -> dict[str, Any]:
    return {name: getattr(answer, name) for name in Answer.__slots__}


def denied(reason: str | None) -> str:
    """What the model reads for a denied call (Letta prints `None` for a missing reason)."""
    return DENIED.format(reason=reason)


def waiting_calls(
    calls: Iterable[tuple[str, bool]],
    *,
    rules: Sequence[ToolRule],
    client_tools: Iterable[str] = (),
    breakpoints: Sequence[ToolBreakpoint] = (),
) -> dict[int, str]:
    """Which calls of a reply wait, by position, and why: "client" (a client-side tool), "approval" (a
    requires_approval rule) or "breakpoint". `calls` gives each call's name and whether it is valid (an invalid call
    never waits: its error goes back to the model)."""
    client = set(client_tools)
    out: dict[int, str] = {}
    for i, (name, valid) in enumerate(calls):
        if not valid:
            continue
        if name in client:
            out[i] = "client"
        elif needs_approval(name, rules):
            out[i] = "approval"
        elif any(b.hits(name) for b in breakpoints):
            out[i] = "breakpoint"
    return out


def client_tool_specs(client_tools: Sequence[dict[str, Any]]) -> list[ToolSpec]:
    """Letta's ClientToolSchema items as tools offered to the model (parameters default to an empty object)."""
    out = []
    for item in client_tools:
        params = item.get("parameters") or {"type": "object", "properties": {}}
        schema = {"name": item["name"], "description": item.get("description") or "", "parameters": params}
        out.append(ToolSpec(name=item["name"], description=schema["description"], json_schema=schema, kind="client"))
    return out


def client_tools_check(value: Any) -> list[dict[str, Any]]:
    """Validate a request's `client_tools` (AnswerError naming what is wrong)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise AnswerError("client_tools must be a list of {name, description, parameters}")
    out, seen = [], set()
    for i, item in enumerate(value):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"].strip():
            raise AnswerError(f"client_tools[{i}].name is required")
        name = item["name"]
        if name in seen:
            raise AnswerError(f"client_tools[{i}]: '{name}' is given twice")
        seen.add(name)
        params = item.get("parameters")
        if params is not None and not isinstance(params, dict):
            raise AnswerError(f"client_tools[{i}].parameters must be a JSON Schema object")
        description = item.get("description")
        out.append(
            {"name": name, "description": None if description is None else str(description), "parameters": params}
        )
    return out
