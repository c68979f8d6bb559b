"""Token counting with the model's own tokenizer where one exists offline, and model context-window lookup.

The tokenizer data are our own copies, in `core/engine/tokenizer_data/` (gzipped; sources, licences and sha256 in
its README, checked by a test): OpenAI's cl100k_base and o200k_base BPE ranks, built into a `tiktoken.Encoding`
through its public constructor, and Anthropic's (Claude 2) and DeepSeek's Hugging Face tokenizer.json, loaded with
`tokenizers.Tokenizer.from_str`. Each loads on first use. litellm's own counter is no substitute: importing litellm
costs seconds (only `core/llm/via_litellm.py` does, lazily), which compiling a context must not pay, and it counts
some models with other encodings than these.

Context windows, output limits and prices come from our copy of litellm's model facts (`core/engine/model_map.py`,
refreshed by `scripts/model-map`), read without importing litellm.

Safety margins (why counts may exceed the raw tokenizer output):
- exact tokenizers (OpenAI models via tiktoken, DeepSeek via its tokenizer.json): no margin;
- Anthropic: the only published Anthropic tokenizer is Claude 2's; Claude 3+ tokenize differently,
  so counts get +15 %;
- anything else falls back to cl100k_base with +10 %: cl100k is among the most compact BPEs for English
  and code, so other models' tokenizers rarely produce more than that; a provider error stays possible
  for unusual scripts, and the runner handles a context-length error reactively anyway.
Every message also pays a fixed framing overhead (role, separators), as in OpenAI's cookbook counting.
"""

from __future__ import annotations

import base64
import gzip
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from core.engine import model_map
from core.engine.types import Message, compact_json

DEFAULT_CONTEXT_WINDOW = 128_000
MESSAGE_OVERHEAD_TOKENS = 4
REPLY_PRIMING_TOKENS = 3
TOOL_OVERHEAD_TOKENS = 8
FALLBACK_MARGIN = 1.10
ANTHROPIC_MARGIN = 1.15


@dataclass(frozen=True, slots=True)
class Tokenizer:
    """A text→token-count function and the name of what it is (shown to users next to every count)."""

    name: str
    exact: bool
    _encode_len: Callable[[str], int]
    margin: float = 1.0

    def count(self, text: str) -> int:
        """Tokens in `text` (with this tokenizer's safety margin applied), remembered for texts that recur."""
        if not text:
            return 0
        return _cached_count(self, text)

    def count_once(self, text: str) -> int:
        """Tokens in a text counted once (a message as it is stored): not remembered, so each message written does
        not take a place in the cache of recurring texts (and keep its text alive there)."""
        if not text:
            return 0
        n = self._encode_len(text)
        return n if self.margin == 1.0 else math.ceil(n * self.margin)


@lru_cache(maxsize=8192)
def _cached_count(tok: Tokenizer, text: str) -> int:
    # Block values, the system prompt and tool schemas recur on every compile; history never reaches here.
    n = tok._encode_len(text)
    return n if tok.margin == 1.0 else math.ceil(n * tok.margin)


DATA_DIR = Path(__file__).resolve().with_name("tokenizer_data")

# The split pattern and special tokens of OpenAI's encodings, as tiktoken defines them (tiktoken_ext/openai_public.py
# in openai/tiktoken, MIT); the ranks come from our copies of the .tiktoken files it downloads.
_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
OPENAI_ENCODINGS: dict[str, tuple[str, dict[str, int]]] = {
    "cl100k_base": (
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
    "o200k_base": (_O200K_PATTERN, {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}),
}


def read_data(filename: str) -> bytes:
    """The bytes of one of our tokenizer files (stored gzipped)."""
    return gzip.decompress((DATA_DIR / f"{filename}.gz").read_bytes())


def bpe_ranks(data: bytes) -> dict[bytes, int]:
    """Mergeable ranks from a .tiktoken file: one `<token, base64> <rank>` line per token."""
    return {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in data.splitlines() if line)}


@lru_cache(maxsize=8)
def _tiktoken(encoding: str) -> Callable[[str], int]:
    import tiktoken  # only on first use: most of a second with the ranks, which importing this module must not pay

    pattern, special_tokens = OPENAI_ENCODINGS[encoding]
    enc = tiktoken.Encoding(
        name=encoding,
        pat_str=pattern,
        mergeable_ranks=bpe_ranks(read_data(f"{encoding}.tiktoken")),
        special_tokens=special_tokens,
    )
    return lambda text: len(enc.encode(text, disallowed_special=()))


def warm_up() -> None:
    """Load the two OpenAI encodings now (server start-up): loading one takes most of a second, which the first
    message counted with it would otherwise wait (cl100k_base also counts every model we have no tokenizer for)."""
    for encoding in ("cl100k_base", "o200k_base"):
        _tiktoken(encoding)("warm")


@lru_cache(maxsize=8)
def _hf(filename: str) -> Callable[[str], int]:
    from tokenizers import Tokenizer as HFTokenizer  # only models counted with a Hugging Face tokenizer need it

    tk = HFTokenizer.from_str(read_data(filename).decode("utf-8"))
    return lambda text: len(tk.encode(text, add_special_tokens=False).ids)


def _bare_name(model: str) -> str:
    return model.split("/", 1)[1] if "/" in model else model


def _openai_encoding(name: str) -> str | None:
    n = name.lower()
    if n.startswith(("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o", "gpt-oss")):
        return "o200k_base"
    if n.startswith(("gpt-4", "gpt-3.5", "text-embedding")):
        return "cl100k_base"
    return None


@lru_cache(maxsize=256)
def get_tokenizer(model: str) -> Tokenizer:
    """The tokenizer for a litellm model handle (cached); falls back to cl100k_base with a margin."""
    provider = model.split("/", 1)[0].lower() if "/" in model else ""
    name = _bare_name(model).lower()
    encoding = (
        _openai_encoding(name) if provider in ("", "openai", "azure", "openrouter") or name.startswith("gpt") else None
    )
    if encoding:
        return Tokenizer(f"tiktoken:{encoding}", True, _tiktoken(encoding))
    try:
        if "deepseek" in name:
            return Tokenizer("hf:deepseek", True, _hf("deepseek_tokenizer.json"))
        if "claude" in name or provider == "anthropic":
            return Tokenizer(
                "hf:anthropic(claude-2)+15%", False, _hf("anthropic_claude2_tokenizer.json"), ANTHROPIC_MARGIN
            )
    except Exception:  # noqa: BLE001 - an unreadable tokenizer file must not break counting
        pass
    return Tokenizer("tiktoken:cl100k_base+10%(fallback)", False, _tiktoken("cl100k_base"), FALLBACK_MARGIN)


def count_text(model: str, text: str) -> int:
    """Tokens in a text for this model."""
    return get_tokenizer(model).count(text)


def count_message(model: str, message: Message | dict[str, Any]) -> int:
    """Tokens one message costs in a request (content + tool calls + framing); store it on the message row."""
    tok = get_tokenizer(model)
    data = message.to_openai() if isinstance(message, Message) else message
    n = MESSAGE_OVERHEAD_TOKENS
    content = data.get("content")
    if isinstance(content, list):
        content = "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    n += tok.count_once(content or "")
    for tc in data.get("tool_calls") or []:
        fn = tc.get("function") or {}
        n += tok.count(fn.get("name", "")) + tok.count_once(fn.get("arguments", "")) + MESSAGE_OVERHEAD_TOKENS
    if data.get("tool_call_id"):
        n += tok.count_once(data["tool_call_id"])
    if data.get("name"):
        n += tok.count(data["name"])
    return n


def count_tool(model: str, tool: dict[str, Any]) -> int:
    """Tokens one OpenAI-format tool definition costs (its compact JSON, as the request's body carries it, plus
    framing)."""
    return get_tokenizer(model).count(compact_json(tool)) + TOOL_OVERHEAD_TOKENS


def with_token_count(model: str, message: Message) -> Message:
    """A copy of the message with `token_count` filled in (the runner does this once, before storing)."""

    return replace(message, token_count=count_message(model, message))


# --------------------------------------------------------------------------- model info (offline cost map)


@dataclass(frozen=True, slots=True)
class ModelInfo:
    handle: str
    context_window: int
    max_output_tokens: int | None
    supports_reasoning: bool
    supports_function_calling: bool
    known: bool
    mode: str | None = None  # the cost map's: "chat" (chat completions), "responses" (OpenAI's Responses API only), ...


@lru_cache(maxsize=512)
def model_info(handle: str) -> ModelInfo:
    """Context window and capabilities for a handle from the model map; 128k when unknown."""
    table = model_map.table()
    name = _bare_name(handle)
    entry = table.get(handle) or table.get(name) or table.get(name.split(":", 1)[0])
    if not isinstance(entry, dict):
        return ModelInfo(handle, DEFAULT_CONTEXT_WINDOW, None, False, True, False)
    window = entry.get("max_input_tokens") or entry.get("max_tokens") or DEFAULT_CONTEXT_WINDOW
    return ModelInfo(
        handle=handle,
        context_window=int(window),
        max_output_tokens=entry.get("max_output_tokens"),
        supports_reasoning=bool(entry.get("supports_reasoning")),
        supports_function_calling=bool(entry.get("supports_function_calling", True)),
        known=True,
        mode=entry.get("mode"),
    )


def step_cost(handle: str, usage: dict) -> float | None:
    """A call's price in USD from the model map, or None when the model has no known price."""
    table = model_map.table()
    name = _bare_name(handle)
    entry = table.get(handle) or table.get(name) or table.get(name.split(":", 1)[0])
    if not isinstance(entry, dict) or entry.get("input_cost_per_token") is None:
        return None
    cached = usage.get("cached_tokens") or 0
    prompt = (usage.get("prompt_tokens") or 0) - cached
    cached_price = entry.get("cache_read_input_token_cost", entry["input_cost_per_token"])
    cost = (
        prompt * entry["input_cost_per_token"]
        + cached * cached_price
        + (usage.get("completion_tokens") or 0) * (entry.get("output_cost_per_token") or 0)
    )
    return round(cost, 10)


def context_window(handle: str, limit: int | None = None) -> int:
    """The effective window: the agent's `context_window_limit` if set, capped at the model's maximum."""
    info = model_info(handle)
    if not limit:
        return info.context_window
    # An unknown model (a local server, a fine-tune) may well have a bigger window than our default.
    return min(limit, info.context_window) if info.known else limit
