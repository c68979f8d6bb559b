"""The engine's typed vocabulary: frozen dataclasses shared by the compiler, the loop and the runner.

Nothing here touches Django or litellm; the runner maps ORM rows to these types in one place.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

import orjson

ToolKind = Literal["base", "custom", "multi_agent", "client"]

# Letta's agent types that run its V3 loop: no send_message, no request_heartbeat, tool_choice auto, and a
# reply without a tool call ends the turn. Every other type runs the MemGPT loop (memgpt_v2_agent).
LETTA_V1_AGENT = "letta_v1_agent"
MEMGPT_V2_AGENT = "memgpt_v2_agent"
V3_LOOP_TYPES: frozenset[str] = frozenset({LETTA_V1_AGENT, "sleeptime_agent"})


def uses_heartbeats(agent_type: str) -> bool:
    """Whether an agent type runs the MemGPT loop (send_message ends a turn, request_heartbeat chains steps)."""
    return agent_type not in V3_LOOP_TYPES


class Role(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class StopReason(StrEnum):
    END_TURN = "end_turn"
    MAX_TOKENS_EXCEEDED = "max_tokens_exceeded"
    NO_TOOL_CALL = "no_tool_call"
    MAX_STEPS = "max_steps"
    INVALID_TOOL_CALL = "invalid_tool_call"
    LLM_API_ERROR = "llm_api_error"
    TOOL_RULE = "tool_rule"
    CANCELLED = "cancelled"
    ERROR = "error"
    REQUIRES_APPROVAL = "requires_approval"  # the run waits for a person or a client (core.runs.waits)


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentSpec:
    """What the engine needs to know about an agent and its model.

    `model` is a litellm handle ("openai/gpt-4o-mini"). `native_reasoning` says the model reasons on its
    own (reasoning content / thinking blocks); otherwise, when `put_inner_thoughts` is on (off unless asked), every tool
    gets a first `thinking` argument. `context_window_limit` None means the model's own maximum.
    `agent_type` picks the loop: letta_v1_agent never gets a `thinking` argument nor `request_heartbeat`.
    """

    id: str
    name: str
    system: str
    model: str
    temperature: float | None = 0.7
    max_tokens: int | None = None
    context_window_limit: int | None = None
    native_reasoning: bool = False
    put_inner_thoughts: bool = False  # Letta's LLMConfig default for every model
    agent_type: str = MEMGPT_V2_AGENT
    thinking_budget: int = 1024  # extended-thinking tokens asked of an Anthropic model with native reasoning

    @property
    def extended_thinking(self) -> bool:
        """Whether requests ask the provider for signed thinking blocks (Anthropic models with native reasoning)."""
        return self.native_reasoning and sends_thinking_blocks(self.model)

    @property
    def heartbeats(self) -> bool:
        return uses_heartbeats(self.agent_type)

    @property
    def uses_thinking_arg(self) -> bool:
        return self.heartbeats and self.put_inner_thoughts and not self.native_reasoning


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockSpec:
    """One core-memory block as the agent sees it."""

    id: str
    label: str
    value: str
    limit: int = 5000
    description: str | None = None
    read_only: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """A tool call as the model emitted it; `arguments` is the raw JSON string (it may be malformed)."""

    id: str
    name: str
    arguments: str = "{}"

    def to_openai(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One in-context message. `token_count` is computed once (tokens.count_message) and stored by the runner,
    so compiling never re-tokenizes history."""

    id: str
    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    reasoning: str | None = None
    token_count: int = 0
    thinking_blocks: tuple[dict[str, Any], ...] = ()
    # The chat-completions form, built on first use: a message never changes, and a window's messages are compiled
    # again at every step (the process keeps them, core/agents/context.py), so each is converted once.
    _wire: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)

    def to_openai(self, *, thinking_blocks: bool = False) -> dict[str, Any]:
        """The chat-completions form of this message. Reasoning text is not sent back (`thinking` lives in the
        args), but with `thinking_blocks` the provider's signed thinking blocks are, unchanged (Anthropic
        requires them next to the tool calls they led to).

        The same dict on every call (it is the message's, shared by every request that carries it): read it, never
        change it; a caller that hands it to code that may (litellm) copies it first."""
        if thinking_blocks and self.thinking_blocks and self.role == Role.ASSISTANT:
            return self._openai(thinking_blocks=True)
        out = self._wire
        if out is None:
            out = self._openai(thinking_blocks=False)
            object.__setattr__(self, "_wire", out)  # a cache on a frozen value: the standard dataclass idiom
        return out

    def _openai(self, *, thinking_blocks: bool) -> dict[str, Any]:
        if self.role == Role.ASSISTANT:
            # a call without text carries no content at all: what the provider receives (litellm drops a null one),
            # so the simulator shows the exact request
            out: dict[str, Any] = {"role": "assistant"}
            if self.content or not self.tool_calls:
                out["content"] = self.content or None
            if thinking_blocks and self.thinking_blocks:
                out["thinking_blocks"] = [dict(b) for b in self.thinking_blocks]
            if self.tool_calls:
                out["tool_calls"] = [tc.to_openai() for tc in self.tool_calls]
            return out
        if self.role == Role.TOOL:
            out = {"role": "tool", "tool_call_id": self.tool_call_id or "", "content": self.content}
            if self.name:
                out["name"] = self.name
            return out
        return {"role": str(self.role), "content": self.content}


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """A tool offered to the model. `json_schema` is Letta's stored form: {"name", "description", "parameters"}."""

    name: str
    description: str
    json_schema: dict[str, Any]
    kind: ToolKind = "custom"
    return_char_limit: int = 50000


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryStats:
    """Counts for `<memory_metadata>`: messages in recall memory outside the window, passages in archival memory."""

    recall_outside_window: int = 0
    archival_count: int = 0
    last_memory_edit: str | None = None


def compact_json(value: Any) -> str:
    """Compact JSON text (no spaces, non-ASCII as it is), as orjson writes it: a tenth of json's time for a window's
    messages; what orjson refuses (keys that are not strings, integers past 64 bits): json's same text."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class Section:
    """One named part of a compiled context, with its exact text and token count.

    The messages' and the tools' text is their compact JSON (`json_of`), encoded on first read: a step's compile never reads
    it (the runner stores the request itself, and only the system message's parts' text), the context views do.
    The value is the request's own, which nothing changes once compiled."""

    __slots__ = ("_json_of", "_text", "name", "tokens")

    def __init__(self, *, name: str, tokens: int, text: str | None = None, json_of: Any = None):
        if (text is None) == (json_of is None):
            raise TypeError("a Section takes its text or the value its text is the JSON of, not both")
        self.name, self.tokens, self._text, self._json_of = name, tokens, text, json_of

    @property
    def text(self) -> str:
        text = self._text
        if text is None:  # two threads reading at once both encode the same value: the same text
            text = self._text = compact_json(self._json_of)
        return text

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Section):
            return NotImplemented
        return (self.name, self.tokens, self.text) == (other.name, other.tokens, other.text)

    __hash__ = None  # type: ignore[assignment]  # compared by value, and not frozen (the text is filled lazily)

    def __repr__(self) -> str:
        return f"Section(name={self.name!r}, tokens={self.tokens}, text={self.text!r})"


@dataclass(frozen=True, slots=True, kw_only=True)
class CompiledContext:
    """The result of compile_context: ordered sections plus the exact chat-completions request."""

    sections: tuple[Section, ...]
    request: dict[str, Any]
    total_tokens: int
    context_window: int
    tokenizer: str
    allowed_tools: tuple[str, ...] = ()
    num_messages: int = 0
    num_recall_memory: int = 0
    num_archival_memory: int = 0

    @property
    def fits(self) -> bool:
        return self.total_tokens <= self.context_window

    def section(self, name: str) -> Section:
        for s in self.sections:
            if s.name == name:
                return s
        raise KeyError(name)


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0


DeltaKind = Literal["reasoning", "text", "tool_call"]


@dataclass(frozen=True, slots=True)
class Delta:
    """A streamed fragment of a model reply: reasoning text, reply text, or a piece of a tool call's arguments."""

    kind: DeltaKind
    text: str
    tool_index: int = 0
    tool_call_id: str | None = None
    tool_name: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LLMResult:
    """A model reply, normalised across providers (built by core.llm.client.complete)."""

    content: str | None = None
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    thinking_blocks: tuple[dict[str, Any], ...] = ()  # signed (or redacted) thinking, to send back unchanged
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    model: str = ""
    raw: dict[str, Any] = field(default_factory=dict)
    latency_ms: float = 0.0
    first_token_ms: float | None = None  # streamed: when the first fragment came (a whole reply: unknown)


def sends_thinking_blocks(model: str) -> bool:
    """Whether a model's provider wants its signed thinking blocks back in the history (Anthropic's Messages API)."""
    return model.startswith("anthropic/") or "claude" in model.lower()


def loads_args(arguments: str) -> dict[str, Any]:
    """Parse a tool-call argument string into a dict; raises ValueError with a readable reason."""
    try:
        parsed = json.loads(arguments or "{}")
    except json.JSONDecodeError as exc:
        raise ValueError(f"arguments are not valid JSON ({exc.msg} at position {exc.pos})") from None
    if not isinstance(parsed, dict):
        raise ValueError(f"arguments must be a JSON object, got {type(parsed).__name__}")
    return parsed


# --------------------------------------------------------------------------- tool rules (Letta JSON shapes)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Rule:
    tool_name: str
    prompt_template: str | None = None

    type: Any = None  # each subclass pins this with a ClassVar-like default below

    def to_dict(self) -> dict[str, Any]:
        """Letta's JSON shape for this rule."""
        out: dict[str, Any] = {"tool_name": self.tool_name, "type": self.type}
        for name in self.__dataclass_fields__:
            if name in ("tool_name", "type"):
                continue
            value = getattr(self, name)
            if name == "prompt_template" and value is None:
                continue
            out[name] = list(value) if isinstance(value, tuple) else value
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFirst(_Rule):
    """The tool must be the first call of a run (Letta `run_first`, InitToolRule)."""

    type: Literal["run_first"] = "run_first"
    args: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ExitLoop(_Rule):
    """Calling the tool ends the run (Letta `exit_loop`, TerminalToolRule)."""

    type: Literal["exit_loop"] = "exit_loop"


@dataclass(frozen=True, slots=True, kw_only=True)
class ContinueLoop(_Rule):
    """Calling the tool always continues the run (Letta `continue_loop`)."""

    type: Literal["continue_loop"] = "continue_loop"


@dataclass(frozen=True, slots=True, kw_only=True)
class ConstrainChildTools(_Rule):
    """After the tool, the next call must be one of `children` (Letta `constrain_child_tools`)."""

    type: Literal["constrain_child_tools"] = "constrain_child_tools"
    children: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ParentLastTool(_Rule):
    """`children` may only be called right after the tool; right after it, only they may (Letta `parent_last_tool`)."""

    type: Literal["parent_last_tool"] = "parent_last_tool"
    children: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Conditional(_Rule):
    """The tool's output picks the next tool via `child_output_mapping` (Letta `conditional`)."""

    type: Literal["conditional"] = "conditional"
    child_output_mapping: dict[str, str] = field(default_factory=dict)
    default_child: str | None = None
    require_output_mapping: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class MaxCountPerStep(_Rule):
    """The tool may be called at most `max_count_limit` times per run (Letta `max_count_per_step`)."""

    type: Literal["max_count_per_step"] = "max_count_per_step"
    max_count_limit: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class RequiredBeforeExit(_Rule):
    """The run may not end until the tool has been called (Letta `required_before_exit`)."""

    type: Literal["required_before_exit"] = "required_before_exit"


@dataclass(frozen=True, slots=True, kw_only=True)
class RequiresApproval(_Rule):
    """A call to the tool waits for a person's approval before it runs (Letta `requires_approval`); it narrows
    nothing else."""

    type: Literal["requires_approval"] = "requires_approval"


ToolRule = (
    RunFirst
    | ExitLoop
    | ContinueLoop
    | ConstrainChildTools
    | ParentLastTool
    | Conditional
    | MaxCountPerStep
    | RequiredBeforeExit
    | RequiresApproval
)
_RULE_CLASSES: dict[str, type] = {
    cls.__dataclass_fields__["type"].default: cls
    for cls in (
        RunFirst,
        ExitLoop,
        ContinueLoop,
        ConstrainChildTools,
        ParentLastTool,
        Conditional,
        MaxCountPerStep,
        RequiredBeforeExit,
        RequiresApproval,
    )
}
RULE_TYPES: tuple[str, ...] = tuple(_RULE_CLASSES)


def tool_rule_from_dict(data: dict[str, Any]) -> ToolRule:
    """Build a tool rule from Letta's JSON shape; raises ValueError naming what is wrong."""
    kind = data.get("type")
    cls = _RULE_CLASSES.get(kind)  # type: ignore[arg-type]
    if cls is None:
        raise ValueError(f"unknown tool rule type {kind!r}; expected one of {', '.join(RULE_TYPES)}")
    if not isinstance(data.get("tool_name"), str) or not data["tool_name"]:
        raise ValueError(f"tool rule {kind!r} needs a 'tool_name'")
    kwargs: dict[str, Any] = {}
    for name in cls.__dataclass_fields__:
        if name == "type" or name not in data or data[name] is None and name != "default_child":
            continue
        value = data[name]
        if name == "children":
            if not isinstance(value, list | tuple) or not all(isinstance(c, str) for c in value):
                raise ValueError(
                    f"tool rule {kind!r} for {data['tool_name']!r}: 'children' must be a list of tool names"
                )
            value = tuple(value)
        if name == "max_count_limit" and (not isinstance(value, int) or value < 1):
            raise ValueError(f"tool rule 'max_count_per_step' for {data['tool_name']!r}: max_count_limit must be >= 1")
        if name == "child_output_mapping":
            value = {str(k): str(v) for k, v in dict(value).items()}
        kwargs[name] = value
    return cls(**kwargs)


def tool_rule_to_dict(rule: ToolRule) -> dict[str, Any]:
    """Letta's JSON shape for a rule."""
    return rule.to_dict()
