"""Read an agent file (Letta v2 or legacy v1) into a ParsedFile, refusing anything malformed or hostile.

Pure: no database, no network. Every refusal is an AgentFileError naming the JSON path. Choices:
- the in-context system message's text becomes the raw `system` prompt. Letta stores the compiled prompt
  there (memory blocks rendered in); our compiler renders memory itself on every step, so storing the
  rendered copy would show the blocks twice and go stale.
- tool rules of types our engine does not know are dropped with a warning (`requires_approval` is kept, and so
  is a tool's `default_requires_approval`).
- groups are not imported (warned), their agents are; folders and their files are (core.agents.agentfile.folders).
"""

from __future__ import annotations

from typing import Any

from core.agents.agentfile import checks as c
from core.agents.agentfile import normalize as n
from core.agents.agentfile.folders import agent_folders_parse, sources_parse
from core.agents.agentfile.mcp_servers import mcp_servers_parse
from core.agents.agentfile.model import (
    ARCHIVAL_METADATA_KEY,
    HISTORY_METADATA_KEY,
    MAX_AGENTS,
    MAX_BLOCKS,
    MAX_MESSAGES,
    MAX_NAME,
    MAX_PASSAGES,
    MAX_SYSTEM,
    MAX_TOOLS,
    MAX_VERSIONS,
    AgentFileError,
    ParsedAgent,
    ParsedBlock,
    ParsedFile,
    ParsedMessage,
    ParsedPassage,
    ParsedTool,
)
from core.engine.base_tools import is_installed_builtin


def parse_agent_file(raw: bytes | str | dict) -> ParsedFile:
    """Validate and normalize an agent file (bytes, text or decoded JSON); raises AgentFileError (422)."""
    data = c.load_json(raw) if isinstance(raw, bytes | str) else raw
    if isinstance(raw, dict):
        c.check_bounds(data)
    if not isinstance(data, dict):
        raise AgentFileError("", "an agent file is a JSON object")
    warn: list[str] = []
    if "agents" in data:
        return _v2(data, warn)
    if "core_memory" in data or "in_context_message_indices" in data:
        return _v1(data, warn)
    raise AgentFileError("", "not an agent file: it has neither an 'agents' list (v2) nor 'core_memory' (v1)")


# --------------------------------------------------------------------------- v2


def _v2(d: dict, warn: list[str]) -> ParsedFile:
    c.obj(d, "", c.V2_TOP)

    mcp_servers = mcp_servers_parse(d.get("mcp_servers"), warn)
    if c.lst(d.get("groups"), "groups", limit=1000):
        warn.append("The file's groups are not supported here and were not imported.")
    sources, files = sources_parse(d, warn)
    c.obj(d.get("metadata") or {}, "metadata")
    blocks: dict[str, ParsedBlock] = {}
    seen: set[str] = set()
    for i, b in enumerate(c.lst(d.get("blocks"), "blocks", limit=MAX_BLOCKS)):
        key = c.unique_key(c.obj(b, f"blocks[{i}]").get("id"), f"blocks[{i}].id", seen)
        blocks[key] = n.block(b, f"blocks[{i}]", key, warn)
    tools, all_tool_keys = _tools(c.lst(d.get("tools"), "tools", limit=MAX_TOOLS), "tools", warn, keyed=True)
    agents_raw = c.lst(d.get("agents"), "agents", limit=MAX_AGENTS, optional=False)
    if not agents_raw:
        raise AgentFileError("agents", "the file has no agents")
    agent_keys: set[str] = set()
    message_keys: set[str] = set()
    agents = tuple(
        _agent_v2(a, f"agents[{i}]", blocks, tools, all_tool_keys, agent_keys, message_keys, warn, sources, files)
        for i, a in enumerate(agents_raw)
    )
    return ParsedFile(
        version="v2",
        agents=agents,
        blocks=blocks,
        tools=tools,
        warnings=tuple(dict.fromkeys(warn)),
        mcp_servers=mcp_servers,
        sources=sources,
        files=files,
    )


def _tools(raw: list, path: str, warn: list[str], *, keyed: bool) -> tuple[dict[str, ParsedTool], set[str]]:
    """The file's tools by key (Letta built-ins we lack are left out) and every key the file declares."""
    tools: dict[str, ParsedTool] = {}
    keys: set[str] = set()
    names: dict[str, str] = {}
    for i, t in enumerate(raw):
        p = c.join(path, i)
        key = c.unique_key(c.obj(t, p).get("id"), c.join(p, "id"), keys) if keyed else f"tool-{i}"
        keys.add(key)
        parsed = n.tool(t, p, key, warn)
        if parsed is None:
            continue
        if parsed.name in names:
            raise AgentFileError(c.join(p, "name"), f"duplicate tool name {parsed.name!r} (also {names[parsed.name]})")
        names[parsed.name] = p
        tools[key] = parsed
    return tools, keys


def _refs(raw: Any, path: str, known: set[str] | dict, what: str, limit: int) -> list[str]:
    out: list[str] = []
    for i, ref in enumerate(c.lst(raw, path, limit=limit)):
        key = c.string(ref, c.join(path, i), optional=False, limit=200)
        if key not in known:
            raise AgentFileError(c.join(path, i), f"references {what} {key!r}, which is not in the file")
        if key in out:
            raise AgentFileError(c.join(path, i), f"lists {what} {key!r} twice")
        out.append(key)
    return out


def _agent_v2(
    a: Any,
    path: str,
    blocks: dict[str, ParsedBlock],
    tools: dict[str, ParsedTool],
    all_tool_keys: set[str],
    agent_keys: set[str],
    message_keys: set[str],
    warn: list[str],
    sources: dict,
    files: dict,
) -> ParsedAgent:
    d = c.obj(a, path, c.V2_AGENT)
    key = c.unique_key(d.get("id"), c.join(path, "id"), agent_keys)
    block_keys = _refs(d.get("block_ids"), c.join(path, "block_ids"), blocks, "block", MAX_BLOCKS)
    for i, b in enumerate(c.lst(d.get("memory_blocks"), c.join(path, "memory_blocks"), limit=MAX_BLOCKS)):
        inline = f"{key}/memory_blocks[{i}]"
        blocks[inline] = n.block(b, c.join(c.join(path, "memory_blocks"), i), inline, warn)
        block_keys.append(inline)
    _unique_labels(block_keys, blocks, c.join(path, "block_ids"))
    tool_keys = [
        k for k in _refs(d.get("tool_ids"), c.join(path, "tool_ids"), all_tool_keys, "tool", MAX_TOOLS) if k in tools
    ]
    tool_keys += _builtin_names(d.get("tools"), c.join(path, "tools"), tools)
    msgs_raw = c.lst(d.get("messages"), c.join(path, "messages"), limit=MAX_MESSAGES)
    keys = [
        c.unique_key(
            c.obj(m, c.join(c.join(path, "messages"), i)).get("id"),
            c.join(c.join(path, "messages"), i) + ".id",
            message_keys,
        )
        for i, m in enumerate(msgs_raw)
    ]
    window = _refs(
        d.get("in_context_message_ids"), c.join(path, "in_context_message_ids"), set(keys), "message", MAX_MESSAGES
    )
    secrets = {
        **n.secrets(d.get("tool_exec_environment_variables"), c.join(path, "tool_exec_environment_variables")),
        **n.secrets(d.get("secrets"), c.join(path, "secrets")),
    }
    metadata = dict(c.obj(d.get("metadata") or {}, c.join(path, "metadata")))
    passages = _passages(
        metadata.pop(ARCHIVAL_METADATA_KEY, None), c.join(c.join(path, "metadata"), ARCHIVAL_METADATA_KEY)
    )
    history = c.lst(
        metadata.pop(HISTORY_METADATA_KEY, None),
        c.join(c.join(path, "metadata"), HISTORY_METADATA_KEY),
        limit=MAX_VERSIONS,
    )
    handle, settings, window_size = n.model(d.get("llm_config"), d.get("model"), path)
    limit = c.integer(d.get("context_window_limit"), c.join(path, "context_window_limit"), low=1024, high=10_000_000)
    emb, emb_cfg = n.embedding(d.get("embedding_config"), c.join(path, "embedding_config"))
    source_keys, file_views = agent_folders_parse(d, path, sources, files)
    return _finish(
        path,
        warn,
        key=key,
        name=d.get("name"),
        system=d.get("system"),
        description=d.get("description"),
        agent_type=d.get("agent_type"),
        model=handle,
        model_settings=settings,
        context_window=limit or window_size,
        embedding=c.string(d.get("embedding"), c.join(path, "embedding"), limit=MAX_NAME) or emb,
        embedding_config=emb_cfg,
        tool_rules=n.tool_rules(d.get("tool_rules"), c.join(path, "tool_rules"), warn),
        tags=n.tags(d.get("tags"), c.join(path, "tags")),
        secrets=secrets,
        metadata=metadata,
        block_keys=tuple(block_keys),
        tool_keys=tuple(tool_keys),
        passages=passages,
        history=tuple(history),
        source_keys=source_keys,
        file_views=file_views,
        messages_raw=msgs_raw,
        message_keys=keys,
        window=window,
        window_path=c.join(path, "in_context_message_ids"),
        tools=tools,
    )


def _builtin_names(raw: Any, path: str, tools: dict[str, ParsedTool]) -> list[str]:
    """CreateAgent's `tools: [names]`: only built-in names can be honoured (others would be undefined)."""

    out = []
    for i, name in enumerate(c.lst(raw, path, limit=MAX_TOOLS)):
        name = c.string(name, c.join(path, i), optional=False, limit=200)
        if not is_installed_builtin(name):
            raise AgentFileError(
                c.join(path, i), f"names tool {name!r}, which is neither built in nor in the file's tools"
            )
        key = f"builtin:{name}"
        tools.setdefault(key, ParsedTool(key=key, name=name, builtin=True, letta_type="letta_core"))
        out.append(key)
    return out


def _unique_labels(block_keys: list[str], blocks: dict[str, ParsedBlock], path: str) -> None:
    labels: dict[str, int] = {}
    for i, k in enumerate(block_keys):
        label = blocks[k].label
        if label in labels:
            raise AgentFileError(
                c.join(path, i), f"a second block labelled {label!r} (a label may appear once per agent)"
            )
        labels[label] = i


def _passages(raw: Any, path: str) -> tuple[ParsedPassage, ...]:
    out = []
    for i, p in enumerate(c.lst(raw, path, limit=MAX_PASSAGES)):
        pp = c.join(path, i)
        d = c.obj(p, pp)
        text = c.string(d.get("text"), c.join(pp, "text"), optional=False)
        tags = tuple(
            c.string(t, c.join(c.join(pp, "tags"), j), limit=100)
            for j, t in enumerate(c.lst(d.get("tags"), c.join(pp, "tags"), limit=100))
        )
        out.append(ParsedPassage(text=text, tags=tags))
    return tuple(out)


# --------------------------------------------------------------------------- v1


def _v1(d: dict, warn: list[str]) -> ParsedFile:
    c.obj(d, "", c.V1_TOP)
    if d.get("multi_agent_group") is not None:
        warn.append("The file's multi_agent_group is not supported here and was not imported.")
    blocks = {
        f"block-{i}": n.block(b, f"core_memory[{i}]", f"block-{i}", warn)
        for i, b in enumerate(c.lst(d.get("core_memory"), "core_memory", limit=MAX_BLOCKS))
    }
    _unique_labels(list(blocks), blocks, "core_memory")
    tools, _ = _tools(c.lst(d.get("tools"), "tools", limit=MAX_TOOLS), "tools", warn, keyed=False)
    msgs_raw = c.lst(d.get("messages"), "messages", limit=MAX_MESSAGES)
    keys = [f"message-{i}" for i in range(len(msgs_raw))]
    window: list[str] = []
    for i, idx in enumerate(
        c.lst(d.get("in_context_message_indices"), "in_context_message_indices", limit=MAX_MESSAGES)
    ):
        p = f"in_context_message_indices[{i}]"
        idx = c.integer(idx, p, low=0, high=max(len(msgs_raw) - 1, 0), optional=False)
        if not msgs_raw:
            raise AgentFileError(p, "references a message, but the file has no messages")
        if keys[idx] in window:
            raise AgentFileError(p, f"lists message {idx} twice")
        window.append(keys[idx])
    handle, settings, window_size = n.model(d.get("llm_config"), None, "")
    emb, emb_cfg = n.embedding(d.get("embedding_config"), "embedding_config")
    agent = _finish(
        "",
        warn,
        key="agent-0",
        name=d.get("name"),
        system=d.get("system"),
        description=d.get("description"),
        agent_type=d.get("agent_type"),
        model=handle,
        model_settings=settings,
        context_window=window_size,
        embedding=emb,
        embedding_config=emb_cfg,
        tool_rules=n.tool_rules(d.get("tool_rules"), "tool_rules", warn),
        tags=n.tags(d.get("tags"), "tags"),
        secrets=n.secrets(d.get("tool_exec_environment_variables"), "tool_exec_environment_variables"),
        metadata=dict(c.obj(d.get("metadata_") or {}, "metadata_")),
        block_keys=tuple(blocks),
        tool_keys=tuple(tools),
        passages=(),
        messages_raw=msgs_raw,
        message_keys=keys,
        window=window,
        window_path="in_context_message_indices",
        tools=tools,
    )
    return ParsedFile(version="v1", agents=(agent,), blocks=blocks, tools=tools, warnings=tuple(dict.fromkeys(warn)))


# --------------------------------------------------------------------------- shared


def _finish(
    path: str,
    warn: list[str],
    *,
    name: Any,
    system: Any,
    description: Any,
    agent_type: Any,
    messages_raw: list,
    message_keys: list[str],
    window: list[str],
    window_path: str,
    tools: dict[str, ParsedTool],
    **fields,
) -> ParsedAgent:
    name = c.string(name, c.join(path, "name"), limit=MAX_NAME).strip() or "imported agent"
    system = c.string(system, c.join(path, "system"), limit=MAX_SYSTEM)
    msgs, became = n.messages(messages_raw, c.join(path, "messages"), message_keys, warn)
    in_context = [k for fk in window for k in became[fk]]
    if any(not became[fk] for fk in window):
        warn.append(
            f"Agent '{name}': approval responses were left out of the context window (their results follow as tool messages)."
        )
    msgs, in_context = _system_first(msgs, in_context, window_path, system, fields["key"])
    attached = {tools[k].name for k in fields["tool_keys"]}
    unknown = sorted({r["tool_name"] for r in fields["tool_rules"]} - attached)
    if unknown:
        warn.append(f"Agent '{name}': tool rules mention tools it does not have: {', '.join(unknown)}.")
    return ParsedAgent(
        name=name,
        system=system,
        description=c.string(description, c.join(path, "description"), limit=10_000),
        agent_type=c.string(agent_type, c.join(path, "agent_type"), limit=50) or "memgpt_v2_agent",
        messages=tuple(msgs),
        in_context=tuple(in_context),
        **fields,
    )


def _system_first(
    msgs: list[ParsedMessage], in_context: list[str], path: str, system: str, agent_key: str
) -> tuple[list[ParsedMessage], list[str]]:
    """Check the window opens with the system message and give that message the raw system prompt.

    A file without a window (no messages, or none in context) gets a fresh system message, first in order.
    """
    if not in_context:
        fresh = ParsedMessage(key=f"{agent_key}/system", role="system", text=system)
        return [fresh, *msgs], [fresh.key]
    first = next(m for m in msgs if m.key == in_context[0])
    if first.role != "system":
        raise AgentFileError(
            f"{path}[0]", f"the context window must start with the system message, not a {first.role} message"
        )
    return [
        ParsedMessage(key=m.key, role="system", text=system, created_at=m.created_at) if m.key == first.key else m
        for m in msgs
    ], in_context
