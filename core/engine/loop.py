"""Pure step decisions for the agent loop: parse a reply, decide continue/stop, format what goes back.

The runner owns I/O (LLM calls, tool runs, persistence); everything it decides is decided here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from core.engine import rules as rule_solver
from core.engine.types import LLMResult, Message, Role, StopReason, ToolCall, ToolRule, ToolSpec, loads_args

NON_USER_PREFIX = "[This is an automated system message hidden from the user] "
HEARTBEAT_REASON = NON_USER_PREFIX + "Function called using request_heartbeat=true, returning control"
FAILED_REASON = NON_USER_PREFIX + "Function call failed, returning control"
RULE_CONTINUE_REASON = NON_USER_PREFIX + "A tool rule requires another tool call, returning control"
MEMORY_WARNING_FRACTION = 0.75
EVICTION_FRACTION = 0.90


def format_time(now: datetime | None = None) -> str:
    """Letta's timestamp format for heartbeats and tool results."""
    now = now or datetime.now(UTC)
    return now.strftime("%Y-%m-%d %I:%M:%S %p %Z%z").strip()


# --------------------------------------------------------------------------- parsing a reply


@dataclass(frozen=True, slots=True)
class ParsedCall:
    """One tool call, checked. `args` excludes `thinking`/`request_heartbeat`; `error` is set when it must
    not run (malformed JSON, unknown tool, missing arguments, rule violation) and is fed back as a failed result."""

    call: ToolCall
    args: dict[str, Any]
    thinking: str | None
    request_heartbeat: bool
    error: str | None = None

    @property
    def name(self) -> str:
        return self.call.name

    @property
    def valid(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True)
class ParsedResponse:
    """A model reply split into native reasoning, free text and checked tool calls."""

    reasoning: str | None
    content: str | None
    calls: tuple[ParsedCall, ...]

    def reasoning_parts(self) -> list[tuple[str, str]]:
        """(text, source) pairs to show as reasoning messages: native first, then each call's `thinking`."""
        parts = [(self.reasoning, "reasoner_model")] if self.reasoning else []
        return parts + [(c.thinking, "non_reasoner_model") for c in self.calls if c.thinking]


def _heartbeat_flag(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


def _check_call(call: ToolCall, specs: dict[str, ToolSpec], allowed: rule_solver.Allowed | None) -> ParsedCall:
    try:
        args = loads_args(call.arguments)
    except ValueError as exc:
        return ParsedCall(
            call, {}, None, False, f"Invalid arguments for {call.name}: {exc}. Call it again with a JSON object."
        )
    thinking = args.pop("thinking", None)
    heartbeat = _heartbeat_flag(args.pop("request_heartbeat", False))
    thinking = str(thinking) if thinking not in (None, "") else None
    if call.name not in specs:
        names = sorted(specs)
        return ParsedCall(
            call, args, thinking, heartbeat, f"Tool {call.name!r} does not exist. Available tools: {names}."
        )
    if allowed is not None and not allowed.permits(call.name):
        return ParsedCall(call, args, thinking, heartbeat, rule_solver.violation_message(call.name, allowed))
    params = specs[call.name].json_schema.get("parameters") or {}
    missing = [p for p in params.get("required") or [] if p not in args and p not in ("thinking", "request_heartbeat")]
    if missing:
        return ParsedCall(
            call, args, thinking, heartbeat, f"Missing required argument(s) for {call.name}: {', '.join(missing)}."
        )
    return ParsedCall(call, args, thinking, heartbeat)


def parse_response(
    result: LLMResult, tools: Sequence[ToolSpec], *, allowed: rule_solver.Allowed | None = None
) -> ParsedResponse:
    """Check every tool call in a reply against the agent's tools and the allowed set for this step."""
    specs = {t.name: t for t in tools}
    calls = tuple(_check_call(c, specs, allowed) for c in result.tool_calls)
    return ParsedResponse(reasoning=result.reasoning or None, content=result.content or None, calls=calls)


def check_call(call: ToolCall, tools: Sequence[ToolSpec]) -> ParsedCall:
    """One call checked against the tools alone (no rule narrows it): a call answered after its step, e.g. an
    approved call whose arguments a person edited."""
    return _check_call(call, {t.name: t for t in tools}, None)


def assistant_text(call: ParsedCall) -> str | None:
    """The user-visible text of a send_message call (shown as an assistant_message), else None."""
    if call.name == "send_message" and call.valid:
        return str(call.args.get("message", ""))
    return None


# --------------------------------------------------------------------------- continue or stop


class StepKind(StrEnum):
    """What a step ended as. The runner's one commit (core.runs.runner `_commit`) writes each kind."""

    CONTINUE = "continue"  # the loop goes on: the step's results are the model's next input
    DONE = "done"  # the run ends with this step
    WAITING_CALLS = "waiting_calls"  # the reply's calls wait (an approval, a client-side tool, a tool-call breakpoint)
    WAITING_MODEL_CALL = "waiting_model_call"  # the run waits before its next model call (a breakpoint)
    FAILED = "failed"  # the model call failed: the agent's state stays as before the step


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do after a step whose calls ran: continue (with the heartbeat reason to send) or stop (with a reason)."""

    continue_loop: bool
    stop_reason: StopReason | None = None
    heartbeat_reason: str | None = None

    @property
    def kind(self) -> StepKind:
        return StepKind.CONTINUE if self.continue_loop else StepKind.DONE


def decide_next(
    *,
    parsed: ParsedResponse,
    failed: Sequence[bool],
    tool_rules: Sequence[ToolRule],
    history: Sequence[str],
    steps_taken: int,
    max_steps: int,
    heartbeats: bool = True,
    finish_reason: str | None = None,
    answered: bool = False,
    more_input: bool = False,
) -> Decision:
    """Decide whether the run continues after a step whose tool calls have run.

    `failed[i]` says whether call i produced a failed result (invalid or raised); `history` is the names
    of the valid tools called so far in this run, including this step's; `steps_taken` counts this step.
    `heartbeats` False is letta_v1_agent's loop (decide_next_v1). A step that settled a wait: `answered` says a
    person denied a call or a client returned a result, which go back to the model rather than end the turn;
    `more_input` says messages sent with the answer wait for the model, so the loop goes on whatever the calls say.
    """
    decision = _decide(
        parsed=parsed,
        failed=failed,
        tool_rules=tool_rules,
        history=history,
        steps_taken=steps_taken,
        max_steps=max_steps,
        heartbeats=heartbeats,
        finish_reason=finish_reason,
    )
    if not decision.continue_loop and (more_input or (answered and decision.stop_reason == StopReason.END_TURN)):
        return Decision(True, None, HEARTBEAT_REASON if heartbeats else None)
    return decision


def _decide(
    *,
    parsed: ParsedResponse,
    failed: Sequence[bool],
    tool_rules: Sequence[ToolRule],
    history: Sequence[str],
    steps_taken: int,
    max_steps: int,
    heartbeats: bool,
    finish_reason: str | None,
) -> Decision:
    if not heartbeats:
        return decide_next_v1(
            parsed=parsed,
            tool_rules=tool_rules,
            history=history,
            steps_taken=steps_taken,
            max_steps=max_steps,
            finish_reason=finish_reason,
        )
    if not parsed.calls:
        return Decision(False, StopReason.NO_TOOL_CALL)
    reason: str | None = None
    exit_rule = False
    for call, bad in zip(parsed.calls, failed, strict=True):
        if bad:
            reason = reason or FAILED_REASON
        elif rule_solver.has_exit_rule(call.name, tool_rules):
            exit_rule = True
        elif rule_solver.must_continue(call.name, tool_rules):
            reason = reason or RULE_CONTINUE_REASON
        elif call.request_heartbeat:
            reason = reason or HEARTBEAT_REASON
    if exit_rule:
        asked = any(c.request_heartbeat for c in parsed.calls)
        return Decision(False, StopReason.TOOL_RULE if asked else StopReason.END_TURN)
    if reason is None:
        missing = rule_solver.missing_before_exit(tool_rules, history)
        if not missing:
            return Decision(False, StopReason.END_TURN)
        reason = f"{NON_USER_PREFIX}You must call {', '.join(missing)} before ending your response."
    if steps_taken >= max_steps:
        all_invalid = all(not c.valid for c in parsed.calls)
        return Decision(False, StopReason.INVALID_TOOL_CALL if all_invalid else StopReason.MAX_STEPS)
    return Decision(True, None, reason)


def decide_next_v1(
    *,
    parsed: ParsedResponse,
    tool_rules: Sequence[ToolRule],
    history: Sequence[str],
    steps_taken: int,
    max_steps: int,
    finish_reason: str | None = None,
) -> Decision:
    """letta_v1_agent's loop: a reply without a tool call ends the turn; any call continues (its result is the
    model's next input, no heartbeat) unless an exit_loop rule names it or the step budget is spent.

    A heartbeat message is sent only when a rule forces another call: a required_before_exit tool not called yet.
    """
    if not parsed.calls:
        missing = rule_solver.missing_before_exit(tool_rules, history)
        if not missing:
            cut = finish_reason == "length"
            return Decision(False, StopReason.MAX_TOKENS_EXCEEDED if cut else StopReason.END_TURN)
        if steps_taken >= max_steps:
            return Decision(False, StopReason.MAX_STEPS)
        return Decision(True, None, f"{NON_USER_PREFIX}You must call {', '.join(missing)} before ending your response.")
    if any(c.valid and rule_solver.has_exit_rule(c.name, tool_rules) for c in parsed.calls):
        return Decision(False, StopReason.END_TURN)
    if steps_taken >= max_steps:
        all_invalid = all(not c.valid for c in parsed.calls)
        return Decision(False, StopReason.INVALID_TOOL_CALL if all_invalid else StopReason.MAX_STEPS)
    return Decision(True, None, None)


def heartbeat_message(reason: str = HEARTBEAT_REASON, now: datetime | None = None) -> str:
    """The user-role heartbeat text that chains steps (Letta's JSON shape)."""
    return json.dumps({"type": "heartbeat", "reason": reason, "time": format_time(now)}, ensure_ascii=False)


# --------------------------------------------------------------------------- tool results


def truncate_output(text: str, limit: int) -> str:
    """Cut a tool's output at `limit` characters with Letta's note saying so (letta/utils.py
    validate_function_response, word for word: clients and prompts match on it); a limit of 0 cuts nothing."""
    if limit <= 0 or len(text) <= limit:
        return text
    return (
        f"{text[:limit]}... [NOTE: function output was truncated since it exceeded the character limit "
        f"({len(text)} > {limit})]"
    )


def _stringify(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return "None"
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def format_tool_result(*, ok: bool, message: Any, return_char_limit: int = 50000, now: datetime | None = None) -> str:
    """The tool message content the model reads: {"status": "OK"|"Failed", "message": ..., "time": ...}."""
    text = truncate_output(_stringify(message), return_char_limit)
    return json.dumps(
        {"status": "OK" if ok else "Failed", "message": text, "time": format_time(now)}, ensure_ascii=False
    )


def tool_error_text(name: str, exc: BaseException | str, type_name: str | None = None) -> str:
    """Letta's error text for a tool that raised: "Error executing function {name}: {Type}: {msg}"."""
    if isinstance(exc, BaseException):
        return f"Error executing function {name}: {type(exc).__name__}: {exc}"
    return f"Error executing function {name}: {type_name or 'Error'}: {exc}"


# --------------------------------------------------------------------------- context pressure and eviction


def memory_pressure(total_tokens: int, window: int) -> str:
    """ "ok", "warn" (≥75 %: tell the agent to save what matters) or "evict" (≥90 %: summarize now)."""
    if total_tokens >= window * EVICTION_FRACTION:
        return "evict"
    if total_tokens >= window * MEMORY_WARNING_FRACTION:
        return "warn"
    return "ok"


def memory_pressure_warning(total_tokens: int, window: int) -> str:
    """The warning sent to the agent when its context passes 75 % of the window."""
    pct = round(100 * total_tokens / window) if window else 100
    return (
        f"{NON_USER_PREFIX}Memory pressure: your context window is {pct}% full ({total_tokens} of {window} tokens). "
        "The oldest messages will soon be removed from your context and replaced by a summary. Save anything "
        "important from the conversation to core memory or archival memory now."
    )


@dataclass(frozen=True, slots=True)
class EvictionPlan:
    """Which in-context messages to evict (oldest first) and which stay; `fits` says the target was reached."""

    evict: tuple[Message, ...]
    keep: tuple[Message, ...]
    kept_tokens: int
    fits: bool


def plan_eviction(messages: Sequence[Message], target_tokens: int, *, min_keep: int = 1) -> EvictionPlan:
    """Pick the fewest oldest messages to evict so the rest total ≤ target_tokens.

    A leading system message always stays. The cut never lands on a tool message, so an assistant tool
    call is never separated from its returns. At least `min_keep` newest messages stay (the current input).
    """
    head = tuple(messages[:1]) if messages and messages[0].role == Role.SYSTEM else ()
    body = list(messages[len(head) :])
    counts = [m.token_count for m in body]
    remaining = sum(counts)
    head_tokens = sum(m.token_count for m in head)
    last_cut = max(0, len(body) - min_keep)
    chosen = 0
    for cut in range(0, last_cut + 1):
        if cut:
            remaining -= counts[cut - 1]
        if cut < len(body) and body[cut].role == Role.TOOL:
            continue
        chosen = cut
        if remaining + head_tokens <= target_tokens:
            break
    kept = head + tuple(body[chosen:])
    kept_tokens = sum(m.token_count for m in kept)
    return EvictionPlan(tuple(body[:chosen]), kept, kept_tokens, kept_tokens <= target_tokens)


def summary_message_text(hidden_count: int, summary: str) -> str:
    """The text of the summary message that replaces evicted messages."""
    return (
        f"Note: {hidden_count} messages from the beginning of the conversation have been hidden from view due to "
        f"memory constraints. The following is a summary of the previous messages: {summary}"
    )


SUMMARIZER_SYSTEM = (
    "You summarize the oldest part of a conversation between an AI agent and a user so the agent can keep "
    "working after those messages leave its context window. Keep names, facts, decisions, open tasks and "
    "anything the user asked to remember. Fold the previous summary, if given, into the new one. Write in "
    "the first person from the agent's point of view, in at most {words} words. Reply with the summary only."
)


def _transcript_line(m: Message, per_message_chars: int) -> str:
    text = m.content[:per_message_chars]
    if m.role == Role.ASSISTANT and m.tool_calls:
        calls = "; ".join(f"{c.name}({c.arguments[:per_message_chars]})" for c in m.tool_calls)
        return f"[assistant] {text} called: {calls}".replace("]  called", "] called")
    if m.role == Role.TOOL:
        return f"[tool result {m.name or ''}] {text}"
    return f"[{m.role}] {text}"


def build_summarizer_request(
    *,
    model: str,
    evicted: Sequence[Message],
    previous_summary: str | None = None,
    max_words: int = 150,
    max_chars: int = 100_000,
    per_message_chars: int = 2_000,
) -> dict[str, Any]:
    """A tool-less chat request asking the model to summarize evicted messages, folding in the previous summary."""
    lines = [_transcript_line(m, per_message_chars) for m in evicted if m.role != Role.SYSTEM]
    dropped = 0
    while lines and sum(len(x) + 1 for x in lines) > max_chars:
        lines.pop(0)
        dropped += 1
    parts = []
    if previous_summary:
        parts.append(f"Previous summary:\n{previous_summary}\n")
    if dropped:
        parts.append(f"({dropped} older messages omitted for length)")
    parts.append("Messages to summarize, oldest first:\n" + "\n".join(lines))
    return {
        "model": model,
        "messages": [
            {"role": "system", "content": SUMMARIZER_SYSTEM.format(words=max_words)},
            {"role": "user", "content": "\n".join(parts)},
        ],
    }
