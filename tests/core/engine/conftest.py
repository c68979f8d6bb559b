"""Engine-test fixtures: plain dataclass builders, no database."""

import pytest

from core.engine import base_tools, tokens
from core.engine.types import AgentSpec, BlockSpec, Message, Role, ToolCall

MODEL = "openai/fake-model"


@pytest.fixture
def agent() -> AgentSpec:
    return AgentSpec(id="agent-1", name="sam", system="You are Sam, a helpful agent.", model=MODEL)


@pytest.fixture
def blocks() -> list[BlockSpec]:
    return [
        BlockSpec(id="block-1", label="persona", value="I am Sam.", limit=200, description="Who I am."),
        BlockSpec(id="block-2", label="human", value="Name: Bob", limit=100, description="The user.", read_only=True),
    ]


@pytest.fixture
def tools():
    return base_tools.base_tool_specs()


def msg(i: int, role: Role = Role.USER, content: str = "", **kw) -> Message:
    m = Message(id=f"message-{i}", role=role, content=content or f"message number {i}", **kw)
    return tokens.with_token_count(MODEL, m)


def tool_exchange(i: int, name: str = "core_memory_append") -> list[Message]:
    call = ToolCall(id=f"call-{i}", name=name, arguments='{"label": "human", "content": "x"}')
    return [msg(i, Role.ASSISTANT, " ", tool_calls=(call,)), msg(i + 1, Role.TOOL, '{"status": "OK"}', tool_call_id=f"call-{i}", name=name)]
