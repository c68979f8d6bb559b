"""The model client: `complete` sends a compiled chat request to its provider and returns an LLMResult, `embed`
embeds texts; every failure is an LLMError (errors.py) with a kind the runner acts on.

Providers that speak OpenAI's wire format (`openai/…` handles: OpenAI, any OpenAI-compatible server) are called by our
own small client over that public format, chat completions and embeddings (openai_wire.py); every other provider, and
the requests that client does not serve, through litellm's public API (via_litellm.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from core.engine.types import Delta, LLMResult
from core.llm import openai_wire, relay, via_litellm
from core.llm.errors import LLMError, is_context_length_error, map_error
from core.telemetry import hooks as telemetry

__all__ = ["NO_KEY", "Delta", "LLMError", "complete", "embed", "is_context_length_error", "map_error", "warm_up"]

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


def complete(
    request: dict[str, Any],
    *,
    api_base: str | None = None,
    api_key: str | None = None,
    timeout: float = 120.0,
    stream: bool = False,
    on_delta: Callable[[Delta], None] | None = None,
    guarded: bool = False,
) -> LLMResult:
    """Send one chat-completions request (the handle is request["model"]) with exactly the key given (none: NO_KEY,
    never one from the environment); blocks; streamed, each fragment goes to `on_delta` as it arrives; raises
    LLMError. `guarded`: the base URL is an owner's, so every connection goes only through the egress guard, to the
    address it checked (litellm's through the relay, relay.py)."""
    request = {k: v for k, v in request.items() if k not in _ROUTING_PARAMS}
    with telemetry.model_call(request, api_base=api_base, stream=stream) as traced:
        return traced.done(_complete(request, api_base, api_key or NO_KEY, timeout, stream, on_delta, guarded))


def _complete(request, api_base, key, timeout, stream, on_delta, guarded) -> LLMResult:
    model = str(request.get("model", ""))
    started = time.perf_counter()
    try:
        if openai_wire.serves(request, api_base):
            return openai_wire.complete(
                request,
                api_base=api_base,
                api_key=key,
                timeout=timeout,
                stream=stream,
                on_delta=on_delta,
                guarded=guarded,
            )
        kwargs = {
            **request,
            "api_base": api_base,
            "api_key": key,
            "timeout": timeout,
            "max_retries": 0,
            "num_retries": 0,
            "drop_params": True,
        }
        if guarded and api_base:
            with relay.routed(api_base, timeout=timeout) as route:
                return _relayed(
                    route,
                    via_litellm.complete,
                    {**kwargs, "api_base": route.local_base},
                    stream=stream,
                    on_delta=on_delta,
                    started=started,
                )
        return via_litellm.complete(kwargs, stream=stream, on_delta=on_delta, started=started)
    except LLMError:
        raise
    except Exception as exc:  # noqa: BLE001 - every provider failure is mapped to one typed error
        raise map_error(exc, model=model, api_base=api_base, hint=via_litellm.error_hint(exc)) from exc


def embed(
    texts: list[str],
    *,
    model: str,
    api_base: str | None = None,
    api_key: str | None = None,
    timeout: float = 60.0,
    dimensions: int | None = None,
    guarded: bool = False,
) -> list[list[float]]:
    """Embed texts with an embedding handle ("openai/text-embedding-3-small"): `openai/` handles through our own
    client, every other provider's through litellm; with exactly the key given (none: NO_KEY, never one from the
    environment); blocks; raises LLMError. `guarded`: as for `complete`."""
    if not texts:
        return []
    key = api_key or NO_KEY
    try:
        if openai_wire.serves_embedding(model):
            return openai_wire.embed(
                texts,
                model=model,
                api_base=api_base,
                api_key=key,
                timeout=timeout,
                dimensions=dimensions,
                guarded=guarded,
            )
        kwargs: dict[str, Any] = {
            "model": model,
            "input": texts,
            "api_base": api_base,
            "api_key": key,
            "timeout": timeout,
            "max_retries": 0,
        }
        if dimensions:
            kwargs["dimensions"] = dimensions
        if guarded and api_base:
            with relay.routed(api_base, timeout=timeout) as route:
                return _relayed(route, via_litellm.embed, {**kwargs, "api_base": route.local_base})
        return via_litellm.embed(kwargs)
    except LLMError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise map_error(exc, model=model, api_base=api_base, hint=via_litellm.error_hint(exc)) from exc


def _relayed(route: relay.Route, call: Callable[..., Any], kwargs: dict[str, Any], **options: Any) -> Any:
    """A litellm call through a relay route; what stopped it on the relay (the guard's refusal, an unreachable
    provider) is raised instead of litellm's account of the relay's answer."""
    try:
        return call(kwargs, **options)
    except Exception:
        if route.failure is not None:
            raise route.failure from None
        raise


def warm_up() -> None:
    """Import litellm (seconds) and build our client's TLS context now, at a process's start, not on its first
    message."""
    via_litellm.lib()
    openai_wire.warm_up()
