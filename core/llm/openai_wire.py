"""Our own client for providers that speak OpenAI's wire format (OpenAI, any OpenAI-compatible server): chat
completions (the engine's request sent as the body with httpx, the reply read here, whole or as server-sent events)
and embeddings (`/embeddings`, the body litellm's embedding() sends).

It exists for speed. Through litellm's public completion() a call cost about 3 ms of CPU whole and 15 ms streamed
against about 1 ms here (README, Benchmarks): litellm builds a logging object for every call, prices every response,
and its stream wrapper rebuilds each chunk and then the whole reply, for callbacks and caches a proxy uses and this
server does not; its embedding() spent about 2 ms of a file search's query embedding on the same, and on building the
OpenAI SDK's typed response. Everything that needs a provider's quirks goes through litellm (`serves` and
`serves_embedding` say what comes here).
"""

from __future__ import annotations

import functools
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx

from core import jsontext
from core.egress import EgressRefused, guarded_client
from core.engine import tokens
from core.engine.types import Delta, LLMResult, ToolCall
from core.llm.errors import LLMError, clean, not_reachable, provider_error
from core.llm.replies import DONE, completion_result, stream_result

# What a request may carry to be sent as it is: the parameters every OpenAI-compatible server reads by these names.
PLAIN_PARAMS = frozenset(
    {"model", "messages", "tools", "tool_choice", "temperature", "max_tokens", "parallel_tool_calls", "top_p"}
)
OPENAI_BASE = "https://api.openai.com/v1"
# Keywords OpenAI's validator refuses at the top of a tool's parameters (litellm merges their branches).
_TOP_LEVEL_COMBINATORS = frozenset({"anyOf", "oneOf", "allOf", "enum", "const", "not"})


def base_url(api_base: str | None) -> str:
    """Where a call goes: the base given, else the deployment's (OPENAI_BASE_URL, as litellm reads it), else OpenAI."""
    return api_base or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE") or OPENAI_BASE


@functools.lru_cache(maxsize=64)
def _hosted_by_openai(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    return host == "openai.com" or host.endswith(".openai.com")


def serves(request: dict[str, Any], api_base: str | None) -> bool:
    """Whether this client sends the request: a chat model of the `openai` provider (OpenAI's own, or any
    OpenAI-compatible server's) asked with plain parameters only. OpenAI's reasoning models (other parameter names
    and roles), models it serves only through its Responses API, requests with other parameters, and tools whose
    parameters OpenAI's validator would refuse go through litellm, which rewrites them."""
    model = request.get("model")
    if not isinstance(model, str) or not model.startswith("openai/") or not PLAIN_PARAMS.issuperset(request):
        return False
    info = tokens.model_info(model)
    if info.known and (info.supports_reasoning or info.mode not in (None, "chat")):
        return False
    tools = request.get("tools") or ()
    return not (tools and _hosted_by_openai(base_url(api_base)) and any(map(_has_top_level_combinator, tools)))


def _has_top_level_combinator(tool: Any) -> bool:
    function = tool.get("function") if isinstance(tool, dict) else None
    parameters = function.get("parameters") if isinstance(function, dict) else None
    return isinstance(parameters, dict) and not _TOP_LEVEL_COMBINATORS.isdisjoint(parameters)


def body(request: dict[str, Any], *, stream: bool) -> bytes:
    """The JSON body for a request: the model's name without its provider, messages without null fields, tools
    without regexes OpenAI's validator refuses; no tool_choice without tools; streamed with its usage at the end."""
    out = dict(request)
    out["model"] = request["model"].split("/", 1)[1]
    out["messages"] = [
        {k: v for k, v in m.items() if v is not None} if isinstance(m, dict) and None in m.values() else m
        for m in request["messages"]
    ]
    if not request.get("tools"):
        out.pop("tool_choice", None)
    if stream:
        out.update(stream=True, stream_options={"include_usage": True})
    content = jsontext.dumps(out).encode()
    if out.get("tools") and b'"pattern' in content:  # only then may a schema hold a regex to drop (walking is slow)
        out["tools"] = [_with_python_patterns(tool) for tool in out["tools"]]
        content = jsontext.dumps(out).encode()
    return content


# JSON Schema keywords whose values are schemas (a map of them, a list of them, or one)
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
_SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
_SCHEMA_ONE = frozenset(
    {"additionalProperties", "additionalItems", "items", "not", "if", "then", "else", "contains", "propertyNames"}
    | {"unevaluatedItems", "unevaluatedProperties"}
)


@functools.lru_cache(maxsize=256)
def _compiles(pattern: str) -> bool:
    try:
        re.compile(pattern)
    except (re.error, RecursionError):
        return False
    return True


def _with_python_patterns(tool: Any) -> Any:
    """A tool whose parameters keep only the regexes Python's `re` compiles: OpenAI validates a tool's schema with
    Python and refuses the whole request over one written for JavaScript (`\\p{L}`); a custom base URL is often a
    proxy in front of the same validator. The same object when nothing was dropped."""
    function = tool.get("function") if isinstance(tool, dict) else None
    parameters = function.get("parameters") if isinstance(function, dict) else None
    kept = _python_patterns_only(parameters)
    return tool if kept is parameters else {**tool, "function": {**function, "parameters": kept}}


def _python_patterns_only(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] | None = None
    for key, value in schema.items():
        if key == "pattern" and isinstance(value, str) and not _compiles(value):
            out = dict(schema) if out is None else out
            del out[key]
            continue
        new = value
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            new = {
                name: _python_patterns_only(sub)
                for name, sub in value.items()
                if key != "patternProperties" or not isinstance(name, str) or _compiles(name)
            }
            new = value if len(new) == len(value) and all(new[n] is value[n] for n in new) else new
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            new = [_python_patterns_only(sub) for sub in value]
            new = value if all(a is b for a, b in zip(new, value, strict=True)) else new
        elif key in _SCHEMA_ONE and isinstance(value, dict):
            new = _python_patterns_only(value)
        if new is not value:
            out = dict(schema) if out is None else out
            out[key] = new
    return schema if out is None else out


_clients: dict[bool, httpx.Client] = {}
_clients_lock = threading.Lock()


def _client(guarded: bool) -> httpx.Client:
    """The process's client: its connections are kept and reused across calls and threads. `guarded`: the one whose
    every connection goes through the egress guard (an owner's base URL: the public internet only, at an address
    checked when connecting)."""
    client = _clients.get(guarded)
    if client is None:
        with _clients_lock:
            client = _clients.get(guarded)
            if client is None:
                limits = httpx.Limits(max_connections=200, max_keepalive_connections=100)
                client = _clients[guarded] = guarded_client() if guarded else httpx.Client(limits=limits)
    return client


def warm_up() -> None:
    """Build the client (its TLS context: about 0.1 s of CPU) now, not on the first message."""
    _client(False)


def complete(
    request: dict[str, Any],
    *,
    api_base: str | None,
    api_key: str,
    timeout: float,
    stream: bool,
    on_delta: Callable[[Delta], None] | None,
    guarded: bool,
) -> LLMResult:
    """POST the request to the server's /chat/completions (one HTTP call, blocking) and read the reply; raises
    LLMError."""
    model = request["model"]
    started = time.perf_counter()
    response = _post(
        "/chat/completions",
        body(request, stream=stream),
        api_base=api_base,
        api_key=api_key,
        timeout=timeout,
        stream=stream,
        guarded=guarded,
        model=model,
    )
    try:
        if response.status_code >= 400:
            response.read()
            raise provider_error(response.status_code, _error_text(response.text), model=model)
        if not stream:
            return _whole(response.content, model, started)
        estimate = functools.partial(_estimated_usage, request)
        return stream_result(_chunks(response.iter_lines(), model), on_delta, started, estimate)
    except httpx.TimeoutException as exc:
        raise _late(model, timeout) from exc
    except httpx.TransportError as exc:
        detail = clean(str(exc)) or type(exc).__name__
        raise LLMError(
            "stream_incomplete", f"The model's stream ended before the reply was complete ({model}): {detail}"
        ) from exc
    finally:
        response.close()  # read to its end: the connection goes back to the pool


def _post(
    path: str,
    content: bytes,
    *,
    api_base: str | None,
    api_key: str,
    timeout: float,
    stream: bool,
    guarded: bool,
    model: str,
) -> httpx.Response:
    """POST a JSON body to the server's `path` (one HTTP call, blocking) and return the response, its body unread when
    `stream`; a call that reached no server, or none in time, raises LLMError."""
    url = base_url(api_base).rstrip("/")
    url = url if url.endswith(path) else url + path
    headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
    client = _client(guarded)
    try:
        sent = client.build_request("POST", url, content=content, headers=headers, timeout=timeout)
        try:
            return client.send(sent, stream=stream)
        except httpx.RemoteProtocolError:
            # The server closed the connection without a byte of answer: most often a kept-alive connection it
            # closed as we reused it (providers' load balancers drop idle ones). It saw no request; send it once more.
            return client.send(sent, stream=stream)
    except httpx.TimeoutException as exc:
        raise _late(model, timeout) from exc
    except (httpx.TransportError, EgressRefused) as exc:
        detail = clean(str(exc)) or type(exc).__name__
        if isinstance(exc, httpx.ConnectError):  # nothing answered at that address
            raise LLMError("api_error", not_reachable(base_url(api_base), f"{detail} ({model})")) from exc
        raise LLMError("api_error", f"Could not reach the model provider ({model}): {detail}") from exc


def serves_embedding(model: str) -> bool:
    """Whether this client embeds with the handle: a model of the `openai` provider (OpenAI's own, or any
    OpenAI-compatible server's)."""
    return model.startswith("openai/") and len(model) > len("openai/")


def embed(
    texts: list[str],
    *,
    model: str,
    api_base: str | None,
    api_key: str,
    timeout: float,
    dimensions: int | None,
    guarded: bool,
) -> list[list[float]]:
    """POST the texts to the server's /embeddings (one HTTP call, blocking): a vector per text, in the texts' order;
    raises LLMError."""
    request: dict[str, Any] = {"model": model.split("/", 1)[1], "input": texts}
    if dimensions:
        request["dimensions"] = dimensions
    response = _post(
        "/embeddings",
        jsontext.dumps(request).encode(),
        api_base=api_base,
        api_key=api_key,
        timeout=timeout,
        stream=False,
        guarded=guarded,
        model=model,
    )
    if response.status_code >= 400:
        raise provider_error(response.status_code, _error_text(response.text), model=model)
    return _vectors(response.content, model, len(texts))


def _vectors(content: bytes, model: str, count: int) -> list[list[float]]:
    """An embeddings reply's vectors in their inputs' order (`index`); a body that is not one is an api_error."""
    raw = _reply_json(content, model, "data")
    data = raw.get("data") if isinstance(raw, dict) else None
    if isinstance(data, list) and len(data) == count and all(map(_is_embedding, data)):
        return [d["embedding"] for d in sorted(data, key=lambda d: d.get("index") or 0)]
    if isinstance(data, list):
        what = f"{len(data)} embeddings for {count} inputs" if len(data) != count else "an item with no list of numbers"
    elif isinstance(raw, dict):
        what = f"a JSON object with no 'data' (keys: {', '.join(map(str, raw))})"
    else:
        what = f"not a JSON object: {clean(content.decode(errors='replace'))[:200]!r}"
    raise LLMError("api_error", f"The embedding provider sent an unreadable response ({model}): {what}")


def _reply_json(content: bytes, model: str, field: str) -> Any:
    """A reply body's JSON (None if it is not JSON); an error object sent with a 200 (no `field`) is raised."""
    try:
        raw = jsontext.loads(content)
    except ValueError:
        return None
    if isinstance(raw, dict) and raw.get("error") and field not in raw:
        raise _error_event(raw["error"], model)
    return raw


def _is_embedding(item: Any) -> bool:
    return isinstance(item, dict) and isinstance(item.get("embedding"), list)


def _late(model: str, timeout: float) -> LLMError:
    return LLMError("timeout", f"The model ({model}) did not answer in time: no reply within {timeout:g} s")


def _whole(content: bytes, model: str, started: float) -> LLMResult:
    """A whole reply's JSON as an LLMResult; a body that is not a chat completion is an api_error saying so."""
    raw = _reply_json(content, model, "choices")
    if not isinstance(raw, dict) or not isinstance(raw.get("choices"), list):
        what = f"a JSON object with no 'choices' (keys: {', '.join(map(str, raw))})" if isinstance(raw, dict) else None
        what = what or f"not a JSON object: {clean(content.decode(errors='replace'))[:200]!r}"
        raise LLMError("api_error", f"The model provider sent an unreadable response ({model}): {what}")
    return completion_result(raw, (time.perf_counter() - started) * 1000)


def _chunks(lines: Iterable[str], model: str) -> Iterator[Any]:
    """A stream's chunks, the JSON objects its `data:` lines carry, then DONE at `data: [DONE]`. Lines that carry no
    JSON object (blank lines between events, `event:` lines, comments, stray text) are skipped; an error object the
    provider sent midway (vLLM, sglang: in a 200 stream) and a choice that finished with `abort` raise LLMError."""
    for line in lines:
        data = (line[5:] if line.startswith("data:") else line).strip()
        if not data.startswith("{"):
            if data == "[DONE]":
                yield DONE
            continue
        try:
            chunk = jsontext.loads(data)
        except ValueError:
            continue
        if not isinstance(chunk, dict) or not chunk:
            continue
        if error := chunk.get("error"):
            raise _error_event(error, model)
        for choice in chunk.get("choices") or ():
            if isinstance(choice, dict) and choice.get("finish_reason") == "abort":
                raise provider_error(500, "Upstream generation aborted (finish_reason=abort)", model=model)
        yield chunk


def _error_text(text: str) -> str:
    """The words of a failed call's body: the message of OpenAI's error object (`{"error": {"message": ...}}`),
    else the body itself."""
    try:
        error = jsontext.loads(text).get("error")
    except (ValueError, AttributeError):
        return clean(text)
    message = error.get("message") if isinstance(error, dict) else error
    return clean(message) if isinstance(message, str) and message else clean(text)


def _error_event(error: Any, model: str) -> LLMError:
    """An error object a provider sent with a 200 (OpenAI's shape: message and code), typed by its code (500 when
    it names none)."""
    code = error.get("code") if isinstance(error, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    status = code if isinstance(code, int) and 400 <= code < 600 else 500
    return provider_error(status, clean(message if isinstance(message, str) else jsontext.dumps(error)), model=model)


def _estimated_usage(request: dict[str, Any], text: str, calls: tuple[ToolCall, ...]) -> dict[str, int]:
    """Counted with the model's tokenizer, for a stream whose provider reported no usage."""
    model = request["model"]
    prompt = (
        sum(tokens.count_message(model, m) for m in request["messages"])
        + sum(tokens.count_tool(model, t) for t in request.get("tools") or ())
        + tokens.REPLY_PRIMING_TOKENS
    )
    completion = tokens.count_text(model, text) + sum(
        tokens.count_text(model, c.name) + tokens.count_text(model, c.arguments) for c in calls
    )
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
