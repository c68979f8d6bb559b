"""Agent test expectations, pure: what a test expects of a run, checked against what was observed.

`observed` is plain data gathered after the test's turns ran: the tool calls in order (name, arguments,
step id), the final reply, the blocks' values, the archival passages, the last stop reason, the steps with
their prompt tokens, and the cost. Each failed expectation says what was expected, what happened instead,
and the step where it went wrong when there is one.
"""

from __future__ import annotations

import math
from typing import Any

from core.regex import PatternError, pattern_compile

KEYS = (
    "tools",
    "reply",
    "blocks",
    "archival",
    "stop_reason",
    "approvals",
    "max_steps",
    "max_prompt_tokens_per_step",
    "max_cost_usd",
)
TEXT_KINDS = ("contains", "matches", "equals")
LIMITS = ("max_steps", "max_prompt_tokens_per_step", "max_cost_usd")


def _text_check(kind: str, expected: str, actual: str) -> bool:
    if kind == "contains":
        return expected in actual
    if kind == "equals":
        return actual == expected
    return _found(expected, actual)


def _compiled(pattern: str):
    """The test's pattern (`.` matching newlines too) compiled by RE2, since a test and the agent file it came in are
    anyone's; None for one RE2 refuses (stored before patterns were checked with it), which matches nothing."""
    try:
        return pattern_compile(pattern, dot_all=True)
    except PatternError:
        return None


def _found(pattern: str, text: str) -> bool:
    regex = _compiled(pattern)
    return regex is not None and regex.search(text) is not None


def _arg_matches(expected: Any, actual: Any) -> bool:
    if isinstance(expected, dict) and set(expected) == {"regex"}:
        return isinstance(actual, str) and _found(expected["regex"], actual)
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
        regex = _compiled(pattern)
        if regex is None or not any(regex.search(p) for p in observed["passages"]):
            out.append(
                {
                    "expectation": "archival memory has a passage matching",
                    "expected": pattern,
                    "actual": observed["passages"][-5:],
                    "step_id": None,
                }
            )
    if "approvals" in spec:
        wanted, asked = spec["approvals"]["tools"], observed.get("approval_requests") or []
        if asked != wanted:
            out.append(
                {
                    "expectation": "approval requests",
                    "expected": wanted,
                    "actual": asked,
                    "step_id": observed.get("approval_step_id"),
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


def validate(spec) -> list[str]:
    """What is wrong with an expectations spec, as readable problems (empty: it is fine). Every value is checked for
    its type too: a spec that passes here is one `evaluate` can check without a TypeError."""
    if not isinstance(spec, dict):
        return ['the expectations are a JSON object, such as {"reply": {"contains": "hello"}}']
    problems = [f"unknown expectation '{k}' (known: {', '.join(KEYS)})" for k in spec if k not in KEYS]
    if "tools" in spec:
        problems += _tools_problems(spec["tools"])
    if "reply" in spec:
        problems += _reply_problems(spec["reply"])
    if "blocks" in spec:
        blocks = spec["blocks"]
        if not isinstance(blocks, list) or not all(isinstance(b, dict) for b in blocks):
            problems.append('blocks is a list of objects: [{"label": "human", "contains": "..."}]')
        else:
            for block in blocks:
                problems += _block_problems(block)
    if "archival" in spec:
        archival = spec["archival"]
        if not isinstance(archival, dict) or not isinstance(archival.get("matches"), str):
            problems.append('archival is {"matches": "a regular expression"}')
        else:
            problems += _regex_problems(archival["matches"])
    if "approvals" in spec:
        tools = spec["approvals"].get("tools") if isinstance(spec["approvals"], dict) else None
        if not isinstance(tools, list) or not all(isinstance(t, str) and t for t in tools):
            problems.append('approvals is {"tools": [names of the calls that wait for approval, in order]}')
    if "stop_reason" in spec and not isinstance(spec["stop_reason"], str):
        problems.append("stop_reason is a string, such as 'end_turn'")
    for key in LIMITS:
        if key in spec:
            problems += _limit_problems(key, spec[key])
    return problems


def _tools_problems(tools) -> list[str]:
    if not isinstance(tools, dict) or not isinstance(tools.get("calls"), list) or not tools["calls"]:
        return ['tools needs a non-empty list of calls: {"calls": [{"name": ...}]}']
    if tools.get("order", "sequence") not in ("sequence", "set"):
        return ["tools.order is 'sequence' or 'set'"]
    problems = []
    for call in tools["calls"]:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not call["name"]:
            problems.append("every expected tool call needs a name")
        elif call.get("args") is not None and not isinstance(call["args"], dict):
            problems.append(f'the args of {call["name"]} are an object of argument names to values or {{"regex"}}')
        else:
            for value in (call.get("args") or {}).values():
                if isinstance(value, dict) and set(value) == {"regex"}:
                    if not isinstance(value["regex"], str):
                        problems.append(f"a regex matcher of {call['name']}'s args is a string")
                    else:
                        problems += _regex_problems(value["regex"])
    return problems


def _reply_problems(reply) -> list[str]:
    usage = 'reply is one of {"contains": ...}, {"matches": ...}, {"equals": ...}, with a string'
    if not isinstance(reply, dict) or len(reply) != 1 or next(iter(reply)) not in TEXT_KINDS:
        return [usage]
    kind, text = next(iter(reply.items()))
    if not isinstance(text, str):
        return [usage]
    return _regex_problems(text) if kind == "matches" else []


def _block_problems(block: dict) -> list[str]:
    kinds = [k for k in TEXT_KINDS if k in block]
    if not isinstance(block.get("label"), str) or not block["label"] or not kinds:
        return ["each block expectation needs a label and one of contains, matches, equals"]
    if not isinstance(block[kinds[0]], str):
        return [f"block {block['label']}: {kinds[0]} is a string"]
    return _regex_problems(block[kinds[0]]) if kinds[0] == "matches" else []


def _regex_problems(pattern: str) -> list[str]:
    try:
        pattern_compile(pattern, dot_all=True)
    except PatternError as exc:
        return [f"bad regular expression {pattern!r}: {exc}"]
    return []


def _limit_problems(key: str, value) -> list[str]:
    number = (int, float) if key == "max_cost_usd" else (int,)
    if (
        isinstance(value, bool)
        or not isinstance(value, number)
        or (isinstance(value, float) and not math.isfinite(value))
        or value < 0
    ):
        kind = "number" if key == "max_cost_usd" else "whole number"
        return [f"{key} is a {kind}, 0 or more"]
    return []
