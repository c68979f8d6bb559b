"""What importing a parsed file would create, for the IDE's confirm step (pure: the caller supplies lookups)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from core.agents.agentfile.model import ParsedAgent, ParsedFile


def preview(
    parsed: ParsedFile,
    *,
    model_configured: Callable[[str], bool] = lambda handle: False,
    existing_tools: Mapping[str, str] | None = None,
    tool_policy: str = "reuse",
    model_override: str | None = None,
    name_override: str | None = None,
    strip_messages: bool = False,
    existing_folders: Collection[str] = (),
) -> dict[str, Any]:
    """A JSON-ready summary: per agent its name, model (+ configured flag), blocks, tools and their fate, folders
    and their files, counts.

    `existing_tools` maps the owner's custom tool names to their source code; a tool's status is
    builtin | new | reused (same code, or policy reuse) | overridden (policy override, different code).
    `existing_folders`: the names of the owner's folders, which an import attaches instead of creating.
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
                "folders": _folders(parsed, a, existing_folders),
            }
        )
    return {"version": parsed.version, "agents": agents, "warnings": list(parsed.warnings)}


def _folders(parsed: ParsedFile, agent: ParsedAgent, existing: Collection[str]) -> list[dict[str, Any]]:
    """The folders the agent is attached to: each one's name, whether the owner has it already (attached, its files
    of the same names kept), and its files with their sizes in bytes and whether the agent has them open."""
    open_keys = {v.file_key for v in agent.file_views if v.is_open}
    out = []
    for key in agent.source_keys:
        files = [
            {"name": f.file_name, "bytes": len(f.content.encode()), "open": f.key in open_keys}
            for f in parsed.files.values()
            if f.source_key == key
        ]
        name = parsed.sources[key].name
        out.append(
            {
                "name": name,
                "exists": name in existing,
                "files": files,
                "file_count": len(files),
                "bytes": sum(f["bytes"] for f in files),
                "open_count": sum(f["open"] for f in files),
            }
        )
    return out
