"""Small hand-written agent files for tests that need no fixtures (a rich v2 agent, and a v1 one)."""

import copy
import json

TOOL_SOURCE = '''def roll_dice(sides: int) -> int:
    """Roll a die.

    Args:
        sides: How many sides the die has.
    """
    import random
    return random.randint(1, sides)
'''


def v2_doc() -> dict:
    """A v2 file with two blocks, a custom and a built-in tool, rules, secrets and a tool-call exchange."""
    msgs = [
        {"id": "message-0", "role": "system", "content": [{"type": "text", "text": "COMPILED PROMPT WITH MEMORY"}]},
        {"id": "message-1", "role": "user", "content": [{"type": "text", "text": "roll a d20"}]},
        {
            "id": "message-2",
            "role": "assistant",
            "content": [{"type": "reasoning", "is_native": True, "reasoning": "I should roll."}],
            "tool_calls": [
                {"id": "call-1", "type": "function", "function": {"name": "roll_dice", "arguments": '{"sides": 20}'}}
            ],
        },
        {
            "id": "message-3",
            "role": "tool",
            "name": "roll_dice",
            "tool_call_id": "call-1",
            "content": [{"type": "text", "text": '{"status": "OK", "message": 17}'}],
            "tool_returns": [
                {
                    "tool_call_id": "call-1",
                    "status": "success",
                    "func_response": "17",
                    "stdout": ["rolled"],
                    "stderr": None,
                }
            ],
        },
        {
            "id": "message-4",
            "role": "assistant",
            "content": [{"type": "text", "text": "Thinking about the reply."}],
            "tool_calls": [
                {
                    "id": "call-2",
                    "type": "function",
                    "function": {"name": "send_message", "arguments": '{"message": "You rolled 17."}'},
                }
            ],
        },
        {
            "id": "message-5",
            "role": "tool",
            "name": "send_message",
            "tool_call_id": "call-2",
            "content": [{"type": "text", "text": '{"status": "OK"}'}],
        },
    ]
    agent = {
        "id": "agent-0",
        "name": "dice master",
        "system": "You roll dice for people.",
        "agent_type": "memgpt_v2_agent",
        "description": "rolls dice",
        "block_ids": ["block-0", "block-1"],
        "tool_ids": ["tool-0", "tool-1"],
        "tool_rules": [
            {"tool_name": "send_message", "type": "exit_loop", "prompt_template": None},
            {"tool_name": "roll_dice", "type": "max_count_per_step", "max_count_limit": 3},
        ],
        "tags": ["games", "dice"],
        "llm_config": {
            "model": "gpt-4o-mini",
            "model_endpoint_type": "openai",
            "handle": "openai/gpt-4o-mini",
            "context_window": 16000,
            "temperature": 0.3,
            "max_tokens": 900,
            "put_inner_thoughts_in_kwargs": True,
        },
        "embedding_config": None,
        "tool_exec_environment_variables": {"DICE_API_KEY": ""},
        "secrets": None,
        "metadata": {"team": "tabletop"},
        "messages": msgs,
        "in_context_message_ids": ["message-0", "message-1", "message-2", "message-3", "message-4", "message-5"],
    }
    blocks = [
        {
            "id": "block-0",
            "label": "persona",
            "value": "I am the dice master.",
            "limit": 2000,
            "description": "who I am",
            "read_only": False,
            "metadata": {},
        },
        {
            "id": "block-1",
            "label": "rules",
            "value": "Always roll fairly.",
            "limit": 1000,
            "description": None,
            "read_only": True,
            "metadata": {"source": "house"},
        },
    ]
    tools = [
        {
            "id": "tool-0",
            "tool_type": "custom",
            "name": "roll_dice",
            "description": "Roll a die.",
            "source_type": "python",
            "source_code": TOOL_SOURCE,
            "tags": ["games"],
            "return_char_limit": 5000,
            "json_schema": {
                "name": "roll_dice",
                "description": "Roll a die.",
                "parameters": {
                    "type": "object",
                    "properties": {"sides": {"type": "integer", "description": "How many sides the die has."}},
                    "required": ["sides"],
                },
            },
        },
        {
            "id": "tool-1",
            "tool_type": "letta_core",
            "name": "send_message",
            "source_type": "python",
            "source_code": None,
            "json_schema": None,
            "tags": ["letta_core"],
        },
    ]
    return {
        "agents": [agent],
        "groups": [],
        "blocks": blocks,
        "files": [],
        "sources": [],
        "tools": tools,
        "mcp_servers": [],
        "metadata": {"revision_id": "test"},
        "created_at": None,
    }


def v1_doc() -> dict:
    """A legacy single-agent file: inline blocks and tools, messages addressed by index."""
    doc = v2_doc()
    a = doc["agents"][0]
    msgs = [{k: v for k, v in m.items() if k != "id"} for m in a["messages"]]
    return {
        "version": "0.6.47",
        "agent_type": "memgpt_agent",
        "name": a["name"],
        "system": a["system"],
        "description": None,
        "core_memory": [{k: v for k, v in b.items() if k != "id"} for b in doc["blocks"]],
        "tools": [{k: v for k, v in t.items() if k != "id"} for t in doc["tools"]],
        "tool_rules": a["tool_rules"],
        "tags": [{"tag": "games"}],
        "llm_config": a["llm_config"],
        "embedding_config": None,
        "messages": msgs,
        "in_context_message_indices": [0, 1, 2, 3, 4, 5],
        "tool_exec_environment_variables": [{"key": "DICE_API_KEY", "value": ""}],
        "metadata_": None,
        "multi_agent_group": None,
        "message_buffer_autoclear": False,
        "created_at": "2025-01-01T00:00:00",
        "updated_at": "2025-01-01T00:00:00",
    }


def dumps(doc: dict) -> bytes:
    return json.dumps(doc).encode()


def edited(doc: dict, fn) -> bytes:
    """The doc after fn(copy) mutated it, as bytes."""
    doc = copy.deepcopy(doc)
    fn(doc)
    return dumps(doc)
