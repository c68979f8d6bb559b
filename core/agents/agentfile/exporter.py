"""Write an agent as a Letta v2 agent file: the shape Letta's AgentFileSchema validates.

File-local ids (`agent-0`, `block-0`, `tool-0`, `message-0`) replace ours. Secrets keep their names with
blank values ("" rather than null: Letta's schema types them Dict[str, str]). Archival passages, which
Letta's format has no place for, go in the agent's free-form `metadata` under ARCHIVAL_METADATA_KEY when
asked for; Letta accepts and ignores them, our importer restores them. The agent's folders, their processed files
(with their text) and its views of them go in `sources`, `files` and `files_agents` (core.agents.agentfile.folders).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from core.agents import agent_tests
from core.agents.agentfile.folders import folders_export
from core.agents.agentfile.mcp_servers import mcp_servers_export
from core.agents.agentfile.model import ARCHIVAL_METADATA_KEY, HISTORY_METADATA_KEY, MAX_MESSAGES, MAX_PASSAGES
from core.agents.versions import history_export
from core.engine.base_tools import LETTA_TYPE_OF_BASE, MEMORY_EDIT_TOOLS
from core.models import Agent, Message
from core.selectors import agent_tags
from memory.models import Passage
from memory.selectors import agent_blocks
from tools.presenters import letta_tool_type
from tools.selectors import agent_tools

FORMAT_REVISION = "agents-ide-1"
_LETTA_ENDPOINT_TYPES = frozenset(
    {
        "openai",
        "anthropic",
        "google_ai",
        "google_vertex",
        "azure",
        "groq",
        "ollama",
        "lmstudio",
        "llamacpp",
        "koboldcpp",
        "vllm",
        "mistral",
        "together",
        "bedrock",
        "deepseek",
        "xai",
        "fireworks",
        "openrouter",
    }
)


def agentfile_export(
    *, agent: Agent, include_archival: bool = False, scrub_messages: bool = False, include_history: bool = False
) -> dict[str, Any]:
    """The agent as a v2 agent file (a JSON-ready dict), its current definition and optionally its version history."""

    blocks = agent_blocks(agent=agent)
    tools = agent_tools(agent=agent)
    messages, window = ([], []) if scrub_messages else _messages(agent)
    msg_keys = {m.id: f"message-{i}" for i, m in enumerate(messages)}
    metadata = dict(agent.metadata or {})
    tests = agent_tests.tests_list(agent=agent)
    if tests:  # stored as cases of the agent's tests dataset; the file carries them where older files did
        metadata[agent_tests.METADATA_KEY] = tests
    if include_archival:
        metadata[ARCHIVAL_METADATA_KEY] = _passages(agent)
    if include_history:
        metadata[HISTORY_METADATA_KEY] = history_export(agent=agent)
    agent_out = _agent(agent, metadata)
    folders = folders_export(agent=agent)
    agent_out.update(
        {
            "block_ids": [f"block-{i}" for i in range(len(blocks))],
            "tool_ids": [f"tool-{i}" for i in range(len(tools))],
            "id": "agent-0",
            "in_context_message_ids": [msg_keys[i] for i in window if i in msg_keys],
            "messages": [_message(m, msg_keys[m.id], agent) for m in messages],
            "files_agents": folders["files_agents"],
            "source_ids": folders["source_ids"],
            "group_ids": [],
        }
    )
    return {
        "agents": [agent_out],
        "groups": [],
        "blocks": [_block(b, f"block-{i}") for i, b in enumerate(blocks)],
        "files": folders["files"],
        "sources": folders["sources"],
        "tools": [_tool(t, f"tool-{i}") for i, t in enumerate(tools)],
        "mcp_servers": mcp_servers_export(tools),
        "metadata": {"revision_id": FORMAT_REVISION},
        "created_at": datetime.now(UTC).isoformat(),
    }


def _messages(agent: Agent) -> tuple[list[Message], list[str]]:
    """All messages in seq order; past the import limit, the window plus the newest of the rest."""
    window = list(agent.message_ids or [])
    qs = Message.objects.filter(agent=agent).order_by("seq")
    total = qs.count()
    if total <= MAX_MESSAGES:
        return list(qs), window
    keep = set(window) | set(
        qs.exclude(id__in=window).order_by("-seq").values_list("id", flat=True)[: MAX_MESSAGES - len(window)]
    )
    return list(qs.filter(id__in=keep)), window


def _passages(agent: Agent) -> list[dict[str, Any]]:
    rows = Passage.objects.filter(agent=agent).order_by("created_at", "id")[:MAX_PASSAGES]
    return [{"text": p.text, "tags": list(p.tags or []), "created_at": p.created_at.isoformat()} for p in rows]


def _llm_config(agent: Agent) -> dict[str, Any]:
    provider, _, name = agent.model.partition("/")
    ms = agent.model_settings or {}
    return {
        "model": name or agent.model,
        "model_endpoint_type": provider if provider in _LETTA_ENDPOINT_TYPES else "openai",
        "model_endpoint": None,
        "provider_name": provider or None,
        "provider_category": "base",
        "model_wrapper": None,
        "context_window": agent.context_window_limit,
        "put_inner_thoughts_in_kwargs": bool(ms.get("put_inner_thoughts", False)),
        "handle": agent.model,
        "temperature": ms.get("temperature", 0.7),
        "max_tokens": ms.get("max_tokens"),
        "enable_reasoner": bool(ms.get("enable_reasoner", False)),
        "reasoning_effort": ms.get("reasoning_effort"),
        "max_reasoning_tokens": ms.get("max_reasoning_tokens", 0),
        "frequency_penalty": ms.get("frequency_penalty"),
        "compatibility_type": None,
        "verbosity": None,
        "tier": None,
        **({"parallel_tool_calls": ms["parallel_tool_calls"]} if "parallel_tool_calls" in ms else {}),
    }


def _embedding_config(agent: Agent) -> dict[str, Any] | None:
    if not agent.embedding:
        return None
    provider, _, name = agent.embedding.partition("/")
    cfg = agent.embedding_config or {}
    return {
        "embedding_endpoint_type": provider if provider in _LETTA_ENDPOINT_TYPES else "openai",
        "embedding_endpoint": None,
        "embedding_model": name or agent.embedding,
        "embedding_dim": cfg.get("embedding_dim", 0),
        "embedding_chunk_size": cfg.get("embedding_chunk_size", 300),
        "handle": agent.embedding,
        "batch_size": 32,
        "azure_endpoint": None,
        "azure_version": None,
        "azure_deployment": None,
    }


def legacy_from_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Letta's legacy (v1) single-agent file from our v2 export of one agent: blocks and tools inline, the window as
    message indices, tags and secrets in the v1 shapes. Reads only; our v1 reader round-trips it."""
    agent = data["agents"][0]
    blocks = {b["id"]: {k: v for k, v in b.items() if k != "id"} for b in data["blocks"]}
    tools = {t["id"]: {k: v for k, v in t.items() if k != "id"} for t in data["tools"]}
    index = {m["id"]: i for i, m in enumerate(agent["messages"])}
    messages = [{k: v for k, v in m.items() if k not in ("id", "agent_id", "type")} for m in agent["messages"]]
    return {
        "agent_type": agent["agent_type"],
        "name": agent["name"],
        "description": agent["description"],
        "system": agent["system"],
        "llm_config": agent["llm_config"],
        "embedding_config": agent["embedding_config"],
        "core_memory": [blocks[k] for k in agent["block_ids"]],
        "tools": [tools[k] for k in agent["tool_ids"]],
        "tool_rules": agent["tool_rules"],
        "tags": [{"tag": t} for t in agent["tags"]],
        "tool_exec_environment_variables": [
            {"key": k, "value": v} for k, v in agent["tool_exec_environment_variables"].items()
        ],
        "messages": messages,
        "in_context_message_indices": [index[k] for k in agent["in_context_message_ids"]],
        "metadata_": agent["metadata"],
        "message_buffer_autoclear": agent["message_buffer_autoclear"],
        "multi_agent_group": None,
        "created_at": data["created_at"],
        "updated_at": data["created_at"],
        "version": "0.1.0",
    }


def _agent(agent: Agent, metadata: dict[str, Any]) -> dict[str, Any]:
    blank = dict.fromkeys(agent.secrets or {}, "")
    return {
        "name": agent.name,
        "memory_blocks": [],
        "tools": [],
        "tool_ids": [],
        "source_ids": [],
        "block_ids": [],
        "tool_rules": [dict(r, prompt_template=r.get("prompt_template")) for r in agent.tool_rules or []],
        "tags": agent_tags(agent),
        "system": agent.system,
        "agent_type": agent.agent_type,
        "llm_config": _llm_config(agent),
        "embedding_config": _embedding_config(agent),
        "initial_message_sequence": None,
        "include_base_tools": False,
        "include_multi_agent_tools": False,
        "include_base_tool_rules": False,
        "include_default_source": False,
        "description": agent.description or None,
        "metadata": metadata or None,
        "model": None,
        "embedding": None,
        "context_window_limit": agent.context_window_limit,
        "embedding_chunk_size": None,
        "max_tokens": None,
        "max_reasoning_tokens": None,
        "enable_reasoner": False,
        "reasoning": None,
        "from_template": None,
        "template": False,
        "project": None,
        "tool_exec_environment_variables": blank,
        "secrets": blank or None,
        "memory_variables": None,
        "project_id": None,
        "template_id": None,
        "base_template_id": None,
        "identity_ids": None,
        "message_buffer_autoclear": False,
        "enable_sleeptime": False,
        "response_format": None,
        "timezone": "UTC",
        "max_files_open": 5,
        "per_file_view_window_char_limit": 15000,
        "hidden": None,
    }


def _block(block, key: str) -> dict[str, Any]:
    return {
        "value": block.value,
        "limit": block.limit,
        "project_id": None,
        "template_name": None,
        "is_template": False,
        "template_id": None,
        "base_template_id": None,
        "deployment_id": None,
        "entity_id": None,
        "preserve_on_migration": False,
        "label": block.label,
        "read_only": block.read_only,
        "description": block.description or None,
        "metadata": block.metadata or {},
        "hidden": None,
        "id": key,
    }


def _tool(tool, key: str) -> dict[str, Any]:
    core_edit = tool.name in MEMORY_EDIT_TOOLS and tool.name not in LETTA_TYPE_OF_BASE
    kind = "letta_memory_core" if core_edit else letta_tool_type(tool)
    return {
        "id": key,
        "tool_type": kind,
        "description": tool.description or None,
        "source_type": "python",
        "name": tool.name,
        "tags": list(tool.tags or []),
        "source_code": tool.source_code or None,
        "json_schema": tool.json_schema or None,
        "args_json_schema": None,
        "return_char_limit": tool.return_char_limit,
        "pip_requirements": list(tool.pip_requirements or []) or None,
        "npm_requirements": None,
        "default_requires_approval": tool.default_requires_approval,
        "created_by_id": None,
        "last_updated_by_id": None,
        "metadata_": {"mcp": {"server_name": tool.mcp_server.server_name}} if tool.mcp_server_id else {},
    }


def _message(m: Message, key: str, agent: Agent) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if m.reasoning:
        signed = [b.get("signature") for b in m.thinking_blocks or () if isinstance(b, dict) and b.get("signature")]
        content.append(
            {
                "type": "reasoning",
                "is_native": m.reasoning_source == "native",
                "reasoning": m.reasoning,
                "signature": signed[-1] if signed else None,
            }
        )
    if m.body:
        content.append({"type": "text", "text": m.body, "signature": None})
    calls = [
        {"id": c["id"], "function": {"arguments": c.get("arguments", "{}"), "name": c["name"]}, "type": "function"}
        for c in m.tool_calls or []
    ]
    returns = []
    if m.role == "tool" and m.tool_return:
        tr = m.tool_return
        returns = [
            {
                "tool_call_id": m.tool_call_id,
                "status": tr.get("status", "success"),
                "func_response": m.text,
                "stdout": _lines(tr.get("stdout")),
                "stderr": _lines(tr.get("stderr")),
            }
        ]
    return {
        "type": "message",
        "role": m.role,
        "content": content,
        "name": m.name or None,
        "otid": m.otid or None,
        "sender_id": None,
        "batch_item_id": None,
        "group_id": None,
        "id": key,
        "model": agent.model.partition("/")[2] or agent.model,
        "agent_id": "agent-0",
        "tool_calls": calls or None,
        "tool_call_id": m.tool_call_id or None,
        "tool_returns": returns,
        "created_at": m.created_at.isoformat(),
        "approve": None,
        "approval_request_id": None,
        "denial_reason": None,
    }


def _lines(value: Any) -> list[str] | None:
    if not value:
        return None
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]
