"""Engine-test fixtures: plain dataclass builders, no database."""

import pytest

from core.engine import base_tools
from core.engine.types import AgentSpec, BlockSpec
from tests.core.engine.builders import MODEL


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
