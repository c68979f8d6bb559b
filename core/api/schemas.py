"""API schemas of the core app (agents, messages, runs, models) — Letta v1 field names."""

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Field, Schema

from core.agents.services import AGENT_TYPES, MAX_CONTEXT_WINDOW, MAX_STEPS, MIN_CONTEXT_WINDOW, OVERFLOW_STRATEGIES
from memory.schemas import BlockIn as BlockCreateIn  # one schema for a new block, inline or standalone

AgentName = Annotated[str, Field(min_length=1, max_length=200)]
ModelHandle = Annotated[str, Field(min_length=1, max_length=200, description="A model handle, `provider/model`.")]
Tag = Annotated[str, Field(min_length=1, max_length=100)]
ContextWindow = Annotated[int, Field(ge=MIN_CONTEXT_WINDOW, le=MAX_CONTEXT_WINDOW)]
Temperature = Annotated[float, Field(ge=0, le=2)]
MaxTokens = Annotated[int, Field(ge=1, le=MAX_CONTEXT_WINDOW)]
MaxSteps = Annotated[int, Field(ge=1, le=MAX_STEPS)]
AgentType = Literal[AGENT_TYPES]
OverflowStrategy = Literal[OVERFLOW_STRATEGIES]
Embedding = Annotated[str, Field(max_length=200)]


class InitialMessageIn(Schema):
    role: Literal["user", "system", "assistant"] = "user"
    content: str | list[dict] = ""


class AgentCreateIn(Schema):
    name: AgentName | None = Field(None, description="A readable unique name is generated when absent.")
    enable_sleeptime: bool | None = Field(None, description="Give the agent a sleep-time companion (or turn it off).")
    description: str | None = ""
    system: str | None = None
    agent_type: AgentType | None = "letta_v1_agent"  # Letta 1.x's default
    model: ModelHandle | None = None
    llm_config: dict | None = None
    embedding: Embedding | None = None
    context_window_limit: ContextWindow | None = None
    memory_blocks: list[BlockCreateIn] = []
    block_ids: list[str] = []
    tools: list[str] = []
    tool_ids: list[str] = []
    tool_rules: list[dict] = []
    include_base_tools: bool = True
    include_multi_agent_tools: bool = False
    tags: list[Tag] = []
    metadata: dict | None = None
    secrets: dict[str, str | None] | None = None
    tool_exec_environment_variables: dict[str, str | None] | None = None
    temperature: Temperature | None = None
    max_tokens: MaxTokens | None = None
    max_steps: MaxSteps | None = None
    overflow_strategy: OverflowStrategy | None = None
    embedding_config: dict | None = Field(
        None,
        description="Letta's embedding config; its handle (or endpoint type/model) names the agent's embedding model.",
    )
    initial_message_sequence: list[InitialMessageIn] | None = Field(
        None, description="Messages placed after the system message in the new agent's context window."
    )


class AgentUpdateIn(Schema):
    name: AgentName | None = None
    enable_sleeptime: bool | None = Field(None, description="Give the agent a sleep-time companion (or turn it off).")
    description: str | None = None
    system: str | None = None
    model: ModelHandle | None = None
    llm_config: dict | None = None
    embedding: Embedding | None = None
    context_window_limit: ContextWindow | None = None
    tool_rules: list[dict] | None = None
    tags: list[Tag] | None = None
    metadata: dict | None = None
    secrets: dict[str, str | None] | None = None
    tool_exec_environment_variables: dict[str, str | None] | None = None
    temperature: Temperature | None = None
    max_tokens: MaxTokens | None = None
    max_steps: MaxSteps | None = None
    overflow_strategy: OverflowStrategy | None = None
    message_ids: list[str] | None = None
    version_message: str | None = Field(
        None, max_length=500, description="why: kept with the agent version this change makes"
    )


class ModelOut(Schema):
    handle: str
    model: str
    provider_name: str
    model_endpoint_type: str
    model_endpoint: str | None = None
    context_window: int
    configured: bool = True


class Detail(Schema):
    detail: str
    errors: Any = None


class TokenOut(Schema):
    id: str
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None = None
    token: str | None = Field(None, description="The raw token; only returned once, at creation.")
