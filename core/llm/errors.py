"""A failed model call as one typed error: LLMError, with a kind the runner acts on (context_length → evict and
retry; bad_request before any token of a stream → ask again without streaming; the rest → llm_api_error)."""

from __future__ import annotations

import re
from typing import Literal

ErrorKind = Literal["api_error", "rate_limit", "timeout", "context_length", "auth", "bad_request", "stream_incomplete"]
# What a provider SDK's exception type says of a failure (core/llm/via_litellm.error_hint reads litellm's types).
ErrorHint = Literal["context_length", "rate_limit", "timeout", "auth", "connection"]

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


def is_context_length_error(error: BaseException) -> bool:
    """Whether an error (ours or a provider's) means the prompt did not fit the model's window."""
    if isinstance(error, LLMError):
        return error.kind == "context_length"
    return _names_the_window(str(error))


def _names_the_window(text: str) -> bool:
    text = text.lower()
    return any(marker in text for marker in _CONTEXT_MARKERS)


_NOISE = re.compile(r"^(?:litellm\.)?(?:\w+(?:Error|Exception))(?: - |: ?)")


def clean(message: str) -> str:
    """The provider's words of an error message, on one line, at most 1000 characters."""
    # litellm stacks class-name prefixes ("BadRequestError: ContextWindowExceededError: ..."); keep the provider's words.
    text = " ".join(str(message).split()).replace("Error_str: ", "")
    text = text.split(" Traceback (most recent call last):", 1)[0]  # litellm appends its own stack to some messages
    while (m := _NOISE.match(text)) is not None:
        text = text[m.end() :]
    return text[:1000]


# What SDKs say when nothing answered at the address (litellm reports some as HTTP 500 from its own client).
_NO_CONNECTION = ("connection refused", "name or service not known", "failed to establish a new connection")


def _cannot_connect(text: str) -> bool:
    text = text.lower()
    return any(marker in text for marker in _NO_CONNECTION)


def not_reachable(base_url: str, detail: str = "") -> str:
    """The one sentence for a model provider that could not be connected to (runs, replays, the settings page)."""
    return f"The model provider at {base_url} is not reachable" + (f": {detail}" if detail else ".")


def provider_error(
    status: int | None,
    detail: str,
    *,
    model: str = "",
    hint: ErrorHint | None = None,
    too_long: bool = False,
    api_base: str | None = None,
) -> LLMError:
    """The LLMError for a provider's failure: its HTTP status (None: no response), its words (`clean`ed), what the
    type of the exception an SDK raised for it says (`hint`, if one did), and whether the prompt is known not to
    have fit."""
    who = f" ({model})" if model else ""
    if "stream ended" in detail.lower():
        return LLMError(
            "stream_incomplete", f"The model's stream ended before the reply was complete{who}: {detail}", status
        )
    if too_long or hint == "context_length" or _names_the_window(detail):
        return LLMError(
            "context_length", f"The prompt is longer than the model's context window{who}: {detail}", status or 400
        )
    if hint == "rate_limit" or status == 429:
        return LLMError("rate_limit", f"Rate limited by the provider{who}: {detail}", status or 429)
    if hint == "timeout" or "timed out" in detail.lower():
        return LLMError("timeout", f"The model{who} did not answer in time: {detail}", status)
    if hint == "auth" or status in (401, 403):
        return LLMError("auth", f"The provider rejected the credentials{who}; check the API key: {detail}", status)
    if status is not None and 400 <= status < 500:
        return LLMError("bad_request", f"The provider rejected the request{who} (HTTP {status}): {detail}", status)
    if hint == "connection" or _cannot_connect(detail):
        if api_base:
            return LLMError("api_error", not_reachable(api_base, f"{detail}{who}"), status)
        return LLMError("api_error", f"Could not reach the model provider{who}: {detail}", status)
    return LLMError(
        "api_error", f"The model provider failed{who}" + (f" (HTTP {status})" if status else "") + f": {detail}", status
    )


def map_error(
    error: BaseException, *, model: str = "", api_base: str | None = None, hint: ErrorHint | None = None
) -> LLMError:
    """Translate an exception a provider's SDK raised into an LLMError; `hint` is what its type says (matched by the
    module that imports the SDK), `api_base`, where the call went, names the provider that could not be reached."""
    if isinstance(error, LLMError):
        return error
    status = getattr(error, "status_code", None) or getattr(error, "status", None)
    return provider_error(
        status if isinstance(status, int) else None,
        clean(getattr(error, "message", None) or str(error)),
        model=model,
        hint=hint,
        too_long=is_context_length_error(error),
        api_base=api_base,
    )
