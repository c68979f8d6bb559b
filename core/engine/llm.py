"""The one module that talks to model providers, through litellm (imported lazily: it costs seconds).

`complete` sends a compiled request and returns a normalised LLMResult; every provider failure becomes an
LLMError with a kind the runner can act on (context_length → evict and retry; the rest → llm_api_error).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Literal

from core.engine import jsontext
from core.engine.types import LLMResult, ToolCall, Usage

ErrorKind = Literal["api_error", "rate_limit", "timeout", "context_length", "auth", "bad_request", "stream_incomplete"]
DeltaKind = Literal["reasoning", "text", "tool_call"]

_CONTEXT_MARKERS = (
    "context_length_exceeded",
    "maximum context length",
    "context window",
    "prompt is too long",
    "too many tokens",
    "input is too long",
    "exceeds the context",
)


class LLMError(Exception):
    """A failed model call, with a kind, the provider's HTTP status (if any) and a readable message."""

    def __init__(self, kind: ErrorKind, message: str, status: int | None = None):
        self.kind, self.status, self.message = kind, status, message
        super().__init__(message)

    def __repr__(self) -> str:
        return f"LLMError(kind={self.kind!r}, status={self.status!r}, message={self.message!r})"


@dataclass(frozen=True, slots=True)
class Delta:
    """A streamed fragment: reasoning text, reply text, or a piece of a tool call's arguments."""

    kind: DeltaKind
    text: str
    tool_index: int = 0
    tool_call_id: str | None = None
    tool_name: str | None = None


# The key sent for a provider that has none. litellm, given no key, takes one from the environment (OPENAI_API_KEY,
# ANTHROPIC_API_KEY, ...) and sends it to whatever base URL the call names: the deployment's key would reach a server
# a user configured. Callers pass the key the provider's owner gave; without one, this placeholder goes instead.
NO_KEY = "no-key"
# Call options that say where a call goes or what it authenticates with: only `complete`'s own arguments set them,
# never the request (a `base_url` in it would win over `api_base` in litellm).
_ROUTING_PARAMS = frozenset(
    {
        "api_base",
        "base_url",
        "api_key",
        "api_version",
        "organization",
        "headers",
        "extra_headers",
        "custom_llm_provider",
        "model_list",
        "deployment_id",
        "azure_ad_token",
        "aws_access_key_id",
        "aws_secret_access_key",
        "aws_session_token",
        "vertex_credentials",
    }
)

log = logging.getLogger(__name__)
_lock = threading.Lock()
_litellm: Any = None
# OpenAI-compatible providers through litellm's own HTTP handler (the one its other providers use) rather than the
# openai SDK. The SDK closes a finished stream's connection before reading the response's end (openai-python
# #3440), so every streamed call opened a new TCP connection; litellm's handler reads to the end and the
# connection is reused. It also parses each chunk once, into litellm's own type, where the SDK first built its
# own models: about 1 ms of CPU less a streamed call, 0.5 ms a plain one (README, Benchmarks). Set the variable
# to "false" for the SDK's path.
OPENAI_HTTP_HANDLER = "EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER"


def _lib() -> Any:
    """Import and configure litellm once: offline cost map, no retries, no callbacks, no debug chatter."""
    global _litellm
    if _litellm is None:
        with _lock:
            if _litellm is None:
                os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault(OPENAI_HTTP_HANDLER, "true")
                import litellm  # here, not at module level: it takes seconds, and reads the variables above

                litellm.suppress_debug_info = True
                litellm.telemetry = False
                litellm.drop_params = True
                litellm.num_retries = 0
                # Per-chunk logging runs in a thread pool for callbacks we never register; it costs ~10 ms a stream.
                litellm.disable_streaming_logging = True
                litellm.callbacks = []
                litellm.success_callback = []
                litellm.failure_callback = []
                _litellm = litellm
    return _litellm


def _no_success_logging():
    """A context in which litellm skips its success logging. After every call litellm hands the response to a
    logging thread that builds a payload for callbacks (a copy of every message, a price lookup): about 3 ms of
    CPU a call, competing with the server for the GIL. We register no callbacks, so our calls run as litellm's own
    sub-calls, which skip that hand-off (tests/core/engine/test_llm.py checks it stays skipped). A stream's wrapper
    hands it over at the stream's end whatever the context: `_stream_logged_already` makes that a no-op."""
    try:
        from litellm._internal_context import internal_sub_call
    except ImportError:  # a litellm without it: calls log as before
        return contextlib.nullcontext()
    return internal_sub_call()


def _stream_logged_already(chunks: Any) -> None:
    """Mark a stream's call as logged: at its end litellm's stream wrapper hands the whole response to the logging
    thread whatever the context, whose handler then builds a payload for callbacks we never register (~2 ms of CPU
    a stream). Marked, the handler returns at once (tests/core/engine/test_llm.py checks it)."""
    details = getattr(getattr(chunks, "logging_obj", None), "model_call_details", None)
    if isinstance(details, dict):
        details["has_logged_sync_success"] = True


def _stream_rebuild_skipped(chunks: Any) -> None:
    """Skip litellm's rebuild of a finished stream when the provider reported its usage. At a stream's end litellm's
    wrapper rebuilds the whole response from its chunks, twice, and prices it (for its callbacks and cache, which
    we do not use; about 2 ms of CPU for a short reply, more for a longer one), only to copy the usage onto its
    last chunk. `_reported_usage` reads that usage from the wrapper's chunks instead. A stream
    whose provider sent none is rebuilt as before: the rebuild then estimates it."""
    build = getattr(chunks, "_build_complete_streaming_response", None)
    if not callable(build) or not isinstance(getattr(chunks, "chunks", None), list):
        return  # another litellm: its wrapper rebuilds the response as it always did

    def build_unless_reported() -> Any:
        return None if _reported_usage(chunks.chunks) is not None else build()

    chunks._build_complete_streaming_response = build_unless_reported


def _provider_stream(chunks: Any) -> Any | None:
    """The provider's own chunk iterator inside litellm's stream wrapper, when its chunks are complete already:
    an OpenAI-compatible provider's through litellm's HTTP handler (OPENAI_HTTP_HANDLER), which parses each event
    into litellm's chunk type (reasoning fields named as litellm names them, an error event raised). Over those
    chunks the wrapper adds only what this server does not use (logging, its rebuild and price of the whole
    response, per-chunk debug text formatted even with debugging off): about 3 ms of CPU a streamed call, half of
    it (tests/core/engine/test_llm.py). None for every other provider: its stream is read through the wrapper."""
    try:
        from litellm.llms.openai.chat.gpt_transformation import OpenAIChatCompletionStreamingHandler
    except ImportError:  # another litellm: its wrapper it is
        return None
    inner = getattr(chunks, "completion_stream", None)
    return inner if isinstance(inner, OpenAIChatCompletionStreamingHandler) else None


def _read_provider_stream(provider: Any, request: dict[str, Any], litellm: Any):
    """Yield a provider stream's chunks, then release its connection to the pool. A connection that breaks midway
    is a stream that ended early; an error the provider sent in the stream keeps its status (map_error). A provider
    that reported no usage gets litellm's own estimate, as through its wrapper."""
    seen: list[Any] = []
    reported = False
    try:
        for chunk in provider:
            reported = reported or _get(chunk, "usage") is not None
            seen.append(chunk)
            yield chunk
    except LLMError:
        raise
    except Exception as exc:  # noqa: BLE001 - transport errors of any HTTP client
        if getattr(exc, "status_code", None) is not None or "timeout" in type(exc).__name__.lower():
            raise map_error(exc, model=str(request.get("model", ""))) from exc
        raise LLMError(
            "stream_incomplete",
            f"The model's stream ended before the reply was complete ({request.get('model', '')}): "
            f"{_clean(str(exc)) or type(exc).__name__}",
        ) from exc
    finally:
        with contextlib.suppress(Exception):
            provider.close()
    if not reported and seen:
        rebuilt = litellm.stream_chunk_builder(
            [_as_litellm_chunk(litellm, c) for c in seen if _get(c, "choices") is not None],
            messages=request.get("messages"),
        )
        if rebuilt is not None and _get(rebuilt, "usage") is not None:
            yield {"choices": [], "usage": _get(rebuilt, "usage")}


def _as_litellm_chunk(litellm: Any, chunk: Any) -> Any:
    """A chunk as litellm's stream parser makes it (the direct path reads plain JSON objects)."""
    if not isinstance(chunk, dict):
        return chunk
    fields = ("id", "created", "model", "choices", "system_fingerprint", "usage")
    return litellm.ModelResponseStream(object="chat.completion.chunk", **{k: chunk[k] for k in fields if k in chunk})


def _reported_usage(chunks: list[Any]) -> dict[str, Any] | None:
    """The usage a provider reported over a stream's chunks, totalled as litellm does: the latest value of each field
    (Anthropic reports prompt tokens at the start and completion tokens at the end); None if no chunk had any."""
    total: dict[str, Any] = {}
    for chunk in chunks:
        if usage := _get(chunk, "usage"):
            fields = usage.model_dump() if hasattr(usage, "model_dump") else dict(usage)
            total.update((key, value) for key, value in fields.items() if value is not None)
    if not total:
        return None
    total["total_tokens"] = int(total.get("prompt_tokens") or 0) + int(total.get("completion_tokens") or 0)
    return total


_known_prices: set[str] = set()


def _price_lookup_cheap(litellm: Any, model: str) -> None:
    """Make litellm's own per-call price lookup cheap for a model its cost map lacks (a local or proxied model):
    without an entry, every call walks its model-name generalisations twice (~1 ms; more for a stream, priced twice
    at its end). The entry is litellm's in-process table only, priced 0 there: our step costs come from the
    bundled cost map (core.engine.tokens.step_cost), which still finds no price for the model."""
    if model in _known_prices:
        return
    with _lock:
        try:
            litellm.get_model_info(model)  # known: its lookups are direct already
            known = True
        except Exception:  # noqa: BLE001 - litellm raises a bare Exception for a model it does not know
            known = False
        if not known:
            provider = model.split("/", 1)[0] if "/" in model else "openai"
            quiet = logging.getLogger("LiteLLM")
            level = quiet.level
            quiet.setLevel(logging.ERROR)  # it warns that a custom-priced model has no cache prices
            try:
                litellm.register_model(
                    {model: {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0, "litellm_provider": provider}}
                )
            finally:
                quiet.setLevel(level)
        _known_prices.add(model)


def warm_up() -> None:
    """Import litellm and build its HTTP client (an SSL context: about 0.1 s of CPU) now, at server start-up, rather
    than on the first message."""
    _lib()
    with contextlib.suppress(Exception):  # a litellm without the direct path's parts builds it on the first call
        _direct_parts().http_client({"ssl_verify": None})


def is_context_length_error(error: BaseException) -> bool:
    """Whether an error (ours or a provider's) means the prompt did not fit the model's window."""
    if isinstance(error, LLMError):
        return error.kind == "context_length"
    text = str(error).lower()
    return type(error).__name__ == "ContextWindowExceededError" or any(m in text for m in _CONTEXT_MARKERS)


_NOISE = re.compile(r"^(?:litellm\.)?(?:\w+(?:Error|Exception))(?: - |: ?)")


def _clean(message: str) -> str:
    # litellm stacks class-name prefixes ("BadRequestError: ContextWindowExceededError: ..."); keep the provider's words.
    text = " ".join(str(message).split()).replace("Error_str: ", "")
    text = text.split(" Traceback (most recent call last):", 1)[0]  # litellm appends its own stack to some messages
    while (m := _NOISE.match(text)) is not None:
        text = text[m.end() :]
    return text[:1000]


def map_error(error: BaseException, *, model: str = "") -> LLMError:
    """Translate a litellm/openai exception into an LLMError with a readable message."""
    if isinstance(error, LLMError):
        return error
    name = type(error).__name__
    status = getattr(error, "status_code", None) or getattr(error, "status", None)
    status = status if isinstance(status, int) else None
    detail = _clean(getattr(error, "message", None) or str(error))
    who = f" ({model})" if model else ""
    if "stream ended" in detail.lower() or "midstream" in name.lower():
        return LLMError(
            "stream_incomplete", f"The model's stream ended before the reply was complete{who}: {detail}", status
        )
    if is_context_length_error(error):
        return LLMError(
            "context_length", f"The prompt is longer than the model's context window{who}: {detail}", status or 400
        )
    if name in ("RateLimitError", "CallerCredentialRateLimitError") or status == 429:
        return LLMError("rate_limit", f"Rate limited by the provider{who}: {detail}", status or 429)
    if name in ("Timeout", "APITimeoutError") or "timed out" in detail.lower():
        return LLMError("timeout", f"The model{who} did not answer in time: {detail}", status)
    if name in ("AuthenticationError", "PermissionDeniedError", "CallerCredentialAuthenticationError") or status in (
        401,
        403,
    ):
        return LLMError("auth", f"The provider rejected the credentials{who}; check the API key: {detail}", status)
    if status is not None and 400 <= status < 500:
        return LLMError("bad_request", f"The provider rejected the request{who} (HTTP {status}): {detail}", status)
    if name == "APIConnectionError":
        return LLMError("api_error", f"Could not reach the model provider{who}: {detail}", status)
    return LLMError(
        "api_error", f"The model provider failed{who}" + (f" (HTTP {status})" if status else "") + f": {detail}", status
    )


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _usage(raw: Any) -> Usage:
    if not raw:
        return Usage()
    details = _get(raw, "completion_tokens_details") or {}
    prompt_details = _get(raw, "prompt_tokens_details") or {}
    prompt = int(_get(raw, "prompt_tokens") or 0)
    completion = int(_get(raw, "completion_tokens") or 0)
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=int(_get(raw, "total_tokens") or prompt + completion),
        reasoning_tokens=int(_get(details, "reasoning_tokens") or 0),
        cached_tokens=int(_get(prompt_details, "cached_tokens") or 0),
    )


def _reasoning(message: Any) -> str | None:
    text = _get(message, "reasoning_content")
    if text:
        return str(text)
    blocks = _get(message, "thinking_blocks") or []
    parts = [str(_get(b, "thinking") or "") for b in blocks if _get(b, "type") == "thinking"]
    return "\n".join(p for p in parts if p) or None


def _thinking_blocks(blocks: Any) -> tuple[dict[str, Any], ...]:
    """Signed thinking and redacted-thinking blocks as plain dicts, exactly as the provider sent them."""
    out = []
    for b in blocks or []:
        kind = _get(b, "type")
        if kind == "thinking":
            out.append(
                {"type": "thinking", "thinking": str(_get(b, "thinking") or ""), "signature": _get(b, "signature")}
            )
        elif kind == "redacted_thinking":
            out.append({"type": "redacted_thinking", "data": _get(b, "data")})
    return tuple(out)


def _result_from_response(response: Any, latency_ms: float) -> LLMResult:
    raw = response.model_dump() if hasattr(response, "model_dump") else dict(response)
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
        usage=_usage(raw.get("usage")),
        finish_reason=choice.get("finish_reason"),
        model=raw.get("model") or "",
        raw=raw,
        latency_ms=latency_ms,
    )


def complete(
    request: dict[str, Any],
    *,
    api_base: str | None = None,
    api_key: str | None = None,
    timeout: float = 120.0,
    stream: bool = False,
    on_delta: Callable[[Delta], None] | None = None,
) -> LLMResult:
    """Send one chat-completions request (the handle is request["model"]) with exactly the key given (none: NO_KEY,
    never one from the environment); blocks; raises LLMError."""
    litellm = _lib()
    kwargs = {k: v for k, v in request.items() if k not in _ROUTING_PARAMS}
    kwargs.update(
        api_base=api_base, api_key=api_key or NO_KEY, timeout=timeout, max_retries=0, num_retries=0, drop_params=True
    )
    started = time.perf_counter()
    try:
        _price_lookup_cheap(litellm, str(request.get("model", "")))
        config = _direct_config(litellm, request, api_base)
        if config is not None:
            return _direct_complete(litellm, config, kwargs, stream, on_delta, started)
        if not stream:
            with _no_success_logging():
                response = litellm.completion(**kwargs)
            return _result_from_response(response, (time.perf_counter() - started) * 1000)
        kwargs.update(stream=True, stream_options={"include_usage": True})
        with _no_success_logging():
            chunks = litellm.completion(**kwargs)
        provider = _provider_stream(chunks)
        if provider is not None:
            return _assemble_stream(_read_provider_stream(provider, kwargs, litellm), on_delta, started)
        _stream_logged_already(chunks)
        _stream_rebuild_skipped(chunks)
        return _assemble_stream(chunks, on_delta, started)
    except LLMError:
        raise
    except Exception as exc:  # noqa: BLE001 - every provider failure is mapped to one typed error
        raise map_error(exc, model=str(request.get("model", ""))) from exc


# ---------------------------------------------------------------------------------------------- the direct path
# A plain chat model of the `openai` provider (OpenAI's own, or any OpenAI-compatible server) is called through
# litellm's parts without its `completion()` around them: the model's provider config builds the request (the same
# transform_request, the same body), litellm's cached HTTP client sends it, its chunk parser reads the stream, its
# exception mapping types a failure. What `completion()` adds around those parts is work for a proxy this server
# never does: per call a logging object, the parameter checks of every provider, a responses-API routing check, a
# price of the stream object (tokenising the whole prompt), hidden parameters on the response. That was about 6 ms
# of CPU a call here, two thirds of a streamed call's cost (README, Benchmarks). Reasoning models (o-series, GPT-5),
# models litellm routes to the Responses API, requests carrying other parameters and every other provider go
# through `completion()` as before; `OPENAI_HTTP_HANDLER=false` (the openai SDK's path) turns this path off too.
# tests/core/engine/test_llm.py checks that both paths send the same body and give the same result.

_DIRECT_PARAMS = frozenset(
    {"model", "messages", "tools", "tool_choice", "temperature", "max_tokens", "parallel_tool_calls", "top_p"}
)
_direct_configs: dict[tuple[str, str, bool], Any] = {}


def _direct_config(litellm: Any, request: dict[str, Any], api_base: str | None) -> Any | None:
    """litellm's provider config for the request's model when the direct path serves it, else None."""
    model = str(request.get("model", ""))
    if not model.startswith("openai/") or not _DIRECT_PARAMS.issuperset(request):
        return None
    if os.environ.get(OPENAI_HTTP_HANDLER, "").lower() not in ("true", "1", "yes"):
        return None
    key = (model, api_base or "", bool(request.get("tools")))
    if key not in _direct_configs:
        _direct_configs[key] = _direct_config_for(litellm, model.split("/", 1)[1], api_base, request.get("tools"))
    return _direct_configs[key]


@functools.cache
def _direct_parts() -> SimpleNamespace:
    """The litellm parts the direct path uses (ImportError from a litellm that moved one: the path is off)."""
    from litellm.litellm_core_utils.exception_mapping_utils import exception_type
    from litellm.litellm_core_utils.prompt_templates.common_utils import get_completion_messages
    from litellm.llms.custom_httpx.http_handler import get_httpx_client
    from litellm.llms.custom_httpx.sse_lines import iter_sse_lines
    from litellm.llms.openai.chat.gpt_transformation import OpenAIGPTConfig, OpenAIUnknownModelConfig
    from litellm.llms.openai.common_utils import OpenAIError
    from litellm.responses.bridge_check import _resolve_openai_api_base, responses_api_bridge_check
    from litellm.utils import (
        ProviderConfigManager,
        validate_and_fix_openai_messages,
        validate_and_fix_openai_tools,
        validate_chat_completion_tool_choice,
    )

    return SimpleNamespace(
        plain_configs=(OpenAIGPTConfig, OpenAIUnknownModelConfig),
        chat_config=ProviderConfigManager.get_provider_chat_config,
        bridge_check=responses_api_bridge_check,
        resolve_api_base=_resolve_openai_api_base,
        fix_messages=validate_and_fix_openai_messages,
        completion_messages=get_completion_messages,
        fix_tools=validate_and_fix_openai_tools,
        fix_tool_choice=validate_chat_completion_tool_choice,
        http_client=get_httpx_client,
        sse_lines=iter_sse_lines,
        stream_error=OpenAIError,
        exception_type=exception_type,
    )


def _direct_config_for(litellm: Any, name: str, api_base: str | None, tools: Any) -> Any | None:
    try:
        parts = _direct_parts()
        config = parts.chat_config(model=name, provider=litellm.LlmProviders.OPENAI)
        if type(config) not in parts.plain_configs:
            return None  # a reasoning model: litellm maps its parameters and roles
        info, _ = parts.bridge_check(
            model=name, custom_llm_provider="openai", tools=tools, api_base=parts.resolve_api_base(api_base)
        )
        return None if info.get("mode") == "responses" else config
    except Exception:  # noqa: BLE001 - a litellm without these parts: completion() it is
        log.debug("no direct path for openai/%s", name, exc_info=True)
        return None


def _direct_complete(
    litellm: Any,
    config: Any,
    kwargs: dict[str, Any],
    stream: bool,
    on_delta: Callable[[Delta], None] | None,
    started: float,
) -> LLMResult:
    """One call on the direct path: the body built by the model's provider config, sent by litellm's HTTP client,
    read as the provider's chunk parser reads it (streamed: `_openai_stream_chunks`) or by litellm's response
    converter (whole); a failure typed by litellm's exception mapping, as `completion()` types it."""
    parts = _direct_parts()
    name = kwargs["model"].split("/", 1)[1]
    api_base = parts.resolve_api_base(kwargs.get("api_base"))
    api_key = kwargs["api_key"]  # complete() set it: never a key litellm or the environment would pick
    params = {k: v for k, v in kwargs.items() if k in _DIRECT_PARAMS and k not in ("model", "messages")}
    # What completion() tells the provider config about the call: the endpoint decides whether litellm keeps cache
    # marks (a custom base may be a proxy that reads them) and how it rewrites tool schemas for OpenAI's validator.
    litellm_params = {"custom_llm_provider": "openai", "api_base": kwargs.get("api_base"), "drop_params": True}
    try:
        # completion()'s own checks of what it was given: None fields dropped from messages, tools as dicts
        messages = parts.completion_messages(
            messages=parts.fix_messages(messages=kwargs["messages"]),
            ensure_alternating_roles=False,
            user_continue_message=None,
            assistant_continue_message=None,
        )
        if "tools" in params:
            params["tools"] = parts.fix_tools(tools=params["tools"])
        if "tool_choice" in params:
            params["tool_choice"] = parts.fix_tool_choice(tool_choice=params["tool_choice"], model=name)
        optional = config.map_openai_params(non_default_params=params, optional_params={}, model=name, drop_params=True)
        headers = config.validate_environment(
            headers={},
            model=name,
            messages=messages,
            optional_params=optional,
            litellm_params=litellm_params,
            api_key=api_key,
        )
        url = config.get_complete_url(
            api_base=api_base,
            api_key=api_key,
            model=name,
            optional_params=optional,
            litellm_params=litellm_params,
            stream=stream,
        )
        body = config.transform_request(
            model=name, messages=messages, optional_params=optional, litellm_params=litellm_params, headers=headers
        )
        if stream:
            body.update(stream=True, stream_options={"include_usage": True})
        client = parts.http_client({"ssl_verify": None})  # litellm's own cached client: the same connection pool
        response = client.post(
            url, headers=headers, data=jsontext.dumps(body), timeout=kwargs["timeout"], stream=stream
        )
    except Exception as exc:  # noqa: BLE001 - typed below as completion() types it
        try:
            litellm.main.base_llm_http_handler.handle_error(exc, config)  # raises the provider's error
        except Exception as provider_error:  # noqa: BLE001
            parts.exception_type(model=name, original_exception=provider_error, custom_llm_provider="openai")
        raise
    if stream:
        chunks = _openai_stream_chunks(parts.sse_lines(response.iter_text()), parts.stream_error, litellm.Usage)
        try:
            return _assemble_stream(_read_provider_stream(chunks, kwargs, litellm), on_delta, started)
        finally:
            response.close()
    try:
        parsed = litellm.utils.convert_to_model_response_object(
            response_object=response.json(),
            model_response_object=litellm.ModelResponse(),
            hidden_params={"headers": dict(response.headers)},
            _response_headers=dict(response.headers),
        )
    except Exception as exc:  # noqa: BLE001 - a body that is not a chat completion
        raise LLMError(
            "api_error", f"The model provider sent an unreadable response ({kwargs['model']}): {_clean(str(exc))}"
        ) from exc
    return _result_from_response(parsed, (time.perf_counter() - started) * 1000)


def _openai_stream_chunks(lines: Iterable[str], stream_error: type[Exception], usage_type: Any) -> Iterator[dict]:
    """An OpenAI-compatible stream's chunks as the JSON objects it sent, read as litellm's chunk parser for the
    provider reads them (its `OpenAIChatCompletionStreamingHandler`), without building its five pydantic objects a
    chunk: a line's `data:` prefix is dropped, `[DONE]` ends the reply (a stop if no chunk said why), text that is
    not a JSON object is skipped, an error object the provider sent in the stream raises with its status (500 when
    it names none) and so does a choice that finished with `abort`, a delta's `reasoning` (vLLM, GLM) is its
    `reasoning_content`, and the usage is litellm's `Usage` (its fields as a whole reply's). The direct path's
    results are compared with completion()'s in tests/core/engine/test_llm.py."""
    for line in lines:
        data = (line[6:] if line.startswith("data: ") else line[5:] if line.startswith("data:") else line).strip()
        if not data.startswith("{"):  # the blank line ending each event, `event:`/comment lines, text
            if data == "[DONE]":
                yield {"is_finished": True, "finish_reason": "stop"}
            continue
        try:
            chunk = jsontext.loads(data)
        except ValueError:
            continue
        if not isinstance(chunk, dict) or not chunk:
            continue
        if error := chunk.get("error"):
            code = error.get("code") if isinstance(error, dict) else None
            message = error.get("message") if isinstance(error, dict) else str(error)
            raise stream_error(
                status_code=code if isinstance(code, int) and 400 <= code < 600 else 500,
                message=message if isinstance(message, str) else json.dumps(error),
            )
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict):
                continue
            if choice.get("finish_reason") == "abort":
                raise stream_error(status_code=500, message="Upstream generation aborted (finish_reason=abort)")
            delta = choice.get("delta")
            if isinstance(delta, dict) and "reasoning" in delta:
                delta["reasoning_content"] = delta.pop("reasoning")
        if isinstance(chunk.get("usage"), dict):
            chunk["usage"] = usage_type(**chunk["usage"])
        yield chunk


@dataclass
class _CallBuffer:
    id: str | None = None
    name: str = ""
    arguments: str = ""


def _assemble_stream(chunks: Any, on_delta: Callable[[Delta], None] | None, started: float) -> LLMResult:
    """Read a streamed reply to its end, passing each fragment to `on_delta`; the result (and its `raw`, shaped
    like a non-streamed response) is the same as the non-streamed call's. A stream that stops before the
    model said why it finished raises LLMError("stream_incomplete")."""
    emit = on_delta or (lambda d: None)
    text, reasoning, calls, blocks = [], [], {}, []  # type: ignore[var-annotated]
    usage, finish, model, response_id, created = None, None, "", None, None
    for chunk in chunks:
        if isinstance(chunk, dict) and chunk.get("is_finished"):  # litellm's end-of-stream marker ([DONE])
            finish = finish or chunk.get("finish_reason") or None
            continue
        model = _get(chunk, "model") or model
        response_id = response_id or _get(chunk, "id")
        created = created or _get(chunk, "created")
        usage = _get(chunk, "usage") or usage
        for choice in _get(chunk, "choices") or []:
            finish = _get(choice, "finish_reason") or finish
            delta = _get(choice, "delta")
            if delta is None:
                continue
            if r := _get(delta, "reasoning_content"):
                reasoning.append(r)
                emit(Delta("reasoning", r))
            for b in _get(delta, "thinking_blocks") or []:
                _stream_thinking_block(blocks, b)
            if c := _get(delta, "content"):
                text.append(c)
                emit(Delta("text", c))
            for tc in _get(delta, "tool_calls") or []:
                idx = _get(tc, "index") or 0
                buf = calls.setdefault(idx, _CallBuffer())
                fn = _get(tc, "function")
                buf.id = _get(tc, "id") or buf.id
                buf.name = (_get(fn, "name") or "") if not buf.name else buf.name
                piece = _get(fn, "arguments") or ""
                if not isinstance(piece, str):  # an object: its JSON, as litellm's parser takes it
                    piece = json.dumps(piece)
                buf.arguments += piece
                emit(Delta("tool_call", piece, idx, buf.id, buf.name))
    if finish is None:
        raise LLMError(
            "stream_incomplete",
            "The model's stream ended before the reply was complete "
            "(the connection dropped or the provider stopped sending).",
        )
    tool_calls = tuple(
        ToolCall(id=b.id or f"call_{i}", name=b.name, arguments=b.arguments or "{}") for i, b in sorted(calls.items())
    )
    if usage is None:  # the usage chunk is not passed on when the rebuild is skipped: it is in the wrapper's list
        usage = _reported_usage(getattr(chunks, "chunks", None) or [])
    usage_dict = usage.model_dump() if hasattr(usage, "model_dump") else (dict(usage) if usage else {})
    raw = {
        "id": response_id,
        "created": created,
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": finish,
                "message": {
                    "role": "assistant",
                    "content": "".join(text) or None,
                    "reasoning_content": "".join(reasoning) or None,
                    "tool_calls": [t.to_openai() for t in tool_calls] or None,
                    **({"thinking_blocks": blocks} if blocks else {}),
                },
            }
        ],
        "usage": usage_dict,
    }
    return LLMResult(
        content="".join(text) or None,
        reasoning="".join(reasoning) or None,
        tool_calls=tool_calls,
        thinking_blocks=tuple(blocks),
        usage=_usage(usage_dict),
        finish_reason=finish,
        model=model,
        raw=raw,
        latency_ms=(time.perf_counter() - started) * 1000,
    )


def _stream_thinking_block(blocks: list[dict[str, Any]], piece: Any) -> None:
    """Fold one streamed thinking-block fragment into `blocks`: thinking text extends the open block, a signature
    closes it (Anthropic's thinking_delta then signature_delta), a redacted block stands alone."""
    kind = _get(piece, "type") or "thinking"
    if kind == "redacted_thinking":
        blocks.append({"type": "redacted_thinking", "data": _get(piece, "data")})
        return
    open_block = blocks[-1] if blocks and blocks[-1]["type"] == "thinking" and not blocks[-1]["signature"] else None
    if open_block is None:
        open_block = {"type": "thinking", "thinking": "", "signature": None}
        blocks.append(open_block)
    open_block["thinking"] += str(_get(piece, "thinking") or "")
    if _get(piece, "signature"):
        open_block["signature"] = _get(piece, "signature")


def embed(
    texts: list[str],
    *,
    model: str,
    api_base: str | None = None,
    api_key: str | None = None,
    timeout: float = 60.0,
    dimensions: int | None = None,
) -> list[list[float]]:
    """Embed texts with a litellm embedding handle ("openai/text-embedding-3-small") with exactly the key given (none:
    NO_KEY, never one from the environment); raises LLMError."""
    if not texts:
        return []
    litellm = _lib()
    kwargs: dict[str, Any] = {
        "model": model,
        "input": texts,
        "api_base": api_base,
        "api_key": api_key or NO_KEY,
        "timeout": timeout,
        "max_retries": 0,
    }
    if dimensions:
        kwargs["dimensions"] = dimensions
    try:
        response = litellm.embedding(**kwargs)
    except Exception as exc:  # noqa: BLE001
        raise map_error(exc, model=model) from exc
    data = sorted(_get(response, "data") or [], key=lambda d: _get(d, "index") or 0)
    return [list(_get(d, "embedding")) for d in data]
