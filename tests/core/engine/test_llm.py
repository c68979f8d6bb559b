"""llm.complete / llm.embed through litellm's real code path against the fake OpenAI-compatible server."""

import json

import pytest

from core.engine import llm
from tests.fake_llm import FakeLLM, Reply
from tests.helpers import until

MODEL = "openai/fake-model"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "send_message",
            "description": "Say something.",
            "parameters": {
                "type": "object",
                "properties": {"thinking": {"type": "string"}, "message": {"type": "string"}},
                "required": ["thinking", "message"],
            },
        },
    }
]


def _request(**extra):
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": TOOLS,
        "tool_choice": "required",
        **extra,
    }


def _call(fake, **kw):
    return llm.complete(_request(), api_base=fake.base_url, api_key="fake", **kw)


def test_tool_call_is_parsed_and_schema_args_are_filled(fake_llm):
    fake_llm.script(FakeLLM.tool("send_message", {"message": "hello"}))
    result = _call(fake_llm)
    assert [c.name for c in result.tool_calls] == ["send_message"]
    args = json.loads(result.tool_calls[0].arguments)
    assert args["message"] == "hello" and args["thinking"]
    assert result.usage.prompt_tokens > 0 and result.usage.completion_tokens > 0
    assert result.raw["choices"][0]["message"]["tool_calls"]
    assert fake_llm.chat_requests[-1]["tool_choice"] == "required"


def test_default_policy_calls_send_message_or_replies_text(fake_llm):
    result = _call(fake_llm)
    assert json.loads(result.tool_calls[0].arguments)["message"] == "ok"
    plain = llm.complete(
        {"model": MODEL, "messages": [{"role": "user", "content": "summarize"}]},
        api_base=fake_llm.base_url,
        api_key="fake",
    )
    assert plain.content == "ok" and plain.tool_calls == ()


def test_a_whole_call_skips_litellms_success_logging(fake_llm, monkeypatch):
    """litellm builds a logging payload on a thread after each call (for callbacks we never register); a whole
    call runs as its sub-call, which skips it. A litellm upgrade that stops honouring that shows here."""
    import litellm.utils

    executor = litellm.utils.executor
    submitted = []
    monkeypatch.setattr(executor, "submit", lambda *a, **k: submitted.append(a))
    fake_llm.script(FakeLLM.tool("send_message", {"message": "hello"}))
    assert _call(fake_llm).tool_calls[0].name == "send_message"
    assert submitted == []
    litellm.completion(  # the same call outside that context is handed to the logging thread
        model=MODEL, messages=[{"role": "user", "content": "hi"}], api_base=fake_llm.base_url, api_key="fake"
    )
    assert len(submitted) == 1


@pytest.fixture
def through_the_sdk(monkeypatch):
    """OpenAI-compatible calls through the openai SDK, as before litellm's own handler: streams read through
    litellm's stream wrapper (the path every provider without its own chunk parser takes)."""
    monkeypatch.setenv(llm.OPENAI_HTTP_HANDLER, "false")


@pytest.fixture(params=["handler", "sdk"])
def either_path(request, monkeypatch):
    if request.param == "sdk":
        monkeypatch.setenv(llm.OPENAI_HTTP_HANDLER, "false")
    return request.param


def test_an_openai_compatible_stream_is_read_without_litellms_stream_wrapper(fake_llm, monkeypatch):
    """The direct path reads each event of the stream itself (as litellm's chunk parser for the provider reads it);
    litellm's stream wrapper's work per chunk (a second chunk object, debug text, logging) and at the end (a
    rebuild, a logging hand-off) is not done."""
    import litellm.utils
    from litellm.litellm_core_utils.streaming_handler import CustomStreamWrapper

    monkeypatch.setattr(CustomStreamWrapper, "chunk_creator", lambda *a, **k: pytest.fail("read through the wrapper"))
    submitted = []
    monkeypatch.setattr(litellm.utils.executor, "submit", lambda *a, **k: submitted.append(a))
    fake_llm.stream_chunk_chars = 3
    fake_llm.script(
        FakeLLM.reasoning("Think first.", "send_message", {"message": "streamed"}),
        FakeLLM.reasoning("Think first.", "send_message", {"message": "streamed"}),
    )
    deltas = []
    streamed = _call(fake_llm, stream=True, on_delta=deltas.append)
    whole = _call(fake_llm)
    assert [(c.name, c.arguments) for c in streamed.tool_calls] == [(c.name, c.arguments) for c in whole.tool_calls]
    assert json.loads(streamed.tool_calls[0].arguments)["message"] == "streamed"
    assert streamed.reasoning == whole.reasoning == "Think first." and streamed.usage == whole.usage
    assert streamed.finish_reason == whole.finish_reason == "tool_calls"
    assert "".join(d.text for d in deltas if d.kind == "reasoning") == "Think first."
    assert submitted == []


def test_a_stream_that_breaks_midway_is_incomplete_and_the_next_call_works(fake_llm, either_path):
    fake_llm.script(Reply(content="a reply long enough to break", break_after=3), FakeLLM.text("next"))
    deltas = []
    with pytest.raises(llm.LLMError) as err:
        _call(fake_llm, stream=True, on_delta=deltas.append)
    assert err.value.kind == "stream_incomplete" and "stream ended before the reply was complete" in err.value.message
    assert deltas  # chunks arrived before the break
    assert _call(fake_llm, stream=True, on_delta=lambda d: None).content == "next"


def test_a_streamed_calls_logging_handler_returns_at_once(fake_llm, monkeypatch, through_the_sdk):
    """litellm's stream wrapper hands the finished stream to its logging thread whatever the context; the call is
    marked as logged already, so the handler skips building its payload. (Handlers of earlier tests' streams may
    still be queued on that thread: they are marked too.)"""
    from litellm.litellm_core_utils.litellm_logging import Logging

    seen, built = [], []
    handler, prepare = Logging.success_handler, Logging.prepare_success_logging

    def success_handler(self, *args, **kwargs):
        if self.stream:
            seen.append(self.should_run_logging(event_type="sync_success"))
        return handler(self, *args, **kwargs)

    def prepare_success_logging(self, *args, **kwargs):
        if self.stream:
            built.append(True)
        return prepare(self, *args, **kwargs)

    monkeypatch.setattr(Logging, "success_handler", success_handler)
    monkeypatch.setattr(Logging, "prepare_success_logging", prepare_success_logging)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "streamed"}))
    result = _call(fake_llm, stream=True, on_delta=lambda d: None)
    assert json.loads(result.tool_calls[0].arguments)["message"] == "streamed"
    until(lambda: seen)
    assert not any(seen) and built == []


def _builder_calls(monkeypatch) -> list[bool]:
    import litellm

    calls, build = [], litellm.stream_chunk_builder

    def counted(*args, **kwargs):
        calls.append(True)
        return build(*args, **kwargs)

    monkeypatch.setattr(litellm, "stream_chunk_builder", counted)
    return calls


def test_a_streams_reported_usage_is_read_without_litellms_rebuild(fake_llm, monkeypatch, either_path):
    """At a stream's end litellm rebuilds and prices the whole response only to copy the usage onto its last chunk;
    the usage the provider reported is read from the stream's chunks instead, the same as a whole call's."""
    rebuilt = _builder_calls(monkeypatch)
    fake_llm.script(
        FakeLLM.tool("send_message", {"message": "streamed"}), FakeLLM.tool("send_message", {"message": "streamed"})
    )
    streamed = _call(fake_llm, stream=True, on_delta=lambda d: None)
    whole = _call(fake_llm)
    assert rebuilt == []
    assert streamed.usage == whole.usage and streamed.usage.prompt_tokens > 0 and streamed.usage.completion_tokens > 0
    assert streamed.raw["usage"]["total_tokens"] == whole.usage.total_tokens


def test_a_stream_without_reported_usage_is_still_counted(fake_llm, monkeypatch, either_path):
    """A provider that reports no usage on a stream: litellm's rebuild runs as before and estimates it."""
    rebuilt = _builder_calls(monkeypatch)
    fake_llm.script(Reply(content="no usage here", streamed_usage=False))
    result = llm.complete(
        {"model": MODEL, "messages": [{"role": "user", "content": "count me"}]},
        api_base=fake_llm.base_url,
        api_key="fake",
        stream=True,
    )
    assert result.content == "no usage here" and rebuilt
    assert result.usage.prompt_tokens > 0 and result.usage.completion_tokens > 0


def _assert_same_result(direct, through):
    """The direct path's result is completion()'s: text, reasoning, why it finished, usage, model and calls."""
    assert (direct.content, direct.reasoning, direct.finish_reason, direct.usage, direct.model) == (
        through.content,
        through.reasoning,
        through.finish_reason,
        through.usage,
        through.model,
    )
    assert [(c.name, c.arguments) for c in direct.tool_calls] == [(c.name, c.arguments) for c in through.tool_calls]


def _chunk(delta=None, finish=None, **extra):
    choices = [{"index": 0, "delta": delta or {}, "finish_reason": finish}] if delta is not None or finish else []
    return "data: " + json.dumps(
        {"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": choices, **extra}
    )


def _streamed_on_both_paths(fake_llm, monkeypatch, lines):
    """The same raw stream read on the direct path (completion() made to fail) and through completion(): each
    path's result, or the LLMError it raised."""
    outcomes = []
    for path in ("direct", "completion"):
        fake_llm.script(Reply(stream_lines=lines))
        with monkeypatch.context() as m:
            if path == "direct":
                _without_completion(m)
            else:
                m.setattr(llm, "_direct_config", lambda *a, **k: None)
            deltas = []
            try:
                result = _call(fake_llm, stream=True, on_delta=deltas.append)
            except llm.LLMError as error:
                outcomes.append(error)
            else:
                outcomes.append((result, deltas))
    return outcomes


def test_what_a_provider_may_put_in_a_stream_reads_the_same_on_both_paths(fake_llm, monkeypatch):
    """Reasoning under vLLM's name (`reasoning`), arguments split over chunks, comment and `event:` lines, a line that
    is not JSON, a usage chunk, and `[DONE]` with no chunk saying why the reply finished (a stop)."""
    lines = [
        ": keep-alive",
        _chunk({"role": "assistant", "content": ""}),
        "event: message",
        _chunk({"reasoning": "Weigh "}),
        _chunk({"reasoning": "it."}),
        "data: not json at all",
        _chunk({"content": "Done "}),
        _chunk({"tool_calls": [{"index": 0, "id": "t1", "type": "function", "function": {"name": "send_message"}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"message": '}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"hé"}'}}]}),
        _chunk(usage={"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}),
        "data: [DONE]",
    ]
    (direct, direct_deltas), (through, through_deltas) = _streamed_on_both_paths(fake_llm, monkeypatch, lines)
    assert (direct.content, direct.reasoning, direct.finish_reason) == ("Done ", "Weigh it.", "stop")
    assert [(c.id, c.name, c.arguments) for c in direct.tool_calls] == [("t1", "send_message", '{"message": "hé"}')]
    assert (direct.usage.prompt_tokens, direct.usage.completion_tokens) == (11, 7)
    _assert_same_result(direct, through)
    assert [c.id for c in direct.tool_calls] == [c.id for c in through.tool_calls]
    assert direct.raw["usage"] == through.raw["usage"]
    assert [(d.kind, d.text) for d in direct_deltas] == [(d.kind, d.text) for d in through_deltas]


@pytest.mark.parametrize(
    ("failure", "status"),
    [
        ('data: {"error": {"message": "backend overloaded", "code": 503}}', 503),  # vLLM, sglang: an error in a 200
        ('data: {"error": "engine died"}', 500),
        (_chunk({}, "abort"), 500),  # the provider gave up midway
    ],
)
def test_a_failure_the_provider_sends_in_a_stream_is_typed_the_same_on_both_paths(
    fake_llm, monkeypatch, failure, status
):
    lines = [_chunk({"role": "assistant", "content": ""}), _chunk({"content": "Partly "}), failure, "data: [DONE]"]
    direct, through = _streamed_on_both_paths(fake_llm, monkeypatch, lines)
    assert isinstance(direct, llm.LLMError) and isinstance(through, llm.LLMError)
    assert (direct.kind, direct.status) == (through.kind, through.status) == ("api_error", status)
    assert direct.message == through.message
    assert _call(fake_llm, stream=True, on_delta=lambda d: None).tool_calls[0].name == "send_message"  # next call


def test_reported_usage_keeps_the_latest_value_of_each_field():
    """Anthropic reports the prompt's tokens in its first event and the reply's in its last."""
    chunks = [
        {"usage": None},
        {"usage": {"prompt_tokens": 20, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 5}}},
        {"choices": []},
        {"usage": {"completion_tokens": 63, "completion_tokens_details": {"reasoning_tokens": 6}}},
    ]
    assert llm._reported_usage(chunks) == {
        "prompt_tokens": 20,
        "completion_tokens": 63,
        "total_tokens": 83,
        "prompt_tokens_details": {"cached_tokens": 5},
        "completion_tokens_details": {"reasoning_tokens": 6},
    }
    assert llm._reported_usage([{"usage": None}, {}]) is None


def test_an_unpriced_model_is_registered_with_litellm_only(fake_llm):
    """litellm's price lookup for a model missing from its cost map walks name variants on every call; the model
    is entered in litellm's table once (price 0 there), while our own price stays unknown."""
    import litellm

    from core.engine import tokens

    model = "openai/unlisted-model-for-the-price-test"
    fake_llm.script(FakeLLM.tool("send_message", {"message": "hello"}))
    llm.complete(_request(model=model), api_base=fake_llm.base_url, api_key="fake")
    assert litellm.get_model_info(model)["input_cost_per_token"] == 0.0
    assert tokens.step_cost(model, {"prompt_tokens": 100, "completion_tokens": 10}) is None
    llm.complete(_request(model="openai/gpt-4o-mini"), api_base=fake_llm.base_url, api_key="fake")
    assert litellm.get_model_info("openai/gpt-4o-mini")["input_cost_per_token"] > 0  # a listed model keeps its price


def test_native_reasoning_is_returned(fake_llm):
    fake_llm.script(FakeLLM.reasoning("Let me think.", "send_message", {"message": "done"}))
    result = _call(fake_llm)
    assert result.reasoning == "Let me think."
    assert result.tool_calls[0].name == "send_message"


def test_streaming_emits_deltas_and_assembles_the_result(fake_llm):
    fake_llm.stream_chunk_chars = 3
    fake_llm.script(FakeLLM.reasoning("Pondering carefully.", "send_message", {"message": "streamed reply"}))
    deltas = []
    result = _call(fake_llm, stream=True, on_delta=deltas.append)
    assert "".join(d.text for d in deltas if d.kind == "reasoning") == "Pondering carefully."
    args = "".join(d.text for d in deltas if d.kind == "tool_call")
    assert json.loads(args)["message"] == "streamed reply"
    assert sum(1 for d in deltas if d.kind == "tool_call") > 3  # arrived in pieces
    assert result.tool_calls[0].arguments == args and result.reasoning == "Pondering carefully."
    assert result.usage.prompt_tokens > 0
    assert fake_llm.chat_requests[-1]["stream"] is True


def test_streaming_text_reply(fake_llm):
    fake_llm.script(FakeLLM.text("plain streamed text"))
    deltas = []
    result = llm.complete(
        {"model": MODEL, "messages": [{"role": "user", "content": "x"}]},
        api_base=fake_llm.base_url,
        api_key="fake",
        stream=True,
        on_delta=deltas.append,
    )
    assert result.content == "plain streamed text"
    assert "".join(d.text for d in deltas if d.kind == "text") == "plain streamed text"


def test_streamed_calls_reuse_one_connection(fake_llm):
    # litellm's own handler reads a stream to its end and returns the connection to the pool; the openai SDK's
    # path closed it at the end of every stream (llm.OPENAI_HTTP_HANDLER)
    for i in range(3):
        fake_llm.script(FakeLLM.text(f"reply {i}"))
        result = _call(fake_llm, stream=True, on_delta=lambda d: None)
        assert result.content == f"reply {i}"
    fake_llm.script(FakeLLM.text("whole"))
    assert _call(fake_llm).content == "whole"
    assert len(fake_llm.chat_requests) == 4 and fake_llm.connections == 1


@pytest.fixture
def through_completion(monkeypatch):
    """OpenAI-compatible calls through litellm's completion() (with its HTTP handler), not the direct path."""
    monkeypatch.setattr(llm, "_direct_config", lambda *a, **k: None)


def _without_completion(monkeypatch):
    import litellm

    monkeypatch.setattr(litellm, "completion", lambda *a, **k: pytest.fail("called through litellm.completion"))


def _spy(function, calls: list):
    def spied(*args, **kwargs):
        calls.append(kwargs)
        return function(*args, **kwargs)

    return spied


def _same_on_both_paths(fake_llm, monkeypatch, request, call):
    """Send `request` direct (completion() made to fail) and through completion(), streamed and whole: the server
    receives the same body and the results agree. Returns the bodies the server received (direct, completion)."""
    import litellm

    bodies = []
    for stream in (False, True):
        for _ in ("direct", "completion"):
            fake_llm.script(FakeLLM.reasoning("Think.", "send_message", {"message": "same"}))
        with monkeypatch.context() as m:
            _without_completion(m)
            direct = llm.complete(request, stream=stream, on_delta=lambda d: None, **call)
        with monkeypatch.context() as m:
            m.setattr(llm, "_direct_config", lambda *a, **k: None)
            spied = []
            m.setattr(litellm, "completion", _spy(litellm.completion, spied))
            through = llm.complete(request, stream=stream, on_delta=lambda d: None, **call)
        assert spied, "the comparison call did not go through completion()"
        assert fake_llm.chat_requests[-2] == fake_llm.chat_requests[-1]
        assert fake_llm.chat_requests[-1].get("stream", False) is stream
        _assert_same_result(direct, through)
        assert json.loads(direct.tool_calls[0].arguments)["message"] == "same"
        bodies = fake_llm.chat_requests[-2:]
    return bodies


@pytest.mark.parametrize("model", [MODEL, "openai/gpt-4o-mini"])
def test_the_direct_path_sends_and_returns_what_completion_does(fake_llm, monkeypatch, model):
    """A plain chat model of the openai provider is called through litellm's provider config, HTTP client and chunk
    parser without completion() around them: the server receives the same body and the result is the same."""
    request = _request(model=model, temperature=0.3, max_tokens=200, parallel_tool_calls=False)
    request["messages"] = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "send_message", "arguments": '{"message": "x"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "None"},
        {"role": "user", "content": [{"type": "text", "text": "and now?"}]},
    ]
    _same_on_both_paths(fake_llm, monkeypatch, request, {"api_base": fake_llm.base_url, "api_key": "fake"})
    assert request["messages"][4]["content"] == [{"type": "text", "text": "and now?"}]  # the caller's request unchanged


# A tool whose parameters litellm rewrites for OpenAI's validator (a top-level anyOf, a pattern Python's re cannot
# compile), and a message part carrying an Anthropic cache mark, which litellm keeps or strips by endpoint.
_PICKY_TOOL = {
    "type": "function",
    "function": {
        "name": "pick",
        "description": "Pick one.",
        "parameters": {
            "type": "object",
            "properties": {"word": {"type": "string", "pattern": "^\\p{L}+$"}},
            "anyOf": [{"required": ["word"]}, {"properties": {"word": {"const": "none"}}}],
        },
    },
}
_MARKED = {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}


@pytest.mark.parametrize("base", ["given", "from_environment"])
def test_the_direct_path_rewrites_tools_and_cache_marks_as_completion_does(fake_llm, monkeypatch, base):
    """litellm rewrites tool schemas and keeps or drops cache marks according to the endpoint it is told about (a
    base given with the call, or none: then OPENAI_BASE_URL): the direct path tells it the same."""
    request = _request(tools=[*TOOLS, _PICKY_TOOL], messages=[_MARKED])
    call = {"api_key": "fake"}
    if base == "given":
        call["api_base"] = fake_llm.base_url
    else:
        monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.base_url)
    direct, _ = _same_on_both_paths(fake_llm, monkeypatch, request, call)
    # What litellm does today, so that the comparison above is about something: the fake is a custom endpoint (given
    # or found in the environment), which keeps the cache mark; the pattern Python cannot compile is dropped.
    assert direct["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert "pattern" not in json.dumps(direct["tools"][1])


@pytest.mark.parametrize(
    ("model", "extra"),
    [
        ("openai/o4-mini", {}),  # a reasoning model: litellm maps its parameters and roles
        ("openai/gpt-5", {}),
        (MODEL, {"reasoning_effort": "low"}),  # a parameter the direct path does not pass
        ("deepseek/deepseek-chat", {}),  # another provider
    ],
)
def test_other_models_and_parameters_go_through_completion(model, extra):
    import litellm

    assert llm._direct_config(litellm, _request(model=model, **extra), "http://127.0.0.1:1/v1") is None
    assert llm._direct_config(litellm, _request(), "http://127.0.0.1:1/v1") is not None


def test_the_sdks_path_turns_the_direct_path_off(fake_llm, monkeypatch, through_the_sdk):
    import litellm

    assert llm._direct_config(litellm, _request(), fake_llm.base_url) is None
    assert _call(fake_llm).tool_calls[0].name == "send_message"


@pytest.mark.parametrize("path", ["direct", "completion"])
@pytest.mark.parametrize(
    ("reply", "kind", "status"),
    [
        (FakeLLM.context_length_error(), "context_length", 400),
        (FakeLLM.rate_limit_error(), "rate_limit", 429),
        (FakeLLM.error(500, "upstream exploded", type_="server_error"), "api_error", 500),
        (FakeLLM.error(503, "overloaded", type_="server_error"), "api_error", 503),
        (FakeLLM.error(401, "invalid api key", type_="authentication_error"), "auth", 401),
        (FakeLLM.error(400, "bad parameter"), "bad_request", 400),
    ],
)
def test_provider_errors_are_typed(fake_llm, monkeypatch, path, reply, kind, status):
    if path == "completion":
        monkeypatch.setattr(llm, "_direct_config", lambda *a, **k: None)
    else:
        _without_completion(monkeypatch)
    fake_llm.script(reply, reply)
    with pytest.raises(llm.LLMError) as info:
        _call(fake_llm)
    with pytest.raises(llm.LLMError) as streamed:
        _call(fake_llm, stream=True)
    assert (streamed.value.kind, streamed.value.status) == (info.value.kind, info.value.status)
    assert info.value.kind == kind
    assert info.value.status == status
    assert llm.is_context_length_error(info.value) is (kind == "context_length")
    assert "Error:" not in info.value.message.split(":", 1)[0]  # no stacked class-name noise up front


@pytest.mark.parametrize("path", ["direct", "completion"])
@pytest.mark.parametrize(
    ("body", "words"),
    [({"object": "list", "data": []}, "no 'choices'"), ("just text", "Invalid response object")],
)
def test_a_reply_that_is_not_a_completion_is_an_api_error(fake_llm, monkeypatch, path, body, words):
    """A 200 whose body is not a chat completion (a proxy in front of something else) fails the call with the
    reason, on both paths, without litellm's stack trace in the message."""
    if path == "completion":
        monkeypatch.setattr(llm, "_direct_config", lambda *a, **k: None)
    else:
        _without_completion(monkeypatch)
    fake_llm.script(Reply(body=body))
    with pytest.raises(llm.LLMError) as info:
        llm.complete({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}, api_base=fake_llm.base_url)
    assert info.value.kind == "api_error"
    assert words in info.value.message
    assert "Traceback" not in info.value.message
    assert _call(fake_llm).tool_calls[0].name == "send_message"  # the next call is answered as usual


def test_error_message_keeps_provider_words(fake_llm, monkeypatch):
    messages = []
    for path in ("direct", "completion"):
        if path == "completion":
            monkeypatch.setattr(llm, "_direct_config", lambda *a, **k: None)
        fake_llm.script(FakeLLM.error(500, "upstream exploded"))
        with pytest.raises(llm.LLMError) as info:
            _call(fake_llm)
        assert "upstream exploded" in info.value.message and "HTTP 500" in info.value.message
        messages.append(info.value.message)
    assert messages[0] == messages[1]  # the direct path's failure reads as completion()'s


@pytest.mark.parametrize("path", ["direct", "completion"])
def test_timeout(fake_llm, monkeypatch, path):
    if path == "completion":
        monkeypatch.setattr(llm, "_direct_config", lambda *a, **k: None)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "late"}, latency=1.5))
    with pytest.raises(llm.LLMError) as info:
        _call(fake_llm, timeout=0.3)
    assert info.value.kind == "timeout"


def test_unreachable_provider_is_an_api_error(monkeypatch):
    errors = []
    for path in ("direct", "completion"):
        if path == "completion":
            monkeypatch.setattr(llm, "_direct_config", lambda *a, **k: None)
        with pytest.raises(llm.LLMError) as info:
            llm.complete(_request(), api_base="http://127.0.0.1:9/v1", api_key="fake", timeout=2)
        assert info.value.kind == "api_error" and "Connection refused" in info.value.message
        errors.append((info.value.kind, info.value.status, info.value.message))
    assert errors[0] == errors[1]


def test_malformed_arguments_pass_through_raw(fake_llm):
    fake_llm.script(FakeLLM.malformed("send_message", '{"message": "oops'))
    result = _call(fake_llm)
    assert result.tool_calls[0].arguments == '{"message": "oops'


def test_embeddings_are_deterministic_unit_vectors(fake_llm):
    vecs = llm.embed(
        ["cats are great", "dogs"], model="openai/fake-embedding", api_base=fake_llm.base_url, api_key="fake"
    )
    again = llm.embed(["cats are great"], model="openai/fake-embedding", api_base=fake_llm.base_url, api_key="fake")
    assert len(vecs) == 2 and len(vecs[0]) == 384
    assert vecs[0] == again[0] and vecs[0] != vecs[1]
    assert abs(sum(x * x for x in vecs[0]) - 1.0) < 1e-6
    assert fake_llm.embedding_requests[0]["input"] == ["cats are great", "dogs"]


def test_embedding_dimension_is_configurable(fake_llm):
    fake_llm.embedding_dim = 16
    assert len(llm.embed(["x"], model="openai/fake-embedding", api_base=fake_llm.base_url, api_key="fake")[0]) == 16


def test_models_endpoint(fake_llm):
    import urllib.request

    with urllib.request.urlopen(fake_llm.base_url + "/models") as resp:
        ids = [m["id"] for m in json.load(resp)["data"]]
    assert "fake-model" in ids
