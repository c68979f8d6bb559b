"""Letta-shaped JSON for agents, runs and steps (the API's response side); one function per shape. Blocks and
passages are presented by memory/presenters.py, tools and their runs by tools/presenters.py."""

from core.models import Agent
from core.selectors import agent_tags
from memory.presenters import block_out
from memory.selectors import agent_blocks, agents_blocks
from tools.presenters import tool_out
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
        "put_inner_thoughts_in_kwargs": ms.get("put_inner_thoughts", False),
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
        "compaction_settings": agent.compaction_settings or None,
    }


def run_out(run) -> dict:
    return {
        "id": run.id,
        "agent_id": run.agent_id,
        "status": run.status,
        "stop_reason": run.stop_reason or None,
        "background": run.background,
        "created_at": run.created_at,
        "completed_at": run.completed_at,
        "usage": run.usage,
        "error": run.error or None,
        "cancel_requested": run.cancel_requested,
        "max_steps": run.max_steps,
        "input_messages": run.input_messages,
        "conversation_id": run.conversation_id,
        "waiting": wait_out(run),
        "request_config": run.request_config,
    }


def step_out(step) -> dict:
    return {
        "id": step.id,
        "run_id": step.run_id,
        "agent_id": step.agent_id,
        "index": step.index,
        "kind": step.kind,
        "model": step.model,
        "request": step.request,
        "response": step.response,
        "context_sections": step.context_sections,
        "tokenizer": step.tokenizer,
        "usage": step.usage,
        "prompt_tokens": step.usage.get("prompt_tokens"),
        "completion_tokens": step.usage.get("completion_tokens"),
        "total_tokens": step.usage.get("total_tokens"),
        "model_ms": step.model_ms,
        "tools_ms": step.tools_ms,
        "total_ms": step.total_ms,
        "stop_reason": step.stop_reason or None,
        "error": step.error or None,
        "created_at": step.created_at,
    }


def wait_out(run) -> dict | None:
    """What a run waits for, for GET /v1/runs/{id} and the IDE: the kind, the calls (name and arguments) and until
    when; None when it waits for nothing."""
    if run.waiting_until is None or not run.waiting:
        return None
    return {
        "kind": run.waiting.get("kind"),
        "message_id": run.waiting.get("message_id"),
        "step_id": run.waiting.get("step_id"),
        "tool_calls": [
            {
                "tool_call_id": c["tool_call_id"],
                "name": c["name"],
                "arguments": c.get("arguments", "{}"),
                "reason": c.get("reason"),
            }
            for c in run.waiting.get("calls", [])
        ],
        "deferred": list(run.waiting.get("deferred", [])),
        "before": run.waiting.get("before", "tool_call"),  # model_call: a breakpoint stopped it before the call
        "why": run.waiting.get("why"),
        "breakpoint": run.waiting.get("breakpoint"),
        "tokens": run.waiting.get("tokens"),
        "since": run.waiting.get("since"),
        "expires_at": run.waiting_until.isoformat(),
    }
