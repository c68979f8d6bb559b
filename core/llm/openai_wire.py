"""Our own client for providers that speak OpenAI's wire format (OpenAI, any OpenAI-compatible server): chat
completions (the engine's request sent as the body, the reply read here, whole or as server-sent events) and
embeddings (`/embeddings`, the body litellm's embedding() sends); sent on the standard library's kept-alive
connections to the deployment's own endpoints, through httpx to an owner's (egress-guarded) or through a proxy.

It exists for speed. Through litellm's public completion() a call cost about 3 ms of CPU whole and 15 ms streamed
against about 1 ms here (README, Benchmarks): litellm builds a logging object for every call, prices every response,
and its stream wrapper rebuilds each chunk and then the whole reply, for callbacks and caches a proxy uses and this
server does not; its embedding() spent about 2 ms of a file search's query embedding on the same, and on building the
OpenAI SDK's typed response. Everything that needs a provider's quirks goes through litellm (`serves` and
`serves_embedding` say what comes here).
"""

from __future__ import annotations

import functools
import http.client
import os
import re
import threading
import time
import urllib.request
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson

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
    if not request.get("tools"):
        out.pop("tool_choice", None)
    if stream:
        out.update(stream=True, stream_options={"include_usage": True})
    content = _json_bytes(out)
    if b"null" in content:  # only then may a message hold a null field to drop (a message's walk costs a step's)
        out["messages"] = [
            {k: v for k, v in m.items() if v is not None} if isinstance(m, dict) and None in m.values() else m
            for m in request["messages"]
        ]
        content = _json_bytes(out)
    if out.get("tools") and b'"pattern' in content:  # only then may a schema hold a regex to drop (walking is slow)
        out["tools"] = [_with_python_patterns(tool) for tool in out["tools"]]
        content = _json_bytes(out)
    return content


def _json_bytes(value: Any) -> bytes:
    """`jsontext.dumps(value).encode()`, without the text in between: orjson's bytes where it writes what json would
    (plain values: a request's), else json's."""
    try:
        return orjson.dumps(value, option=orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_PASSTHROUGH_DATACLASS)
    except orjson.JSONEncodeError:
        return jsontext.dumps(value).encode()


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


# Two ways to send. The deployment's own endpoints without an environment proxy (the common case: every call of an
# agent on the deployment's model) go through the standard library's http.client on kept-alive connections: an httpx
# Client's request machinery (URL merging, auth and redirect flows, cookies, header models, its pool's bookkeeping)
# cost about twice the CPU of the exchange itself, the largest share of a model call's. An owner's base URL
# (egress-guarded: a checked address at each connection) and a proxied environment go through httpx, which does both.
_clients: dict[bool, httpx.Client] = {}
_clients_lock = threading.Lock()
_IDLE_PER_ORIGIN = 100  # kept-alive connections per (scheme, host, port, timeout), as httpx's pool keeps 100
_idle: dict[tuple[str, str, int, float], deque[http.client.HTTPConnection]] = {}
_tls: list[Any] = []  # the TLS context of the standard library's connections, built once (warm_up)
_USER_AGENT = "agents-ide"


def _client(guarded: bool) -> httpx.Client:
    """The process's httpx client: its connections are kept and reused across calls and threads. `guarded`: the one
    whose every connection goes through the egress guard (an owner's base URL: the public internet only, at an
    address checked when connecting)."""
    client = _clients.get(guarded)
    if client is None:
        with _clients_lock:
            client = _clients.get(guarded)
            if client is None:
                limits = httpx.Limits(max_connections=200, max_keepalive_connections=100)
                client = _clients[guarded] = guarded_client() if guarded else httpx.Client(limits=limits)
    return client


def _tls_context() -> Any:
    """httpx's own default TLS context (certifi's roots, or SSL_CERT_FILE / SSL_CERT_DIR): both ways verify alike."""
    if not _tls:
        with _clients_lock:
            if not _tls:
                context = httpx.create_ssl_context()
                context.set_alpn_protocols(["http/1.1"])  # what http.client speaks (and says, as it does by default)
                _tls.append(context)
    return _tls[0]


@functools.lru_cache(maxsize=1)
def _environment_proxies() -> frozenset[str]:
    """The schemes the environment names a proxy for (read once, as the httpx client reads them once)."""
    return frozenset(urllib.request.getproxies())


@functools.lru_cache(maxsize=64)
def _direct(url: str) -> tuple[str, str, int, str] | None:
    """(scheme, host, port, path with query) when a call to `url` goes out on the standard library's connections: an
    http(s) URL with no credentials in it and no proxy in the environment for its scheme (httpx applies the proxy
    rules); None otherwise."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password:
        return None
    if {parts.scheme, "all"} & _environment_proxies():
        return None
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80), path


def warm_up() -> None:
    """Build the clients' TLS contexts (about 0.1 s of CPU each) now, not on the first message."""
    _client(False)
    _tls_context()


class _Reply:
    """A response, whichever way it came: its status, its body whole or line by line, and its connection given back
    (read to its end) or closed (`close`, always called)."""

    status: int

    def content(self) -> bytes:
        raise NotImplementedError

    def lines(self) -> Iterator[str]:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def text(self) -> str:
        return self.content().decode("utf-8", errors="replace")


class _HttpxReply(_Reply):
    def __init__(self, response: httpx.Response):
        self.response, self.status = response, response.status_code

    def content(self) -> bytes:
        return self.response.read()

    def lines(self) -> Iterator[str]:
        return self.response.iter_lines()

    def close(self) -> None:
        self.response.close()  # read to its end: the connection goes back to the pool


class _DirectReply(_Reply):
    def __init__(self, key: tuple[str, str, int, float], conn: http.client.HTTPConnection, response):
        self.key, self.conn, self.response, self.status = key, conn, response, response.status
        self.done = False

    def content(self) -> bytes:
        data = self.response.read()
        self.done = True
        return data

    def lines(self) -> Iterator[str]:
        for line in self.response:  # the body a line at a time, as it arrives (chunked or not)
            yield line.decode("utf-8", errors="replace")
        self.done = True

    def close(self) -> None:
        response, conn = self.response, self.conn
        if not self.done and self.status >= 400:  # an error's body, left unread: read it so the connection is kept
            try:
                self.content()
            except (OSError, http.client.HTTPException):
                pass
        if self.done and (response.getheader("connection") or "").lower() != "close":
            idle = _idle.setdefault(self.key, deque())
            if len(idle) < _IDLE_PER_ORIGIN:
                idle.append(conn)  # read to its end: the connection serves the next call
                return
        conn.close()  # a reply left unread (a failure midway) leaves the connection unusable


# What reading a reply may raise, either way: a timeout; a broken connection or stream.
_READ_TIMEOUTS = (TimeoutError, httpx.TimeoutException)
_READ_FAILURES = (OSError, http.client.HTTPException, httpx.TransportError)


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
        if response.status >= 400:
            raise provider_error(response.status, _error_text(response.text()), model=model)
        if not stream:
            return _whole(response.content(), model, started)
        estimate = functools.partial(_estimated_usage, request)
        return stream_result(_chunks(response.lines(), model), on_delta, started, estimate)
    except _READ_TIMEOUTS as exc:
        raise _late(model, timeout) from exc
    except _READ_FAILURES as exc:
        detail = clean(str(exc)) or type(exc).__name__
        raise LLMError(
            "stream_incomplete", f"The model's stream ended before the reply was complete ({model}): {detail}"
        ) from exc
    finally:
        response.close()


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
) -> _Reply:
    """POST a JSON body to the server's `path` (one HTTP call, blocking) and return the response, its body unread;
    a call that reached no server, or none in time, raises LLMError."""
    url = base_url(api_base).rstrip("/")
    url = url if url.endswith(path) else url + path
    headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
    target = None if guarded else _direct(url)
    if target is not None:
        return _post_direct(target, content, headers, timeout=timeout, api_base=api_base, model=model)
    client = _client(guarded)
    try:
        sent = client.build_request("POST", url, content=content, headers=headers, timeout=timeout)
        try:
            return _HttpxReply(client.send(sent, stream=stream))
        except httpx.RemoteProtocolError:
            # The server closed the connection without a byte of answer: most often a kept-alive connection it
            # closed as we reused it (providers' load balancers drop idle ones). It saw no request; send it once more.
            return _HttpxReply(client.send(sent, stream=stream))
    except httpx.TimeoutException as exc:
        raise _late(model, timeout) from exc
    except (httpx.TransportError, EgressRefused) as exc:
        detail = clean(str(exc)) or type(exc).__name__
        if isinstance(exc, httpx.ConnectError):  # nothing answered at that address
            raise LLMError("api_error", not_reachable(base_url(api_base), f"{detail} ({model})")) from exc
        raise LLMError("api_error", f"Could not reach the model provider ({model}): {detail}") from exc


def _post_direct(
    target: tuple[str, str, int, str],
    content: bytes,
    headers: dict[str, str],
    *,
    timeout: float,
    api_base: str | None,
    model: str,
) -> _Reply:
    """The POST on a kept-alive connection of the standard library's (a new one when none is idle)."""
    scheme, host, port, path = target
    key = (scheme, host, port, timeout)
    headers = {**headers, "User-Agent": _USER_AGENT}
    for attempt in (1, 2):
        conn, fresh = _idle_connection(key)
        try:
            if fresh:
                conn.connect()
        except TimeoutError as exc:
            conn.close()
            raise _late(model, timeout) from exc
        except OSError as exc:  # nothing answered at that address (refused, no route, no such name)
            conn.close()
            detail = clean(str(exc)) or type(exc).__name__
            raise LLMError("api_error", not_reachable(base_url(api_base), f"{detail} ({model})")) from exc
        try:
            conn.request("POST", path, body=content, headers=headers)
            return _DirectReply(key, conn, conn.getresponse())
        except TimeoutError as exc:
            conn.close()
            raise _late(model, timeout) from exc
        except (ConnectionResetError, BrokenPipeError) as exc:  # RemoteDisconnected is a ConnectionResetError
            conn.close()
            # The server closed the connection without a byte of answer: most often a kept-alive connection it
            # closed as we reused it (providers' load balancers drop idle ones). It saw no request; send it once more.
            if attempt == 1:
                continue
            raise LLMError("api_error", f"Could not reach the model provider ({model}): {_disconnected(exc)}") from exc
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            detail = clean(str(exc)) or type(exc).__name__
            raise LLMError("api_error", f"Could not reach the model provider ({model}): {detail}") from exc
    raise AssertionError("unreachable")  # the loop returns or raises


def _disconnected(exc: BaseException) -> str:
    if isinstance(exc, http.client.RemoteDisconnected):
        return "Server disconnected without sending a response."  # httpx's words for it, as users saw them before
    return clean(str(exc)) or type(exc).__name__


def _idle_connection(key: tuple[str, str, int, float]) -> tuple[http.client.HTTPConnection, bool]:
    """A kept-alive connection to the origin (False), or a new one, not yet connected (True)."""
    idle = _idle.get(key)
    if idle:
        try:
            return idle.pop(), False
        except IndexError:  # another thread took the last one
            pass
    scheme, host, port, timeout = key
    if scheme == "https":
        return http.client.HTTPSConnection(host, port, timeout=timeout, context=_tls_context()), True
    return http.client.HTTPConnection(host, port, timeout=timeout), True


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
    try:
        if response.status >= 400:
            raise provider_error(response.status, _error_text(response.text()), model=model)
        data = response.content()
    except _READ_TIMEOUTS as exc:
        raise _late(model, timeout) from exc
    except _READ_FAILURES as exc:
        detail = clean(str(exc)) or type(exc).__name__
        raise LLMError("api_error", f"The embedding provider's reply broke off ({model}): {detail}") from exc
    finally:
        response.close()
    return _vectors(data, model, len(texts))


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
