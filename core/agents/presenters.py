"""Letta-shaped JSON for stored objects (the API's response side); one function per shape."""

from core.models import Agent
from core.selectors import agent_tags
from memory.selectors import agent_blocks, agents_blocks
from tools.selectors import agent_tools, agents_tools


def llm_config(agent: Agent) -> dict:
    provider, _, name = agent.model.partition("/")
    ms = agent.model_settings or {}
    return {
        "model": name or agent.model,
        "handle": agent.model,
        "model_endpoint_type": provider or "openai",
        "model_endpoint": ms.get("model_endpoint"),
        "provider_name": provider,
        "context_window": agent.context_window_limit,
        "temperature": ms.get("temperature", 0.7),
        "max_tokens": ms.get("max_tokens"),
        "put_inner_thoughts_in_kwargs": ms.get("put_inner_thoughts", True),
        "enable_reasoner": ms.get("enable_reasoner", False),
    }


def embedding_config(agent: Agent) -> dict | None:
    if not agent.embedding:
        return None
    provider, _, name = agent.embedding.partition("/")
    cfg = {
        "embedding_model": name or agent.embedding,
        "embedding_endpoint_type": provider or "openai",
        "handle": agent.embedding,
        "embedding_dim": 0,
        "embedding_chunk_size": 300,
    }
    cfg.update(agent.embedding_config or {})
    return cfg


def block_out(block) -> dict:
    return {
        "id": block.id,
        "label": block.label,
        "value": block.value,
        "limit": block.limit,
        "description": block.description,
        "read_only": block.read_only,
        "metadata": block.metadata or {},
        "version": block.version,
        "created_at": block.created_at,
        "updated_at": block.updated_at,
    }


def tool_out(tool) -> dict:
    return {
        "id": tool.id,
        "name": tool.name,
        "tool_type": {
            "base": "letta_core",
            "multi_agent": "letta_multi_agent_core",
            "external_mcp": "external_mcp",
        }.get(tool.tool_type, "custom"),
        "description": tool.description,
        "source_code": tool.source_code,
        "source_type": "python",
        "json_schema": tool.json_schema,
        "tags": tool.tags,
        "return_char_limit": tool.return_char_limit,
        "pip_requirements": tool.pip_requirements,
        "sandbox": tool.sandbox or None,
        "created_at": tool.created_at,
        "updated_at": tool.updated_at,
    }


def agents_state(agents: list[Agent]) -> list[dict]:
    """agent_state of many agents, their blocks and tools read in one query each (not one per agent)."""

    ids = [a.id for a in agents]
    blocks, tools = agents_blocks(agent_ids=ids), agents_tools(agent_ids=ids)
    return [agent_state(a, blocks=blocks[a.id], tools=tools[a.id]) for a in agents]


def agent_state(agent: Agent, *, blocks=None, tools=None, tags=None) -> dict:
    """The AgentState shape of Letta's API (blocks, tools and tags passed in when already loaded)."""

    blocks = agent_blocks(agent=agent) if blocks is None else blocks
    tools = agent_tools(agent=agent) if tools is None else tools
    block_dicts = [block_out(b) for b in blocks]
    return {
        "id": agent.id,
        "name": agent.name,
        "description": agent.description,
        "system": agent.system,
        "agent_type": agent.agent_type,
        "model": agent.model,
        "embedding": agent.embedding or None,
        "llm_config": llm_config(agent),
        "embedding_config": embedding_config(agent),
        "context_window_limit": agent.context_window_limit,
        "memory": {"blocks": block_dicts, "agent_type": agent.agent_type},
        "blocks": block_dicts,
        "tools": [tool_out(t) for t in tools],
        "tool_rules": agent.tool_rules,
        "tags": agent_tags(agent) if tags is None else tags,
        "metadata": agent.metadata or {},
        "secrets": [{"key": k, "value": None} for k in (agent.secrets or {})],
        "tool_exec_environment_variables": [{"key": k, "value": None} for k in (agent.secrets or {})],
        "message_ids": agent.message_ids,
        "max_steps": agent.max_steps,
        "overflow_strategy": agent.overflow_strategy,
        "created_at": agent.created_at,
        "updated_at": agent.updated_at,
        "last_stop_reason": agent.last_stop_reason or None,
        "last_run_completion": agent.last_run_completion,
    }
