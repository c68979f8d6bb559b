"""API schemas of the core app (agents, messages, runs, models): request bodies and responses, Letta v1 field names."""

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Field, Schema
from pydantic import BaseModel, ConfigDict

from core.agents.services import AGENT_TYPES, MAX_CONTEXT_WINDOW, MAX_STEPS, MIN_CONTEXT_WINDOW, OVERFLOW_STRATEGIES
from memory.schemas import BlockIn as BlockCreateIn  # one schema for a new block, inline or standalone
from memory.schemas import BlockOut
from tools.schemas import ToolOut

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


class ObjectIn(BaseModel):
    """A request body, or an object inside one, that only a JSON object is: a plain pydantic model, since ninja's
    Schema reads any value by attribute (`"x"`, `1`, `[]` or `null` would pass as an object of defaults)."""

    def dict(self, **kwargs) -> dict:
        """ninja Schema's name for model_dump, which callers use."""
        return self.model_dump(**kwargs)


class LlmConfigIn(ObjectIn):
    """Letta's LLMConfig as a client sends it: the fields we use are type-checked (a bad one is 422, never a stored
    value that breaks the agent's reads or its model calls later); the others are accepted and ignored."""

    model_config = ConfigDict(extra="allow")

    model: Annotated[str, Field(max_length=200)] | None = None
    handle: Annotated[str, Field(max_length=200)] | None = None
    model_endpoint_type: Annotated[str, Field(max_length=100)] | None = None
    context_window: int | None = None
    temperature: Temperature | None = None
    max_tokens: MaxTokens | None = None
    put_inner_thoughts_in_kwargs: bool | None = None
    enable_reasoner: bool | None = None
    max_reasoning_tokens: int | None = None


class CompactionSettingsIn(ObjectIn):
    """Letta's CompactionSettings: how the agent's context is compacted (summarized) when it must shrink."""

    model: ModelHandle | None = Field(None, description="The summarizer's model; none: the agent's own.")
    model_settings: dict[str, Any] | None = None
    prompt: Annotated[str, Field(max_length=20_000)] | None = Field(None, description="none: the built-in prompt.")
    prompt_acknowledgement: bool = False
    clip_chars: Annotated[int, Field(ge=1)] | None = Field(50_000, description="The summary's length at most.")
    mode: Literal["all", "sliding_window", "self_compact_all", "self_compact_sliding_window"] = "sliding_window"
    sliding_window_percentage: Annotated[float, Field(ge=0, le=1)] = Field(
        0.3, description="The share of the in-context messages (by tokens) a sliding-window compaction summarizes."
    )


class InitialMessageIn(ObjectIn):
    role: Literal["user", "system", "assistant"] = "user"
    content: str | list[dict] = ""


class AgentCreateIn(ObjectIn):
    name: AgentName | None = Field(None, description="A readable unique name is generated when absent.")
    identity_ids: list[str] | None = Field(None, description="Identities the agent serves (/v1/identities).")
    enable_sleeptime: bool | None = Field(None, description="Give the agent a sleep-time companion (or turn it off).")
    description: str | None = ""
    system: str | None = None
    agent_type: AgentType | None = "letta_v1_agent"  # Letta 1.x's default
    model: ModelHandle | None = None
    llm_config: LlmConfigIn | None = None
    reasoning: bool | None = Field(None, description="Deprecated by Letta: turn the agent's reasoning on or off.")
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
    compaction_settings: CompactionSettingsIn | None = None


class AgentUpdateIn(ObjectIn):
    name: AgentName | None = None
    enable_sleeptime: bool | None = Field(None, description="Give the agent a sleep-time companion (or turn it off).")
    description: str | None = None
    system: str | None = None
    model: ModelHandle | None = None
    llm_config: LlmConfigIn | None = None
    reasoning: bool | None = Field(None, description="Deprecated by Letta: turn the agent's reasoning on or off.")
    embedding: Embedding | None = None
    context_window_limit: ContextWindow | None = None
    tool_rules: list[dict] | None = None
    tool_ids: list[str] | None = Field(None, description="Replaces the agent's tools, as in Letta.")
    tags: list[Tag] | None = None
    metadata: dict | None = None
    secrets: dict[str, str | None] | None = None
    tool_exec_environment_variables: dict[str, str | None] | None = None
    temperature: Temperature | None = None
    max_tokens: MaxTokens | None = None
    max_steps: MaxSteps | None = None
    overflow_strategy: OverflowStrategy | None = None
    message_ids: list[str] | None = None
    compaction_settings: CompactionSettingsIn | None = Field(None, description="Replaces the agent's settings.")
    version_message: str | None = Field(
        None, max_length=500, description="why: kept with the agent version this change makes"
    )


class TokenOut(Schema):
    id: str
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None = None
    token: str | None = Field(None, description="The raw token; only returned once, at creation.")


class RestoreIn(Schema):
    restore_blocks: bool = Field(False, description="also set memory block values back to what they were")
    message: str | None = Field(None, max_length=500)


# --- responses. Output models are plain pydantic models: ninja's Schema reads its input through a per-object
# attribute getter, slower on big outputs (agent states, contexts) and blind to the keys of open payloads.

IsoDateTime = Annotated[str, Field(json_schema_extra={"format": "date-time"})]


class ErrorOut(BaseModel):
    """The body of every error response (mapped in one place, agents_ide/api.py)."""

    detail: str = Field(description="What was wrong, in a sentence meant for people.")
    errors: Any = Field(
        None, description="Per-field problems when there are several (validation errors: loc, msg, type)."
    )


class DeletedOut(BaseModel):
    deleted: str = Field(description="The id (or name) deleted.")


class HealthOut(BaseModel):
    status: str
    version: str


class ModelOut(BaseModel):
    """Letta's LLMConfig as the model list gives it."""

    handle: str
    model: str
    provider_name: str
    model_endpoint_type: str
    model_endpoint: str | None
    context_window: int


class EmbeddingModelOut(BaseModel):
    handle: str
    embedding_model: str


# --- agents


class LlmConfigOut(BaseModel):
    model: str
    handle: str
    model_endpoint_type: str
    model_endpoint: str | None
    provider_name: str
    context_window: int
    temperature: float | None
    max_tokens: int | None
    put_inner_thoughts_in_kwargs: bool
    enable_reasoner: bool


class EmbeddingConfigOut(BaseModel):
    """Letta's EmbeddingConfig: our fields, then whatever Letta config the agent was created with."""

    model_config = ConfigDict(extra="allow")

    embedding_model: str | None
    embedding_endpoint_type: str | None
    handle: str | None
    embedding_dim: int | None
    embedding_chunk_size: int | None


class MemoryOut(BaseModel):
    blocks: list[BlockOut]
    agent_type: str


class SecretOut(BaseModel):
    key: str
    value: None = Field(description="Secrets are write-only: names come back, values never.")


class AgentStateOut(BaseModel):
    """Letta's AgentState."""

    pending_approval: dict[str, Any] | None = None  # with include=agent.pending_approval: what its thread waits on

    id: str
    name: str
    description: str
    system: str
    agent_type: str
    model: str
    embedding: str | None
    llm_config: LlmConfigOut
    embedding_config: EmbeddingConfigOut | None
    context_window_limit: int
    memory: MemoryOut
    blocks: list[BlockOut]
    tools: list[ToolOut]
    tool_rules: list[dict[str, Any]]
    tags: list[str]
    metadata: dict[str, Any]
    secrets: list[SecretOut]
    tool_exec_environment_variables: list[SecretOut]
    message_ids: list[str]
    max_steps: int
    overflow_strategy: str
    created_at: datetime
    updated_at: datetime
    last_stop_reason: str | None
    last_run_completion: datetime | None
    compaction_settings: dict[str, Any] | None = None


# --- messages (Letta's LettaMessage union, told apart by message_type)


class MessageBaseOut(BaseModel):
    id: str
    date: IsoDateTime | None
    run_id: str | None
    step_id: str | None
    seq_id: int | None
    name: str | None
    otid: str | None
    sender_id: str | None = Field(description="The agent that sent it, for messages between agents.")
    kind: str | None = Field(None, description="Present on messages the server wrote (heartbeat, summary, ...).")


class SystemMessageOut(MessageBaseOut):
    message_type: Literal["system_message"]
    content: str


class UserMessageOut(MessageBaseOut):
    message_type: Literal["user_message"]
    content: str


class ReasoningMessageOut(MessageBaseOut):
    message_type: Literal["reasoning_message"]
    reasoning: str
    source: Literal["reasoner_model", "non_reasoner_model"]
    signature: str | None


class AssistantMessageOut(MessageBaseOut):
    message_type: Literal["assistant_message"]
    content: str


class ToolCallOut(BaseModel):
    name: str | None
    arguments: str
    tool_call_id: str | None


class ToolCallMessageOut(MessageBaseOut):
    message_type: Literal["tool_call_message"]
    tool_call: ToolCallOut
    tool_calls: list[ToolCallOut]


class ToolReturnOut(BaseModel):
    """Letta's ToolReturn (schemas/letta_message.py): one call's result inside a tool_return_message."""

    type: Literal["tool"] = "tool"
    tool_return: str
    status: str
    tool_call_id: str | None
    stdout: list[str] | None
    stderr: list[str] | None


class ToolReturnMessageOut(MessageBaseOut):
    message_type: Literal["tool_return_message"]
    tool_return: str
    status: str
    tool_call_id: str | None
    stdout: list[str] | None
    stderr: list[str] | None
    tool_returns: list[ToolReturnOut] | None = None
    duration_ms: float | None
    sandbox: str | None


class ApprovalRequestMessageOut(MessageBaseOut):
    """The calls a run waits on (a person's approval, a client's result); `tool_call` is the first of them."""

    message_type: Literal["approval_request_message"]
    tool_call: ToolCallOut
    tool_calls: list[ToolCallOut]


class ApprovalResponseMessageOut(MessageBaseOut):
    """An answer to a run that waited: one item per call (Letta's ApprovalReturn or ToolReturn); the deprecated
    single fields copy the first approval."""

    message_type: Literal["approval_response_message"]
    approvals: list[dict[str, Any]]
    approve: bool | None = None
    approval_request_id: str | None = None
    reason: str | None = None


LettaMessageOut = Annotated[
    SystemMessageOut
    | UserMessageOut
    | ReasoningMessageOut
    | AssistantMessageOut
    | ToolCallMessageOut
    | ApprovalRequestMessageOut
    | ApprovalResponseMessageOut
    | ToolReturnMessageOut,
    Field(discriminator="message_type"),
]


class StopReasonOut(BaseModel):
    message_type: Literal["stop_reason"]
    stop_reason: str


class UsageStatisticsOut(BaseModel):
    message_type: Literal["usage_statistics"]
    completion_tokens: int
    prompt_tokens: int
    total_tokens: int
    step_count: int
    run_ids: list[str] | None


class LettaResponseOut(BaseModel):
    """Letta's LettaResponse: the run's messages, why it stopped and what it used."""

    messages: list[LettaMessageOut]
    stop_reason: StopReasonOut
    usage: UsageStatisticsOut
    run_id: str
    error: str | None


class ContextSectionOut(BaseModel):
    name: str
    tokens: int
    text: str | None = None


class ContextWindowOut(BaseModel):
    """Letta's ContextWindowOverview, plus each section's text, the tokenizer and the exact next request."""

    context_window_size_max: int
    context_window_size_current: int
    num_messages: int
    num_archival_memory: int
    num_recall_memory: int
    num_tokens_system: int
    system_prompt: str
    num_tokens_core_memory: int
    core_memory: str
    num_tokens_external_memory_summary: int
    external_memory_summary: str
    num_tokens_summary_memory: int
    summary_memory: str | None
    num_tokens_functions_definitions: int
    functions_definitions: list[dict[str, Any]]
    num_tokens_messages: int
    messages: list[dict[str, Any]]
    tokenizer: str
    sections: list[ContextSectionOut]
    request: dict[str, Any] = Field(description="The chat-completions request the next step would send.")
    allowed_tools: list[str]
    removed_tools: list[dict[str, Any]] = Field(
        default_factory=list, description="The agent's tools the next call does not offer: {name, rule, why}."
    )
    next_call: dict[str, Any] = Field(
        default_factory=dict,
        description="Which call this is: {run_id: null, history: []} for the first step of the next run, or the "
        "waiting run's id and the tools it called so far when a breakpoint holds it before a model call.",
    )


# --- runs and steps


class RunOut(BaseModel):
    id: str
    agent_id: str
    status: str
    stop_reason: str | None
    background: bool
    created_at: datetime
    completed_at: datetime | None
    usage: dict[str, Any]
    error: str | None
    cancel_requested: bool
    max_steps: int | None
    input_messages: list[dict[str, Any]]
    conversation_id: str | None = None  # the run's thread (None: the agent's own)
    # What the run waits for (stop reason requires_approval): {kind, tool_calls, deferred, since, expires_at}.
    waiting: dict[str, Any] | None = None
    request_config: dict[str, Any] | None = None  # Letta's LettaRequestConfig of the send that made the run


class RunUsageOut(BaseModel):
    completion_tokens: int
    prompt_tokens: int
    total_tokens: int
    step_count: int


class StepOut(BaseModel):
    """One model call: the exact request sent, the raw response, usage and timings."""

    id: str
    run_id: str | None
    agent_id: str
    index: int
    kind: str
    model: str
    request: dict[str, Any]
    response: dict[str, Any] | None
    context_sections: list[dict[str, Any]]
    tokenizer: str
    usage: dict[str, Any]
    prompt_tokens: int | None
    completion_tokens: int | None
    total_tokens: int | None
    model_ms: float
    tools_ms: float
    total_ms: float
    stop_reason: str | None
    error: str | None
    created_at: datetime


# --- time travel


class ReplayOut(BaseModel):
    id: str
    step_id: str
    overrides: dict[str, Any]
    context_sections: list[dict[str, Any]]
    results: list[dict[str, Any]] = Field(description="One per model: its reply, usage and timing, or its error.")
    actual: dict[str, Any] = Field(description="What the step's model answered at the time.")
    created_at: datetime


class CalibrationOut(BaseModel):
    model: str
    steps: int
    ratio: float | None
    mean_difference: float | None


class AgentUsageOut(BaseModel):
    steps: int
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cost_usd: float
    unpriced_steps: int
    calibration: CalibrationOut


# --- agent tests


class TestStartOut(BaseModel):
    step_id: str | None
    before: bool


class TestOut(BaseModel):
    id: str
    name: str
    turns: list[str]
    expect: dict[str, Any]
    start: TestStartOut | None = None


class TestResultOut(BaseModel):
    """One test's outcome; a test deleted before it ran has only its id, passed, failures and error."""

    test_id: str
    passed: bool
    failures: list[dict[str, Any]]
    error: str | None
    name: str | None = None
    run_ids: list[str] | None = None
    copy_agent_id: str | None = None
    cost_usd: float | None = None
    steps: int | None = None


class TestRunOut(BaseModel):
    id: str
    agent_id: str
    status: str
    test_ids: list[str] | None
    model: str | None
    results: list[TestResultOut]
    passed: int
    failed: int
    created_at: datetime
    completed_at: datetime | None


# --- sleep-time


class SleeptimeOut(BaseModel):
    """The agent's sleep-time companion; without one, only agent_id, enabled, companion_id and frequency."""

    agent_id: str
    enabled: bool
    companion_id: str | None
    frequency: int | None
    turns_since: int | None = None
    last_run_id: str | None = None


class SleeptimeRunOut(BaseModel):
    run_id: str
    agent_id: str
    status: str


# --- agent files


class ImportResultOut(BaseModel):
    agent_ids: list[str]
    warnings: list[str]
    tools_created: list[str]
    tools_reused: list[str]
    tools_overridden: list[str]


class PreviewBlockOut(BaseModel):
    label: str
    chars: int
    limit: int | None
    read_only: bool


class PreviewToolOut(BaseModel):
    name: str
    status: Literal["builtin", "new", "reused", "overridden"]
    changed: bool


class PreviewFileOut(BaseModel):
    name: str
    bytes: int
    open: bool


class PreviewFolderOut(BaseModel):
    """A folder the agent is attached to in the file; `exists`: the owner has a folder of that name, which the import
    attaches (its files of the same names kept) instead of creating one."""

    name: str
    exists: bool
    file_count: int
    bytes: int
    open_count: int
    files: list[PreviewFileOut]


class PreviewAgentOut(BaseModel):
    name: str
    model: str | None
    model_configured: bool
    context_window: int | None
    system_chars: int
    blocks: list[PreviewBlockOut]
    tools: list[PreviewToolOut]
    tool_rules: int
    tags: list[str]
    secrets: list[str]
    message_count: int
    in_context_count: int
    passages: int
    folders: list[PreviewFolderOut] = []


class ImportPreviewOut(BaseModel):
    version: str
    agents: list[PreviewAgentOut]
    warnings: list[str]


class AgentFileOut(BaseModel):
    """A Letta agent file: v2 by default (these fields); `use_legacy_format` gives v1's single-agent shape."""

    model_config = ConfigDict(extra="allow")

    agents: list[dict[str, Any]] = []
    groups: list[dict[str, Any]] = []
    blocks: list[dict[str, Any]] = []
    files: list[dict[str, Any]] = []
    sources: list[dict[str, Any]] = []
    tools: list[dict[str, Any]] = []
    mcp_servers: list[dict[str, Any]] = []
    metadata: dict[str, Any] = {}
    created_at: IsoDateTime | None = None


# --- agent versions


class VersionOut(BaseModel):
    number: int
    content_hash: str
    author_kind: str = Field(..., description="user | token | agent | system")
    author: str
    message: str
    restored_from: int | None
    created_at: IsoDateTime


class VersionDetailOut(VersionOut):
    definition: dict[str, Any]
    blocks: list[dict[str, Any]]


class DiffOut(BaseModel):
    number: int
    against: int
    changes: list[dict[str, Any]]
