"""core.llm.client.complete / embed against the fake OpenAI-compatible server: our own client over OpenAI's wire
format, and litellm's public completion() (the path every other provider takes) as its reference — both send the same
body, return the same result and raise the same typed errors."""

import json

import pytest

from core.llm import client as llm
from core.llm import openai_wire, via_litellm
from tests.fake_llm import FakeLLM, Reply

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


def _through_litellm(monkeypatch):
    """OpenAI-compatible calls through litellm's completion(), as every other provider's go."""
    monkeypatch.setattr(openai_wire, "serves", lambda *a, **k: False)


def _without_litellm(monkeypatch):
    monkeypatch.setattr(via_litellm, "complete", lambda *a, **k: pytest.fail("called through litellm"))


@pytest.fixture(params=["own", "litellm"])
def path(request, monkeypatch):
    """Each test once through our own client and once through litellm's completion()."""
    if request.param == "litellm":
        _through_litellm(monkeypatch)
    else:
        _without_litellm(monkeypatch)
    return request.param


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


def test_openai_compatible_calls_never_go_through_litellm(fake_llm, monkeypatch):
    _without_litellm(monkeypatch)
    fake_llm.stream_chunk_chars = 3
    reply = FakeLLM.reasoning("Think first.", "send_message", {"message": "streamed"})
    fake_llm.script(reply, reply)
    deltas = []
    streamed = _call(fake_llm, stream=True, on_delta=deltas.append)
    whole = _call(fake_llm)
    assert [(c.name, c.arguments) for c in streamed.tool_calls] == [(c.name, c.arguments) for c in whole.tool_calls]
    assert json.loads(streamed.tool_calls[0].arguments)["message"] == "streamed"
    assert streamed.reasoning == whole.reasoning == "Think first." and streamed.usage == whole.usage
    assert streamed.finish_reason == whole.finish_reason == "tool_calls"
    assert "".join(d.text for d in deltas if d.kind == "reasoning") == "Think first."


def test_a_stream_that_breaks_midway_is_incomplete_and_the_next_call_works(fake_llm, path):
    fake_llm.script(Reply(content="a reply long enough to break", break_after=3), FakeLLM.text("next"))
    deltas = []
    with pytest.raises(llm.LLMError) as err:
        _call(fake_llm, stream=True, on_delta=deltas.append)
    assert err.value.kind == "stream_incomplete" and "stream ended before the reply was complete" in err.value.message
    assert deltas  # chunks arrived before the break
    assert _call(fake_llm, stream=True, on_delta=lambda d: None).content == "next"


def test_a_connection_closed_without_an_answer_is_tried_once_more(fake_llm, monkeypatch):
    _without_litellm(monkeypatch)
    fake_llm.script(Reply(drop=True), FakeLLM.text("after one drop"))
    assert _call(fake_llm).content == "after one drop"
    fake_llm.script(Reply(drop=True), FakeLLM.text("streamed after one drop"))
    assert _call(fake_llm, stream=True, on_delta=lambda d: None).content == "streamed after one drop"
    assert len(fake_llm.chat_requests) == 4

    fake_llm.script(Reply(drop=True), Reply(drop=True), FakeLLM.text("never asked for"))
    with pytest.raises(llm.LLMError) as err:
        _call(fake_llm)
    assert err.value.kind == "api_error" and "Server disconnected without sending a response" in err.value.message
    assert len(fake_llm.chat_requests) == 6  # twice, not more


def test_a_streams_reported_usage_is_the_whole_calls(fake_llm, path):
    reply = FakeLLM.tool("send_message", {"message": "streamed"})
    fake_llm.script(reply, reply)
    streamed = _call(fake_llm, stream=True, on_delta=lambda d: None)
    whole = _call(fake_llm)
    assert streamed.usage == whole.usage and streamed.usage.prompt_tokens > 0 and streamed.usage.completion_tokens > 0
    assert streamed.raw["usage"]["total_tokens"] == whole.usage.total_tokens


def test_a_stream_without_reported_usage_is_still_counted(fake_llm, path):
    """A provider that reports no usage on a stream: it is estimated (our client: with the model's tokenizer)."""
    fake_llm.script(Reply(content="no usage here", streamed_usage=False))
    result = llm.complete(
        {"model": MODEL, "messages": [{"role": "user", "content": "count me"}]},
        api_base=fake_llm.base_url,
        api_key="fake",
        stream=True,
    )
    assert result.content == "no usage here"
    assert result.usage.prompt_tokens > 0 and result.usage.completion_tokens > 0


def _tokens(usage):
    # litellm also estimates reasoning tokens a provider did not report; ours are what the provider said
    return usage.prompt_tokens, usage.completion_tokens, usage.total_tokens, usage.cached_tokens


def _assert_same_result(own, through):
    """Our client's result is litellm's: text, reasoning, why it finished, usage, model and calls."""
    assert (own.content, own.reasoning, own.finish_reason, _tokens(own.usage), own.model) == (
        through.content,
        through.reasoning,
        through.finish_reason,
        _tokens(through.usage),
        through.model,
    )
    assert [(c.name, c.arguments) for c in own.tool_calls] == [(c.name, c.arguments) for c in through.tool_calls]


def _chunk(delta=None, finish=None, **extra):
    choices = [{"index": 0, "delta": delta or {}, "finish_reason": finish}] if delta is not None or finish else []
    return "data: " + json.dumps(
        {"id": "c1", "object": "chat.completion.chunk", "model": "fake-model", "choices": choices, **extra}
    )


def _streamed(fake_llm, monkeypatch, lines, *, through_litellm=False):
    """A raw stream read by our client (or through litellm): the result and its deltas, or the LLMError raised."""
    fake_llm.script(Reply(stream_lines=lines))
    with monkeypatch.context() as m:
        (_through_litellm if through_litellm else _without_litellm)(m)
        deltas = []
        try:
            return _call(fake_llm, stream=True, on_delta=deltas.append), deltas
        except llm.LLMError as error:
            return error


def test_what_a_provider_may_put_in_a_stream_is_read(fake_llm, monkeypatch):
    """Reasoning under vLLM's name (`reasoning`), arguments split over chunks, comment and `event:` lines, a line that
    is not JSON, a usage chunk, and `[DONE]` with no chunk saying why the reply finished (a stop): read as litellm's
    own chunk parser for OpenAI-compatible servers reads them (litellm's default path, the openai SDK, refuses the
    stray lines)."""
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
    own, deltas = _streamed(fake_llm, monkeypatch, lines)
    assert (own.content, own.reasoning, own.finish_reason) == ("Done ", "Weigh it.", "stop")
    assert [(c.id, c.name, c.arguments) for c in own.tool_calls] == [("t1", "send_message", '{"message": "hé"}')]
    assert (own.usage.prompt_tokens, own.usage.completion_tokens, own.usage.total_tokens) == (11, 7, 18)
    assert [(d.kind, d.text) for d in deltas] == [
        ("reasoning", "Weigh "),
        ("reasoning", "it."),
        ("text", "Done "),
        ("tool_call", ""),
        ("tool_call", '{"message": '),
        ("tool_call", '"hé"}'),
    ]


def test_a_stream_reads_the_same_on_both_paths(fake_llm, monkeypatch):
    lines = [
        _chunk({"role": "assistant", "content": ""}),
        _chunk({"reasoning": "Weigh "}),
        _chunk({"reasoning": "it."}),
        _chunk({"content": "Done "}),
        _chunk({"tool_calls": [{"index": 0, "id": "t1", "type": "function", "function": {"name": "send_message"}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"message": '}}]}),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"hé"}'}}]}),
        _chunk({}, "tool_calls"),
        _chunk(usage={"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}),
        "data: [DONE]",
    ]
    own, own_deltas = _streamed(fake_llm, monkeypatch, lines)
    through, through_deltas = _streamed(fake_llm, monkeypatch, lines, through_litellm=True)
    _assert_same_result(own, through)
    assert [c.id for c in own.tool_calls] == [c.id for c in through.tool_calls] == ["t1"]
    assert [(d.kind, d.text) for d in own_deltas if d.text] == [(d.kind, d.text) for d in through_deltas if d.text]


@pytest.mark.parametrize(
    ("failure", "status", "words"),
    [
        ('data: {"error": {"message": "backend overloaded", "code": 503}}', 503, "backend overloaded"),  # vLLM, sglang
        ('data: {"error": "engine died"}', 500, "engine died"),
        (_chunk({}, "abort"), 500, "Upstream generation aborted (finish_reason=abort)"),  # the provider gave up midway
    ],
)
def test_a_failure_the_provider_sends_in_a_stream_fails_the_call_with_its_status(
    fake_llm, monkeypatch, failure, status, words
):
    """An error object inside a 200 stream is the provider's failure, typed by its code (as litellm's own parser for
    OpenAI-compatible servers types it; litellm's default path reports a stream that ended)."""
    lines = [_chunk({"role": "assistant", "content": ""}), _chunk({"content": "Partly "}), failure, "data: [DONE]"]
    own = _streamed(fake_llm, monkeypatch, lines)
    assert isinstance(own, llm.LLMError)
    assert (own.kind, own.status) == ("api_error", status)
    assert own.message == f"The model provider failed ({MODEL}) (HTTP {status}): {words}"
    assert isinstance(_streamed(fake_llm, monkeypatch, lines, through_litellm=True), llm.LLMError)
    assert _call(fake_llm, stream=True, on_delta=lambda d: None).tool_calls[0].name == "send_message"  # next call


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


def test_calls_reuse_one_connection(fake_llm):
    # a stream is read to its end and its connection goes back to the pool, for the next call, streamed or whole
    for i in range(3):
        fake_llm.script(FakeLLM.text(f"reply {i}"))
        result = _call(fake_llm, stream=True, on_delta=lambda d: None)
        assert result.content == f"reply {i}"
    fake_llm.script(FakeLLM.text("whole"))
    assert _call(fake_llm).content == "whole"
    assert len(fake_llm.chat_requests) == 4 and fake_llm.connections == 1


def _same_on_both_paths(fake_llm, monkeypatch, request, call):
    """Send `request` through our client and through litellm, streamed and whole: the server receives the same body
    and the results agree. Returns the bodies the server received (ours, litellm's)."""
    bodies = []
    for stream in (False, True):
        for _ in ("own", "litellm"):
            fake_llm.script(FakeLLM.reasoning("Think.", "send_message", {"message": "same"}))
        with monkeypatch.context() as m:
            _without_litellm(m)
            own = llm.complete(request, stream=stream, on_delta=lambda d: None, **call)
        with monkeypatch.context() as m:
            _through_litellm(m)
            through = llm.complete(request, stream=stream, on_delta=lambda d: None, **call)
        assert fake_llm.chat_requests[-2] == fake_llm.chat_requests[-1]
        assert fake_llm.chat_requests[-1].get("stream", False) is stream
        _assert_same_result(own, through)
        assert json.loads(own.tool_calls[0].arguments)["message"] == "same"
        bodies = fake_llm.chat_requests[-2:]
    return bodies


@pytest.mark.parametrize("model", [MODEL, "openai/gpt-4o-mini"])
def test_our_client_sends_and_returns_what_litellm_does(fake_llm, monkeypatch, model):
    """Null fields dropped from messages, content parts kept, parameters passed as given: the body litellm's
    completion() sends for the same request, and the same result."""
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
        {"role": "assistant", "content": "plain", "name": None, "reasoning_content": "r"},
    ]
    _same_on_both_paths(fake_llm, monkeypatch, request, {"api_base": fake_llm.base_url, "api_key": "fake"})
    assert request["messages"][2]["content"] is None  # the caller's request unchanged


# A tool whose parameters hold a pattern Python's re cannot compile (OpenAI's validator refuses it), and a message
# part carrying an Anthropic cache mark, which a custom endpoint (a proxy) may read.
_PICKY_TOOL = {
    "type": "function",
    "function": {
        "name": "pick",
        "description": "Pick one.",
        "parameters": {
            "type": "object",
            "properties": {
                "word": {"type": "string", "pattern": "^\\p{L}+$"},
                "words": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}},
            },
            "required": ["word"],
        },
    },
}
_MARKED = {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}


@pytest.mark.parametrize("base", ["given", "from_environment"])
def test_our_client_drops_regexes_and_keeps_cache_marks_as_litellm_does(fake_llm, monkeypatch, base):
    """A custom endpoint, given with the call or found in OPENAI_BASE_URL, is sent the request as litellm sends it:
    a pattern Python cannot compile dropped, one it can kept, a cache mark kept."""
    request = _request(tools=[*TOOLS, _PICKY_TOOL], messages=[_MARKED])
    call = {"api_key": "fake"}
    if base == "given":
        call["api_base"] = fake_llm.base_url
    else:
        monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.base_url)
    own, _ = _same_on_both_paths(fake_llm, monkeypatch, request, call)
    assert own["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    properties = own["tools"][1]["function"]["parameters"]["properties"]
    assert "pattern" not in properties["word"] and properties["words"]["items"]["pattern"] == "^[a-z]+$"
    assert _PICKY_TOOL["function"]["parameters"]["properties"]["word"]["pattern"] == "^\\p{L}+$"  # not the caller's


@pytest.mark.parametrize(
    ("model", "extra", "base"),
    [
        ("openai/o4-mini", {}, None),  # a reasoning model: litellm maps its parameters and roles
        ("openai/gpt-5", {}, None),
        ("openai/o1-pro", {}, None),  # served by OpenAI's Responses API only
        (MODEL, {"reasoning_effort": "low"}, None),  # a parameter our client does not send
        ("deepseek/deepseek-chat", {}, None),  # another provider
        # a top-level combinator OpenAI's own validator refuses: litellm merges it (a custom endpoint gets it as is)
        (MODEL, {"tools": [{"function": {"name": "f", "parameters": {"anyOf": []}}}]}, "https://api.openai.com/v1"),
    ],
)
def test_other_models_and_parameters_go_through_litellm(model, extra, base):
    assert not openai_wire.serves(_request(model=model, **extra), base)
    assert openai_wire.serves(_request(**{k: v for k, v in extra.items() if k == "tools"}), "http://127.0.0.1:1/v1")
    assert openai_wire.serves(_request(model="openai/gpt-4o-mini"), None)


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
def test_provider_errors_are_typed(fake_llm, path, reply, kind, status):
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


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"object": "list", "data": []}, {"own": "no 'choices'", "litellm": "no 'choices'"}),
        ("just text", {"own": "not a JSON object", "litellm": "invalid response"}),
    ],
)
def test_a_reply_that_is_not_a_completion_is_an_api_error(fake_llm, path, body, words):
    """A 200 whose body is not a chat completion (a proxy in front of something else) fails the call with the
    reason, without a stack trace in the message."""
    fake_llm.script(Reply(body=body))
    with pytest.raises(llm.LLMError) as info:
        llm.complete({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}, api_base=fake_llm.base_url)
    assert info.value.kind == "api_error"
    assert words[path] in info.value.message
    assert "Traceback" not in info.value.message
    assert _call(fake_llm).tool_calls[0].name == "send_message"  # the next call is answered as usual


def test_error_message_keeps_provider_words(fake_llm, monkeypatch):
    messages = []
    for through_litellm in (False, True):
        with monkeypatch.context() as m:
            if through_litellm:
                _through_litellm(m)
            fake_llm.script(FakeLLM.error(500, "upstream exploded"))
            with pytest.raises(llm.LLMError) as info:
                _call(fake_llm)
        assert "upstream exploded" in info.value.message and "HTTP 500" in info.value.message
        messages.append(info.value.message)
    assert messages[0] == messages[1]  # our client's failure reads as litellm's


@pytest.mark.parametrize("stream", [False, True])
def test_timeout(fake_llm, path, stream):
    fake_llm.script(FakeLLM.tool("send_message", {"message": "late"}, latency=1.5))
    with pytest.raises(llm.LLMError) as info:
        _call(fake_llm, timeout=0.3, stream=stream)
    assert info.value.kind == "timeout"


def test_unreachable_provider_is_an_api_error(path):
    with pytest.raises(llm.LLMError) as info:
        llm.complete(_request(), api_base="http://127.0.0.1:9/v1", api_key="fake", timeout=2)
    assert info.value.kind == "api_error"
    assert ("Connection refused" if path == "own" else "Connection error") in info.value.message


def test_a_guarded_call_connects_only_where_the_egress_guard_allows(fake_llm, settings, monkeypatch):
    """An owner's base URL (guarded) is connected to at an address the egress guard checked when connecting: this
    host is refused unless the operator allows it, and nothing reaches the server."""
    monkeypatch.delenv("OPENAI_BASE_URL")  # the deployment's own endpoint is allowed without being listed
    settings.EGRESS_ALLOW = []
    with pytest.raises(llm.LLMError) as info:
        _call(fake_llm, guarded=True)
    assert info.value.kind == "api_error" and "loopback" in info.value.message
    assert fake_llm.requests == []
    settings.EGRESS_ALLOW = ["127.0.0.1"]
    assert _call(fake_llm, guarded=True, stream=True, on_delta=lambda d: None).tool_calls[0].name == "send_message"


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
