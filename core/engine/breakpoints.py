"""The IDE's breakpoints, pure: where a run waits for a person — before a call of named tools (its reply's calls wait,
as for an approval: core.engine.waits), or before its model call (every one, after a tool changed a block or failed,
or when the prompt passes N tokens). Stored on the agent (core.agents.breakpoints); the runner checks them at each
step."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


class BreakpointError(ValueError):
    """A breakpoint that cannot be stored; its text names what is wrong."""


@dataclass(frozen=True, slots=True)
class ToolBreakpoint:
    """Stop before a call of `tools` (all tools when empty)."""

    tools: tuple[str, ...] = ()

    def hits(self, name: str) -> bool:
        return not self.tools or name in self.tools


BREAKPOINT_KINDS = {
    "model_call": "before every model call",
    "tool_call": "before a call of the named tools (any tool when none are named)",
    "block_change": "before the model call after a tool changed a memory block",
    "tokens_over": "before a model call whose prompt passes `tokens` tokens",
    "tool_error": "before the model call after a tool failed",
}


@dataclass(frozen=True, slots=True)
class Breakpoint:
    """Where a run stops for a person: `on` one of BREAKPOINT_KINDS; `tools` for tool_call, `tokens` for
    tokens_over."""

    id: str
    on: str
    tools: tuple[str, ...] = ()
    tokens: int | None = None
    enabled: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "on": self.on, "tools": list(self.tools), "tokens": self.tokens, "enabled": self.enabled}

    def describe(self) -> str:
        if self.on == "tool_call" and self.tools:
            return f"before a call of {', '.join(self.tools)}"
        if self.on == "tokens_over":
            return f"before a model call whose prompt passes {self.tokens} tokens"
        return BREAKPOINT_KINDS[self.on]


def breakpoint_parse(data: Any, *, id: str) -> Breakpoint:
    """A breakpoint from its JSON (BreakpointError naming what is wrong)."""
    if not isinstance(data, dict):
        raise BreakpointError("a breakpoint is an object {on, tools?, tokens?, enabled?}")
    on = data.get("on")
    if on not in BREAKPOINT_KINDS:
        raise BreakpointError(f"'on' must be one of {', '.join(BREAKPOINT_KINDS)}")
    tools = data.get("tools") or []
    if not isinstance(tools, list) or not all(isinstance(t, str) and t.strip() for t in tools):
        raise BreakpointError("'tools' must be a list of tool names")
    tokens = data.get("tokens")
    if on == "tokens_over":
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 1:
            raise BreakpointError("a tokens_over breakpoint needs 'tokens', a positive whole number")
    else:
        tokens = None
    if tools and on != "tool_call":
        raise BreakpointError("only a tool_call breakpoint names tools")
    enabled = data.get("enabled", True)
    if not isinstance(enabled, bool):
        raise BreakpointError("'enabled' must be true or false")
    return Breakpoint(id=id, on=on, tools=tuple(t.strip() for t in tools), tokens=tokens, enabled=enabled)


def breakpoints_load(stored: Sequence[dict[str, Any]]) -> list[Breakpoint]:
    """The agent's stored breakpoints (a malformed one is skipped, never fatal to a run)."""
    out = []
    for item in stored or ():
        try:
            out.append(breakpoint_parse(item, id=str(item.get("id", ""))))
        except (BreakpointError, AttributeError):
            continue
    return out


def tool_breakpoints(points: Sequence[Breakpoint], *, stepping: bool = False) -> list[ToolBreakpoint]:
    """The enabled tool_call breakpoints; stepping stops before any tool call."""
    out = [ToolBreakpoint(p.tools) for p in points if p.enabled and p.on == "tool_call"]
    return [ToolBreakpoint(())] if stepping else out


def model_call_hit(
    points: Sequence[Breakpoint], *, tokens: int, block_changed: bool, tool_failed: bool, stepping: bool = False
) -> Breakpoint | None:
    """The breakpoint that stops the run before this model call, if any (stepping stops at every one)."""
    if stepping:
        return Breakpoint(id="step", on="model_call")
    for p in points:
        if not p.enabled:
            continue
        if (
            p.on == "model_call"
            or (p.on == "tokens_over" and p.tokens is not None and tokens > p.tokens)
            or (p.on == "block_change" and block_changed)
            or (p.on == "tool_error" and tool_failed)
        ):
            return p
    return None
