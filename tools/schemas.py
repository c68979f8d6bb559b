"""Request bodies of the tools API (Letta's field names; unknown fields such as npm_requirements are ignored)."""

from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import Field

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


class ToolListQuery(Schema):
    after: str | None = None
    before: str | None = None
    limit: int = 50
    order: Literal["asc", "desc"] = "desc"
    order_by: Literal["created_at"] = "created_at"
    name: str | None = None
    names: list[str] | None = None
    tool_ids: list[str] | None = None
    return_only_letta_tools: bool = False
    search: str | None = None
    tool_types: list[str] | None = None
    exclude_tool_types: list[str] | None = None
