"""Agent test expectations, pure: what a test expects of a run, checked against what was observed.

`observed` is plain data gathered after the test's turns ran: the tool calls in order (name, arguments,
step id), the final reply, the blocks' values, the archival passages, the last stop reason, the steps with
their prompt tokens, and the cost. Each failed expectation says what was expected, what happened instead,
and the step where it went wrong when there is one.
"""

from __future__ import annotations

import re
from typing import Any

KEYS = (
    "tools",
    "reply",
    "blocks",
    "archival",
    "stop_reason",
    "max_steps",
    "max_prompt_tokens_per_step",
    "max_cost_usd",
)


def _text_check(kind: str, expected: str, actual: str) -> bool:
    if kind == "contains":
        return expected in actual
    if kind == "equals":
        return actual == expected
    return re.search(expected, actual, re.S) is not None


def _arg_matches(expected: Any, actual: Any) -> bool:
    if isinstance(expected, dict) and set(expected) == {"regex"}:
        return isinstance(actual, str) and re.search(expected["regex"], actual, re.S) is not None
    return expected == actual


def call_matches(expected: dict, actual: dict) -> bool:
    """A call matches when the name is the same and every expected argument matches (a value, or {"regex"})."""
    if expected.get("name") != actual.get("name"):
        return False
    args = actual.get("arguments") or {}
    return all(k in args and _arg_matches(v, args[k]) for k, v in (expected.get("args") or {}).items())


def _tools(spec: dict, observed: dict) -> dict | None:
    calls, wanted = observed["tool_calls"], spec.get("calls") or []
    order = spec.get("order", "sequence")
    if order == "sequence":  # the expected calls happen in this order (other calls may come between)
        position, failed_at = 0, None
        for want in wanted:
            while position < len(calls) and not call_matches(want, calls[position]):
                position += 1
            if position == len(calls):
                failed_at = want
                break
            position += 1
        if failed_at is None:
            return None
        missing = failed_at
    else:  # each expected call happens, in any order
        missing = next((w for w in wanted if not any(call_matches(w, c) for c in calls)), None)
        if missing is None:
            return None
    first_unexpected = next((c for c in calls if not any(call_matches(w, c) for w in wanted)), None)
    return {
        "expectation": f"tools ({order})",
        "expected": wanted,
        "missing": missing,
        "actual": [{"name": c["name"], "arguments": c.get("arguments")} for c in calls],
        "step_id": (first_unexpected or (calls[-1] if calls else {})).get("step_id"),
    }


def _checks(spec: dict, observed: dict) -> list[dict]:
    out = []
    if "tools" in spec and (failure := _tools(spec["tools"], observed)):
        out.append(failure)
    if "reply" in spec:
        kind, expected = next(iter(spec["reply"].items()))
        if not _text_check(kind, expected, observed["reply"] or ""):
            out.append(
                {
                    "expectation": f"reply {kind}",
                    "expected": expected,
                    "actual": observed["reply"],
                    "step_id": observed.get("reply_step_id"),
                }
            )
    for block in spec.get("blocks") or []:
        kind = next(k for k in ("contains", "matches", "equals") if k in block)
        actual = observed["blocks"].get(block["label"])
        if actual is None or not _text_check(kind, block[kind], actual):
            out.append(
                {
                    "expectation": f"block {block['label']} {kind}",
                    "expected": block[kind],
                    "actual": actual,
                    "step_id": observed.get("block_steps", {}).get(block["label"]),
                }
            )
    if "archival" in spec:
        pattern = spec["archival"]["matches"]
        if not any(re.search(pattern, p, re.S) for p in observed["passages"]):
            out.append(
                {
                    "expectation": "archival memory has a passage matching",
                    "expected": pattern,
                    "actual": observed["passages"][-5:],
                    "step_id": None,
                }
            )
    if "stop_reason" in spec and observed["stop_reason"] != spec["stop_reason"]:
        out.append(
            {
                "expectation": "stop reason",
                "expected": spec["stop_reason"],
                "actual": observed["stop_reason"],
                "step_id": observed["steps"][-1]["id"] if observed["steps"] else None,
            }
        )
    if "max_steps" in spec and len(observed["steps"]) > spec["max_steps"]:
        out.append(
            {
                "expectation": "steps at most",
                "expected": spec["max_steps"],
                "actual": len(observed["steps"]),
                "step_id": observed["steps"][spec["max_steps"]]["id"],
            }
        )
    if "max_prompt_tokens_per_step" in spec:
        over = [s for s in observed["steps"] if (s.get("prompt_tokens") or 0) > spec["max_prompt_tokens_per_step"]]
        if over:
            out.append(
                {
                    "expectation": "prompt tokens per step at most",
                    "expected": spec["max_prompt_tokens_per_step"],
                    "actual": over[0]["prompt_tokens"],
                    "step_id": over[0]["id"],
                }
            )
    if "max_cost_usd" in spec:
        cost = observed.get("cost_usd")
        if cost is None or cost > spec["max_cost_usd"]:
            out.append(
                {
                    "expectation": "cost at most (USD)",
                    "expected": spec["max_cost_usd"],
                    "actual": cost if cost is not None else "unknown (the model has no known price)",
                    "step_id": None,
                }
            )
    return out


def evaluate(spec: dict, observed: dict) -> list[dict]:
    """The failed expectations of a test (empty: it passed)."""
    return _checks(spec, observed)


def validate(spec: dict) -> list[str]:
    """What is wrong with an expectations spec, as readable problems (empty: it is fine)."""
    problems = [f"unknown expectation '{k}' (known: {', '.join(KEYS)})" for k in spec if k not in KEYS]
    tools = spec.get("tools")
    if tools is not None:
        if not isinstance(tools, dict) or not isinstance(tools.get("calls"), list) or not tools["calls"]:
            problems.append('tools needs a non-empty list of calls: {"calls": [{"name": ...}]}')
        elif tools.get("order", "sequence") not in ("sequence", "set"):
            problems.append("tools.order is 'sequence' or 'set'")
        elif any(not isinstance(c, dict) or not isinstance(c.get("name"), str) for c in tools["calls"]):
            problems.append("every expected tool call needs a name")
    reply = spec.get("reply")
    if reply is not None and (
        not isinstance(reply, dict) or len(reply) != 1 or next(iter(reply)) not in ("contains", "matches", "equals")
    ):
        problems.append('reply is one of {"contains": ...}, {"matches": ...}, {"equals": ...}')
    for block in spec.get("blocks") or []:
        if (
            not isinstance(block, dict)
            or "label" not in block
            or not any(k in block for k in ("contains", "matches", "equals"))
        ):
            problems.append("each block expectation needs a label and one of contains, matches, equals")
    for pattern in _patterns(spec):
        try:
            re.compile(pattern)
        except re.error as exc:
            problems.append(f"bad regular expression {pattern!r}: {exc}")
    return problems


def _patterns(spec: dict) -> list[str]:
    out = [spec["reply"]["matches"]] if isinstance(spec.get("reply"), dict) and "matches" in spec["reply"] else []
    out += [b["matches"] for b in spec.get("blocks") or [] if isinstance(b, dict) and "matches" in b]
    if isinstance(spec.get("archival"), dict) and "matches" in spec["archival"]:
        out.append(spec["archival"]["matches"])
    return [p for p in out if isinstance(p, str)]
