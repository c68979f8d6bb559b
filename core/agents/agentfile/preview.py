"""What importing a parsed file would create, for the IDE's confirm step (pure: the caller supplies lookups)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from core.agents.agentfile.model import ParsedFile


def preview(
    parsed: ParsedFile,
    *,
    model_configured: Callable[[str], bool] = lambda handle: False,
    existing_tools: Mapping[str, str] | None = None,
    tool_policy: str = "reuse",
    model_override: str | None = None,
    name_override: str | None = None,
    strip_messages: bool = False,
) -> dict[str, Any]:
    """A JSON-ready summary: per agent its name, model (+ configured flag), blocks, tools and their fate, counts.

    `existing_tools` maps the owner's custom tool names to their source code; a tool's status is
    builtin | new | reused (same code, or policy reuse) | overridden (policy override, different code).
    """
    existing = existing_tools or {}
    agents = []
    for a in parsed.agents:
        handle = model_override or a.model
        tools = []
        for key in a.tool_keys:
            t = parsed.tools[key]
            if t.builtin:
                status = "builtin"
            elif t.name not in existing:
                status = "new"
            elif tool_policy == "override" and existing[t.name] != t.source_code:
                status = "overridden"
            else:
                status = "reused"
            tools.append(
                {"name": t.name, "status": status, "changed": t.name in existing and existing[t.name] != t.source_code}
            )
        agents.append(
            {
                "name": name_override or a.name,
                "model": handle,
                "model_configured": bool(handle) and model_configured(handle),
                "context_window": a.context_window,
                "system_chars": len(a.system),
                "blocks": [
                    {
                        "label": parsed.blocks[k].label,
                        "chars": len(parsed.blocks[k].value),
                        "limit": parsed.blocks[k].limit,
                        "read_only": parsed.blocks[k].read_only,
                    }
                    for k in a.block_keys
                ],
                "tools": tools,
                "tool_rules": len(a.tool_rules),
                "tags": list(a.tags),
                "secrets": sorted(a.secrets),
                "message_count": 0 if strip_messages else len(a.messages),
                "in_context_count": 1 if strip_messages else len(a.in_context),
                "passages": len(a.passages),
            }
        )
    return {"version": parsed.version, "agents": agents, "warnings": list(parsed.warnings)}
