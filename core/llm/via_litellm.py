"""Model calls through litellm's public API (`completion`, `embedding`) for every provider our own client does not
serve: Anthropic, DeepSeek, Ollama, OpenAI's reasoning models, requests with provider-specific parameters.

litellm is imported here only, and lazily: it costs seconds, which a process that never calls it must not pay.
"""

from __future__ import annotations

import copy
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from core.engine.types import Delta, LLMResult
from core.llm.errors import ErrorHint
from core.llm.replies import completion_result, stream_result

_lock = threading.Lock()
_litellm: Any = None


def lib() -> Any:
    """Import and configure litellm once, through its documented settings: offline cost map, no retries, no
    callbacks, no per-chunk logging, no debug chatter."""
    global _litellm
    if _litellm is None:
        with _lock:
            if _litellm is None:
                os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                import litellm  # here, not at module level: it takes seconds, and reads the variables above

                litellm.suppress_debug_info = True
                litellm.telemetry = False
                litellm.drop_params = True
                litellm.num_retries = 0
                litellm.disable_streaming_logging = True  # per-chunk logging, for callbacks we never register
                litellm.callbacks = []
                litellm.success_callback = []
                litellm.failure_callback = []
                _litellm = litellm
    return _litellm


def complete(
    kwargs: dict[str, Any], *, stream: bool, on_delta: Callable[[Delta], None] | None, started: float
) -> LLMResult:
    """One call of litellm.completion(**kwargs) (blocking), read to its end; litellm's exceptions propagate. The
    messages go as a copy: a request's messages are the compiled window's own dicts, shared with the next step's
    request (Message.to_openai), and litellm's provider transforms may edit what they are given."""
    litellm = lib()
    kwargs = {**kwargs, "messages": copy.deepcopy(kwargs.get("messages"))}
    if not stream:
        response = litellm.completion(**kwargs)
        return completion_result(response.model_dump(), (time.perf_counter() - started) * 1000)
    chunks = litellm.completion(**kwargs, stream=True, stream_options={"include_usage": True})
    return stream_result(chunks, on_delta, started)


def embed(kwargs: dict[str, Any]) -> list[list[float]]:
    """One call of litellm.embedding(**kwargs) (blocking): a vector per input, in the inputs' order."""
    response = lib().embedding(**kwargs)
    data = sorted(response.data or [], key=lambda d: _field(d, "index") or 0)
    return [list(_field(d, "embedding")) for d in data]


def error_hint(error: BaseException) -> ErrorHint | None:
    """What the type of an exception litellm raised says of the failure (litellm's public exception classes, in
    its exception-mapping docs); None for anything else, or when litellm was never imported."""
    if _litellm is None:
        return None
    kinds: tuple[tuple[type, ErrorHint], ...] = (
        (_litellm.ContextWindowExceededError, "context_length"),
        (_litellm.RateLimitError, "rate_limit"),
        (_litellm.Timeout, "timeout"),  # before APIConnectionError: litellm's Timeout is one
        (_litellm.AuthenticationError, "auth"),
        (_litellm.PermissionDeniedError, "auth"),
        (_litellm.APIConnectionError, "connection"),
    )
    return next((hint for kind, hint in kinds if isinstance(error, kind)), None)


def _field(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, dict) else getattr(item, key, None)
