"""Tool-rule solver: which tools may be called next, whether a call is forced, and when a run may end.

`history` is always the names of the tools called so far in the current run, oldest first;
`last_output` is the (raw, unformatted) return value of the last tool, used by conditional rules.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from core.engine.base_tools import TERMINAL_TOOLS
from core.engine.types import (
    Conditional,
    ConstrainChildTools,
    ContinueLoop,
    ExitLoop,
    MaxCountPerStep,
    ParentLastTool,
    RequiredBeforeExit,
    RequiresApproval,
    RunFirst,
    ToolRule,
)


class ToolRuleError(Exception):
    """A rule that cannot be satisfied (e.g. a conditional rule with require_output_mapping and no match)."""


@dataclass(frozen=True, slots=True)
class Allowed:
    """The solver's answer for the next step.

    `tools`: names the model may call (a subset of the available tools, in their given order).
    `tool_choice`: the chat-completions value to send ("auto", "required" or a named function).
    `forced`: whether a rule (not just the default) requires a tool call now.
    """

    tools: tuple[str, ...]
    tool_choice: str | dict[str, Any]
    forced: bool

    def permits(self, name: str) -> bool:
        return name in self.tools


def _named_choice(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name}}


def _output_matches(output: str | None, key: str) -> bool:
    if output is None:
        return False
    text = output.strip()
    if text == key:
        return True
    try:
        return json.loads(text) == json.loads(key.lower() if key in ("True", "False") else key)
    except (ValueError, TypeError):
        return False


def _conditional_children(rule: Conditional, output: str | None, available: set[str]) -> set[str]:
    for key, child in rule.child_output_mapping.items():
        if _output_matches(output, key):
            return {child}
    if rule.default_child:
        return {rule.default_child}
    if rule.require_output_mapping:
        raise ToolRuleError(
            f"Output {output!r} of {rule.tool_name} matches none of {sorted(rule.child_output_mapping)} "
            f"and the rule requires a match."
        )
    return set(available)


def _narrowing(rule: ToolRule, history: Sequence[str], last_output: str | None, available: set[str]) -> set[str]:
    last = history[-1] if history else None
    if isinstance(rule, ConstrainChildTools):
        return set(rule.children) if last == rule.tool_name else available
    if isinstance(rule, ParentLastTool):
        return set(rule.children) if last == rule.tool_name else available - set(rule.children)
    if isinstance(rule, Conditional):
        return _conditional_children(rule, last_output, available) if last == rule.tool_name else available
    if isinstance(rule, MaxCountPerStep):
        used = sum(1 for name in history if name == rule.tool_name)
        return available - {rule.tool_name} if used >= rule.max_count_limit else available
    return available


def allowed_tools(
    rules: Sequence[ToolRule],
    available: Sequence[str],
    history: Sequence[str],
    last_output: str | None = None,
    *,
    default_choice: str = "required",
) -> Allowed:
    """The tools allowed at the next step and the tool_choice to send; raises ToolRuleError if unsatisfiable."""
    order = list(dict.fromkeys(available))
    pool = set(order)
    first = [r.tool_name for r in rules if isinstance(r, RunFirst) and r.tool_name in pool]
    if not history and first:
        names = tuple(n for n in order if n in first)
        return Allowed(names, _named_choice(names[0]) if len(names) == 1 else "required", True)
    result = set(pool)
    forced = False
    last = history[-1] if history else None
    for rule in rules:
        result &= _narrowing(rule, history, last_output, pool)
        if last == rule.tool_name and isinstance(rule, ConstrainChildTools | Conditional):
            forced = True
        if last == rule.tool_name and isinstance(rule, ParentLastTool):
            forced = True
    names = tuple(n for n in order if n in result)
    if forced and len(names) == 1:
        return Allowed(names, _named_choice(names[0]), True)
    return Allowed(names, "required" if forced else default_choice, forced)


def removed_tools(
    rules: Sequence[ToolRule], available: Sequence[str], history: Sequence[str], last_output: str | None = None
) -> dict[str, ToolRule]:
    """Which rule took each tool out of the next step (the first, in rule order, that did), as allowed_tools decides:
    the simulator says why a tool is not offered. A rule that cannot be satisfied removes nothing here."""
    order = list(dict.fromkeys(available))
    pool = set(order)
    first = [r for r in rules if isinstance(r, RunFirst) and r.tool_name in pool]
    if not history and first:
        chosen = {r.tool_name for r in first}
        return {n: first[0] for n in order if n not in chosen}
    out: dict[str, ToolRule] = {}
    kept = set(pool)
    for rule in rules:
        try:
            narrowed = _narrowing(rule, history, last_output, pool)
        except ToolRuleError:
            continue
        for name in order:
            if name in kept and name not in narrowed:
                out[name] = rule
        kept &= narrowed
    return out


def rule_text(rule: ToolRule) -> str:
    """One rule in words (as the prompt's <tool_usage_rules> states it)."""
    if isinstance(rule, RequiresApproval):
        return f"{rule.tool_name} waits for a person's approval before it runs."
    children = ", ".join(getattr(rule, "children", ()) or ())
    return _RULE_TEXT[rule.type].format(
        tool=rule.tool_name, children=children, limit=getattr(rule, "max_count_limit", "")
    )


def run_first_args(rules: Sequence[ToolRule], tool_name: str) -> dict[str, Any] | None:
    """Prefilled arguments a run_first rule gives its tool, if any."""
    for rule in rules:
        if isinstance(rule, RunFirst) and rule.tool_name == tool_name and rule.args:
            return dict(rule.args)
    return None


def violation_message(name: str, allowed: Allowed) -> str:
    """The error fed back to the model when it calls a tool outside the allowed set."""
    return f"[ToolConstraintError] Cannot call {name}, valid tools include: {list(allowed.tools)}."


def check_call(name: str, allowed: Allowed) -> str | None:
    """None if the call is permitted, else the violation message."""
    return None if allowed.permits(name) else violation_message(name, allowed)


def is_terminal(name: str, rules: Sequence[ToolRule], terminal_tools: Iterable[str] = TERMINAL_TOOLS) -> bool:
    """Whether calling the tool ends the run (an exit_loop rule, or a built-in terminal tool like send_message)."""
    return name in set(terminal_tools) or any(isinstance(r, ExitLoop) and r.tool_name == name for r in rules)


def has_exit_rule(name: str, rules: Sequence[ToolRule]) -> bool:
    """Whether an explicit exit_loop rule names the tool (it ends the run even if a heartbeat is requested)."""
    return any(isinstance(r, ExitLoop) and r.tool_name == name for r in rules)


def must_continue(name: str, rules: Sequence[ToolRule]) -> bool:
    """Whether a rule keeps the run going after this tool (continue_loop, or children that must follow)."""
    for r in rules:
        if r.tool_name != name:
            continue
        if isinstance(r, ContinueLoop | ConstrainChildTools | Conditional):
            return True
        if isinstance(r, ParentLastTool) and r.children:
            return True
    return False


def missing_before_exit(rules: Sequence[ToolRule], history: Sequence[str]) -> list[str]:
    """required_before_exit tools not yet called in this run, in rule order."""
    called = set(history)
    return [r.tool_name for r in rules if isinstance(r, RequiredBeforeExit) and r.tool_name not in called]


def needs_approval(name: str, rules: Sequence[ToolRule]) -> bool:
    """Whether a requires_approval rule names the tool (a plain name match, as Letta's solver)."""
    return any(isinstance(r, RequiresApproval) and r.tool_name == name for r in rules)


def non_heartbeat_tools(rules: Sequence[ToolRule], terminal_tools: Iterable[str] = TERMINAL_TOOLS) -> set[str]:
    """Tools whose schema gets no request_heartbeat parameter (terminal ones)."""
    return set(terminal_tools) | {r.tool_name for r in rules if isinstance(r, ExitLoop)}


_RULE_TEXT = {
    "run_first": "{tool} must be the first tool you call in a response.",
    "exit_loop": "{tool} ends your response (yields control back) when called.",
    "continue_loop": "{tool} continues your response when called: you will be asked to call another tool.",
    "constrain_child_tools": "After {tool}, you must call one of: {children}.",
    "parent_last_tool": "{children} can only be called right after {tool}.",
    "conditional": "{tool} decides which tool you call next, based on its output.",
    "max_count_per_step": "{tool} may be called at most {limit} time(s) per response.",
    "required_before_exit": "{tool} must be called before you end your response.",
}


def render_rules(rules: Sequence[ToolRule]) -> str:
    """The `<tool_usage_rules>` text for the system prompt ('' when there are no rules)."""
    lines = []
    for r in rules:
        if isinstance(r, RequiresApproval) and not r.prompt_template:
            continue  # the model is not told: the person is asked
        if r.prompt_template:
            lines.append(r.prompt_template.replace("{{ tool_name }}", r.tool_name).replace("{tool_name}", r.tool_name))
            continue
        children = ", ".join(getattr(r, "children", ()) or ())
        limit = getattr(r, "max_count_limit", "")
        lines.append(_RULE_TEXT[r.type].format(tool=r.tool_name, children=children, limit=limit))
    if not lines:
        return ""
    body = "\n".join(f"- {line}" for line in lines)
    return (
        "<tool_usage_rules>\n"
        "These rules constrain which tools you may call and when. Calls that break them are rejected.\n"
        f"{body}\n"
        "</tool_usage_rules>"
    )
