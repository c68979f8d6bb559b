"""A model's reply as an LLMResult: a whole chat completion, or a stream's chunks read to the end (each fragment passed
on as a Delta). Chunks and completions are plain dicts (our own client) or litellm's objects: both read the same."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from core.engine.types import Delta, LLMResult, ToolCall, Usage
from core.llm.errors import LLMError, clean

STREAM_ENDED = "The model's stream ended before the reply was complete"

# Ends a stream as OpenAI's `data: [DONE]` does: the reply is complete, a stop if no chunk said why it finished.
DONE = object()


def get(obj: Any, key: str, default: Any = None) -> Any:
    """A field of a dict or of an object."""
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def usage_of(raw: Any) -> Usage:
    """A reply's usage fields (OpenAI's names) as a Usage."""
    if not raw:
        return Usage()
    details = get(raw, "completion_tokens_details") or {}
    prompt_details = get(raw, "prompt_tokens_details") or {}
    prompt = int(get(raw, "prompt_tokens") or 0)
    completion = int(get(raw, "completion_tokens") or 0)
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=int(get(raw, "total_tokens") or prompt + completion),
        reasoning_tokens=int(get(details, "reasoning_tokens") or 0),
        cached_tokens=int(get(prompt_details, "cached_tokens") or 0),
    )


def _reasoning(message: dict[str, Any]) -> str | None:
    # `reasoning_content` (DeepSeek's name, litellm's), `reasoning` (vLLM's, GLM's), or Anthropic's thinking blocks
    text = message.get("reasoning_content") or message.get("reasoning")
    if text:
        return str(text)
    blocks = message.get("thinking_blocks") or []
    parts = [str(get(b, "thinking") or "") for b in blocks if get(b, "type") == "thinking"]
    return "\n".join(p for p in parts if p) or None


def _thinking_blocks(blocks: Any) -> tuple[dict[str, Any], ...]:
    """Signed thinking and redacted-thinking blocks as plain dicts, exactly as the provider sent them."""
    out = []
    for b in blocks or []:
        kind = get(b, "type")
        if kind == "thinking":
            out.append(
                {"type": "thinking", "thinking": str(get(b, "thinking") or ""), "signature": get(b, "signature")}
            )
        elif kind == "redacted_thinking":
            out.append({"type": "redacted_thinking", "data": get(b, "data")})
    return tuple(out)


def completion_result(raw: dict[str, Any], latency_ms: float) -> LLMResult:
    """A whole chat completion (a dict, as OpenAI's wire carries it) as an LLMResult; `raw` is kept as the record."""
    choice = raw["choices"][0] if raw.get("choices") else {}
    message = choice.get("message") or {}
    calls = tuple(
        ToolCall(
            id=tc.get("id") or f"call_{i}",
            name=(tc.get("function") or {}).get("name") or "",
            arguments=(tc.get("function") or {}).get("arguments") or "{}",
        )
        for i, tc in enumerate(message.get("tool_calls") or [])
    )
    return LLMResult(
        content=message.get("content") or None,
        reasoning=_reasoning(message),
        tool_calls=calls,
        thinking_blocks=_thinking_blocks(message.get("thinking_blocks")),
        usage=usage_of(raw.get("usage")),
        finish_reason=choice.get("finish_reason"),
        model=raw.get("model") or "",
        raw=raw,
        latency_ms=latency_ms,
    )


@dataclass
class _CallBuffer:
    id: str | None = None
    name: str = ""
    arguments: str = ""


@dataclass
class _Stream:
    """A streamed reply as its chunks arrive: the text, reasoning, tool calls and thinking blocks so far."""

    emit: Callable[[Delta], None]
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, _CallBuffer] = field(default_factory=dict)
    blocks: list[dict[str, Any]] = field(default_factory=list)
    usage: Any = None
    finish: str | None = None
    model: str = ""
    id: str | None = None
    created: int | None = None

    def feed(self, chunk: Any) -> None:
        """Fold one chunk in, passing its fragments on as Deltas."""
        if chunk is DONE:
            self.finish = self.finish or "stop"
            return
        self.model = get(chunk, "model") or self.model
        self.id = self.id or get(chunk, "id")
        self.created = self.created or get(chunk, "created")
        self.usage = get(chunk, "usage") or self.usage
        for choice in get(chunk, "choices") or []:
            self.finish = get(choice, "finish_reason") or self.finish
            if (delta := get(choice, "delta")) is not None:
                self._delta(delta)

    def _delta(self, delta: Any) -> None:
        if r := get(delta, "reasoning_content") or get(delta, "reasoning"):
            self.reasoning.append(r)
            self.emit(Delta("reasoning", r))
        for b in get(delta, "thinking_blocks") or []:
            _stream_thinking_block(self.blocks, b)
        if c := get(delta, "content"):
            self.text.append(c)
            self.emit(Delta("text", c))
        for tc in get(delta, "tool_calls") or []:
            idx = get(tc, "index") or 0
            buf = self.calls.setdefault(idx, _CallBuffer())
            fn = get(tc, "function")
            buf.id = get(tc, "id") or buf.id
            buf.name = (get(fn, "name") or "") if not buf.name else buf.name
            piece = get(fn, "arguments") or ""
            if not isinstance(piece, str):  # an object: its JSON, as litellm's parser takes it
                piece = json.dumps(piece)
            buf.arguments += piece
            self.emit(Delta("tool_call", piece, idx, buf.id, buf.name))

    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(
            ToolCall(id=b.id or f"call_{i}", name=b.name, arguments=b.arguments or "{}")
            for i, b in sorted(self.calls.items())
        )


def stream_result(
    chunks: Iterable[Any],
    on_delta: Callable[[Delta], None] | None,
    started: float,
    estimate_usage: Callable[[str, tuple[ToolCall, ...]], dict[str, int]] | None = None,
) -> LLMResult:
    """Read a streamed reply to its end, passing each fragment to `on_delta`; the result (and its `raw`, shaped like a
    whole completion) is the same as the whole call's. A stream whose provider reported no usage gets
    `estimate_usage(text, tool_calls)`. A stream that stops before the model said why it finished raises
    LLMError("stream_incomplete")."""
    first: list[float] = []
    passed_on = on_delta or (lambda d: None)

    def emit(delta: Delta) -> None:
        if not first:
            first.append((time.perf_counter() - started) * 1000)
        passed_on(delta)

    stream = _Stream(emit=emit)
    received = 0
    iterator = iter(chunks)
    while True:
        try:
            chunk = next(iterator)
        except StopIteration:
            break
        except LLMError:
            raise
        except Exception as exc:
            if not received:  # nothing came: the provider's failure, mapped by the caller
                raise
            # An SDK's own account of a stream that broke after chunks came (litellm raises one of its errors).
            raise LLMError("stream_incomplete", f"{STREAM_ENDED}: {clean(str(exc))}") from exc
        received += 1
        stream.feed(chunk)  # outside the try: what `on_delta` raises is the caller's, never taken for a break
    if stream.finish is None:
        raise LLMError("stream_incomplete", f"{STREAM_ENDED} (the connection dropped or the provider stopped sending).")
    text, reasoning, tool_calls = "".join(stream.text), "".join(stream.reasoning), stream.tool_calls()
    usage = stream.usage
    if usage is None and estimate_usage is not None:
        usage = estimate_usage(reasoning + text, tool_calls)
    usage_dict = usage.model_dump() if hasattr(usage, "model_dump") else (dict(usage) if usage else {})
    message = {
        "role": "assistant",
        "content": text or None,
        "reasoning_content": reasoning or None,
        "tool_calls": [t.to_openai() for t in tool_calls] or None,
        **({"thinking_blocks": stream.blocks} if stream.blocks else {}),
    }
    raw = {
        "id": stream.id,
        "created": stream.created,
        "object": "chat.completion",
        "model": stream.model,
        "choices": [{"index": 0, "finish_reason": stream.finish, "message": message}],
        "usage": usage_dict,
    }
    return LLMResult(
        content=text or None,
        reasoning=reasoning or None,
        tool_calls=tool_calls,
        thinking_blocks=tuple(stream.blocks),
        usage=usage_of(usage_dict),
        finish_reason=stream.finish,
        model=stream.model,
        raw=raw,
        latency_ms=(time.perf_counter() - started) * 1000,
        first_token_ms=first[0] if first else None,
    )


def _stream_thinking_block(blocks: list[dict[str, Any]], piece: Any) -> None:
    """Fold one streamed thinking-block fragment into `blocks`: thinking text extends the open block, a signature
    closes it (Anthropic's thinking_delta then signature_delta), a redacted block stands alone."""
    kind = get(piece, "type") or "thinking"
    if kind == "redacted_thinking":
        blocks.append({"type": "redacted_thinking", "data": get(piece, "data")})
        return
    open_block = blocks[-1] if blocks and blocks[-1]["type"] == "thinking" and not blocks[-1]["signature"] else None
    if open_block is None:
        open_block = {"type": "thinking", "thinking": "", "signature": None}
        blocks.append(open_block)
    open_block["thinking"] += str(get(piece, "thinking") or "")
    if get(piece, "signature"):
        open_block["signature"] = get(piece, "signature")
