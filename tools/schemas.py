"""Schemas of the tools API: request bodies (Letta's field names; unknown fields such as npm_requirements are
ignored) and responses."""

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import BaseModel, ConfigDict, Field, model_validator

from tools.services import MAX_RETURN_CHAR_LIMIT

ReturnCharLimit = Annotated[int, Field(ge=1, le=MAX_RETURN_CHAR_LIMIT)]
Sandbox = Annotated[
    str, Field(max_length=16, description="'' (the owner's or deployment's default), 'local' or 'e2b'.")
]
ToolName = Annotated[str, Field(max_length=64)]


class ToolCreateIn(Schema):
    source_code: str
    # `json_schema` on the wire; renamed here because pydantic models have a json_schema() method.
    schema_: dict[str, Any] | None = Field(None, alias="json_schema")
    args_json_schema: dict[str, Any] | None = Field(
        None,
        description="The arguments' JSON schema (e.g. a pydantic "
        "model's); the source then only gives the function's name and docstring.",
    )
    description: str | None = None
    tags: list[str] | None = None
    return_char_limit: ReturnCharLimit | None = None
    pip_requirements: list[dict[str, Any]] | None = None
    source_type: str | None = None
    sandbox: Sandbox | None = None
    env_vars: dict[str, Any] | None = None
    allow_network: bool | None = Field(None, description="Network for the tool's runs; null = the deployment default.")
    default_requires_approval: bool | None = Field(
        None, description="Agents made with the tool, or attaching it, get a requires_approval rule for it."
    )


class ToolUpdateIn(Schema):
    source_code: str | None = None
    schema_: dict[str, Any] | None = Field(None, alias="json_schema")
    args_json_schema: dict[str, Any] | None = None
    description: str | None = None
    tags: list[str] | None = None
    return_char_limit: ReturnCharLimit | None = None
    pip_requirements: list[dict[str, Any]] | None = None
    source_type: str | None = None
    sandbox: Sandbox | None = None
    env_vars: dict[str, Any] | None = None
    allow_network: bool | None = Field(None, description="Network for the tool's runs; null = the deployment default.")
    default_requires_approval: bool | None = Field(
        None, description="Agents made with the tool, or attaching it, get a requires_approval rule for it."
    )
    version_message: str | None = Field(
        None, max_length=500, description="why: kept with the version of each agent using the tool that this makes"
    )


class GenerateSchemaIn(Schema):
    source_code: str
    name: ToolName | None = None


class ToolRunIn(Schema):
    source_code: str
    args: dict[str, Any] = {}
    env_vars: dict[str, Any] | None = None
    name: ToolName | None = None
    schema_: dict[str, Any] | None = Field(None, alias="json_schema")
    agent_id: str | None = None
    sandbox: Sandbox | None = None
    pip_requirements: list[dict[str, Any]] | None = None
    source_type: str | None = None
    allow_network: bool | None = Field(None, description="Network for this run; null = the tool's or deployment's.")


class AgentToolRunIn(Schema):
    args: dict[str, Any] = {}


class ToolApprovalIn(Schema):
    """Letta's ModifyApprovalRequest (unknown keys are a 422, as there)."""

    model_config = ConfigDict(extra="forbid")

    requires_approval: bool | None = Field(None, description="Whether calls to the tool wait for a person's approval.")
    # Letta's TypeScript SDK (1.12) sends its parameter's name as the key: taken as the same answer.
    body_requires_approval: bool | None = Field(None, description="requires_approval, as Letta's TS SDK sends it.")

    @model_validator(mode="after")
    def _one_given(self):
        if self.requires_approval is None and self.body_requires_approval is None:
            raise ValueError("requires_approval is required in the body")  # a body without it: Letta's 422
        return self


# --- responses. Output models are plain pydantic models: ninja's Schema reads its input through a per-object
# attribute getter, slower on big outputs and blind to the keys of open payloads.


class ToolOut(BaseModel):
    """Letta's Tool."""

    id: str
    name: str
    tool_type: Literal[
        "letta_core",
        "letta_multi_agent_core",
        "letta_builtin",
        "letta_files_core",
        "letta_sleeptime_core",
        "letta_memory_core",
        "letta_voice_sleeptime_core",
        "external_mcp",
        "custom",
    ]
    description: str
    source_code: str
    source_type: str
    json_schema: dict[str, Any] = Field(description="The OpenAI function schema: {name, description, parameters}.")
    tags: list[str]
    return_char_limit: int
    pip_requirements: list[dict[str, Any]]
    sandbox: str | None
    default_requires_approval: bool | None
    created_at: datetime
    updated_at: datetime


class ToolSearchIn(Schema):
    """Letta's ToolSearchRequest. Tools are matched by the words of the query (their names, descriptions and
    tags); "vector" is refused, as Letta refuses every mode when tool embedding is off."""

    query: str | None = Field(None, max_length=2000, description="Words to look for; none lists every tool.")
    search_mode: Literal["vector", "fts", "hybrid"] = "hybrid"
    tool_types: list[str] | None = Field(None, description="Filter by Letta tool types (e.g. 'custom', 'letta_core').")
    tags: list[str] | None = Field(None, description="Filter by tags (match any).")
    limit: int = Field(50, ge=1, le=100)


class ToolSearchResultOut(BaseModel):
    """Letta's ToolSearchResult: `fts_rank` is the tool's place by word match, from 1; no tool has a vector rank."""

    tool: ToolOut
    embedded_text: str | None = None
    fts_rank: int | None = None
    vector_rank: int | None = None
    combined_score: float


class ToolSchemaOut(BaseModel):
    """A tool's function schema; a given json_schema comes back with any further keys it had."""

    model_config = ConfigDict(extra="allow")

    name: str
    description: str
    parameters: dict[str, Any]


class ToolDeletedOut(BaseModel):
    id: str
    deleted: bool


class ToolRunExtrasOut(BaseModel):
    """What we add to Letta's tool-run shapes: timing, the sandbox (and its network), the recorded run.
    A built-in tool run outside a step has no recorded run: its extras stop at `sandbox`."""

    duration_ms: float
    sandbox: str
    network: bool = False
    tool_run_id: str | None = None
    mcp_server: str | None = None
    error_type: str | None = None
    error_message: str | None = None


class ToolRunReturnOut(ToolRunExtrasOut):
    """A workbench run as Letta's tool_return_message."""

    id: str
    date: datetime
    message_type: Literal["tool_return_message"]
    name: str
    status: str
    tool_return: str
    stdout: list[str]
    stderr: list[str]
    tool_call_id: str


class ToolExecutionResultOut(ToolRunExtrasOut):
    """An agent's tool run as Letta's ToolExecutionResult."""

    status: str
    func_return: Any = Field(description="What the tool returned.")
    tool_return: Any
    stdout: list[str]
    stderr: list[str]
    agent_state: None
    sandbox_config_fingerprint: str | None


class ToolRunOut(BaseModel):
    """One recorded run of a tool, with its arguments (so a call can be replayed)."""

    id: str
    tool_id: str | None
    tool_name: str
    agent_id: str | None
    step_id: str | None
    origin: str
    args: dict[str, Any]
    status: str
    tool_return: str
    stdout: str
    stderr: str
    sandbox: str
    network: bool
    duration_ms: float
    mcp_server: str | None
    created_at: datetime


class McpServerOut(BaseModel):
    """Letta's McpServer; secrets are write-only: env and header names come back, their values never.
    stdio servers have command, args, env and allow_network; the others server_url and the auth fields."""

    id: str
    server_name: str
    mcp_server_type: str
    last_error: str | None
    refreshed_at: datetime | None
    command: str | None = None
    args: list[str] | None = None
    env: dict[str, None] | None = None
    allow_network: bool | None = None
    server_url: str | None = None
    auth_header: str | None = None
    auth_token: None = None
    auth_token_set: bool | None = None
    custom_headers: dict[str, None] | None = None


class McpSkippedToolOut(BaseModel):
    name: str
    reason: str


class McpRefreshOut(BaseModel):
    mcp_server_id: str
    added: list[str]
    updated: list[str]
    removed: list[str]
    skipped: list[McpSkippedToolOut]
