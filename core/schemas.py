"""API schemas of the core app (agents, messages, runs, models) — Letta v1 field names."""

from datetime import datetime
from typing import Any

from ninja import Field, Schema

from memory.schemas import BlockIn as BlockCreateIn  # one schema for a new block, inline or standalone


class AgentCreateIn(Schema):
    name: str | None = None
    description: str | None = ""
    system: str | None = None
    agent_type: str | None = "memgpt_v2_agent"
    model: str | None = None
    llm_config: dict | None = None
    embedding: str | None = None
    context_window_limit: int | None = None
    memory_blocks: list[BlockCreateIn] = []
    block_ids: list[str] = []
    tools: list[str] = []
    tool_ids: list[str] = []
    tool_rules: list[dict] = []
    include_base_tools: bool = True
    include_multi_agent_tools: bool = False
    tags: list[str] = []
    metadata: dict | None = None
    secrets: dict[str, str | None] | None = None
    tool_exec_environment_variables: dict[str, str | None] | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    max_steps: int | None = None
    overflow_strategy: str | None = None


class AgentUpdateIn(Schema):
    name: str | None = None
    description: str | None = None
    system: str | None = None
    model: str | None = None
    llm_config: dict | None = None
    embedding: str | None = None
    context_window_limit: int | None = None
    tool_rules: list[dict] | None = None
    tags: list[str] | None = None
    metadata: dict | None = None
    secrets: dict[str, str | None] | None = None
    tool_exec_environment_variables: dict[str, str | None] | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    max_steps: int | None = None
    overflow_strategy: str | None = None
    message_ids: list[str] | None = None


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
