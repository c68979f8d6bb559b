"""core.llm.client.embed against the fake OpenAI-compatible server: our own client over OpenAI's /embeddings wire
format, and litellm's public embedding() (the path every other provider takes) as its reference — both send the same
body, return the same vectors and raise the same typed errors."""

import pytest

from core.llm import client as llm
from core.llm import openai_wire, via_litellm
from tests.fake_llm import FakeLLM, Reply, embedding_vector

MODEL = "openai/text-embedding-3-small"


def _through_litellm(monkeypatch):
    """OpenAI-compatible embeddings through litellm's embedding(), as every other provider's go."""
    monkeypatch.setattr(openai_wire, "serves_embedding", lambda model: False)


def _without_litellm(monkeypatch):
    monkeypatch.setattr(via_litellm, "embed", lambda *a, **k: pytest.fail("called through litellm"))


@pytest.fixture(params=["own", "litellm"])
def path(request, monkeypatch):
    """Each test once through our own client and once through litellm's embedding()."""
    (_through_litellm if request.param == "litellm" else _without_litellm)(monkeypatch)
    return request.param


def _embed(fake, texts=("cats are great", "dogs"), **kw):
    return llm.embed(list(texts), model=MODEL, api_base=fake.base_url, api_key="fake", **kw)


def _both(fake, monkeypatch, call):
    """The same call through our client, then through litellm: (ours, litellm's) vectors, or the LLMError raised."""
    out = []
    for through in (_without_litellm, _through_litellm):
        with monkeypatch.context() as m:
            through(m)
            try:
                out.append(call())
            except llm.LLMError as exc:
                out.append(exc)
    return out


@pytest.mark.parametrize(
    "call",
    [
        {"texts": ["cats are great", "dogs", "cats"]},
        {"texts": ["one text"], "dimensions": 16},
        {"texts": ["from the environment's base URL"], "api_base": None},
    ],
)
def test_our_client_sends_and_returns_what_litellm_does(fake_llm, monkeypatch, call):
    """The body litellm's embedding() sends (the model's name without its provider, the inputs, `dimensions` when
    asked), the same key, and the same vectors in the inputs' order."""
    texts = call.pop("texts")
    base = call.pop("api_base", fake_llm.base_url)
    own, through = _both(
        fake_llm, monkeypatch, lambda: llm.embed(texts, model=MODEL, api_base=base, api_key="fake", **call)
    )
    sent = fake_llm.requests[-2:]
    assert [r.path for r in sent] == ["/v1/embeddings"] * 2
    assert sent[0].body == sent[1].body == {"model": "text-embedding-3-small", "input": texts, **call}
    assert {r.headers.get("authorization") or r.headers.get("Authorization") for r in sent} == {"Bearer fake"}
    assert own == through
    dim = call.get("dimensions", fake_llm.embedding_dim)
    assert own == [embedding_vector(t, dim) for t in texts]


def test_vectors_come_back_in_the_inputs_order_whatever_order_the_server_sends(fake_llm, path):
    vectors = [embedding_vector(t, 8) for t in ("first", "second")]
    data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
    fake_llm.script_embeddings(Reply(body={"object": "list", "data": data[::-1], "model": "m", "usage": {}}))
    assert _embed(fake_llm, ["first", "second"]) == vectors


def test_openai_compatible_embeddings_never_go_through_litellm_and_other_providers_do(fake_llm, monkeypatch):
    _without_litellm(monkeypatch)
    assert len(_embed(fake_llm)) == 2
    assert openai_wire.serves_embedding(MODEL) and openai_wire.serves_embedding("openai/nomic-embed-text")
    assert not openai_wire.serves_embedding("ollama/nomic-embed-text")
    assert not openai_wire.serves_embedding("openai/")
    calls = []
    monkeypatch.setattr(via_litellm, "embed", lambda kwargs: calls.append(kwargs) or [[1.0]])
    assert llm.embed(["x"], model="ollama/nomic-embed-text", api_base="http://127.0.0.1:9") == [[1.0]]
    assert calls[0]["model"] == "ollama/nomic-embed-text" and calls[0]["api_key"] == llm.NO_KEY


def test_the_connection_is_kept_across_calls(fake_llm, monkeypatch):
    _without_litellm(monkeypatch)
    for _ in range(3):
        _embed(fake_llm)
    assert len(fake_llm.embedding_requests) == 3 and fake_llm.connections == 1


@pytest.mark.parametrize(
    ("reply", "kind", "status"),
    [
        (FakeLLM.error(401, "invalid api key", type_="authentication_error"), "auth", 401),
        (FakeLLM.error(400, "input too long for this model"), "bad_request", 400),
    ],
)
def test_provider_errors_are_typed_alike(fake_llm, monkeypatch, reply, kind, status):
    fake_llm.script_embeddings(reply, reply)
    own, through = _both(fake_llm, monkeypatch, lambda: _embed(fake_llm))
    assert isinstance(own, llm.LLMError) and isinstance(through, llm.LLMError)
    assert (own.kind, own.status) == (through.kind, through.status) == (kind, status)
    words = reply.error_body["error"]["message"]
    assert words in own.message and words in through.message
    assert "Traceback" not in own.message
    assert len(_embed(fake_llm)) == 2  # the next call is answered as usual


@pytest.mark.parametrize(
    ("reply", "kind", "status"),
    [
        (FakeLLM.rate_limit_error(), "rate_limit", 429),
        (FakeLLM.error(500, "upstream exploded", type_="server_error"), "api_error", 500),
        (Reply(latency=1.5), "timeout", None),
    ],
)
def test_a_failure_that_could_pass_is_not_retried(fake_llm, monkeypatch, reply, kind, status):
    """One request, whatever failed: the caller decides what to do (a file's ingest ends `error`, a search falls back
    to full text). litellm's embedding() retries these twice with a back-off of seconds even when told max_retries=0,
    which is why this is not compared with it."""
    _without_litellm(monkeypatch)
    fake_llm.script_embeddings(reply)
    with pytest.raises(llm.LLMError) as info:
        _embed(fake_llm, timeout=0.3)
    assert (info.value.kind, info.value.status) == (kind, status)
    assert len(fake_llm.embedding_requests) == 1


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"object": "list"}, "no 'data'"),
        ({"object": "list", "data": [{"index": 0, "embedding": [0.1]}]}, "1 embeddings for 2 inputs"),
        ({"object": "list", "data": [{"index": 0, "embedding": "AAAA"}, {"index": 1}]}, "no list of numbers"),
        ("just text", "not a JSON object"),
    ],
)
def test_a_reply_that_is_not_embeddings_is_an_api_error(fake_llm, monkeypatch, body, words):
    """A 200 whose body holds no vector per input (a proxy in front of something else) fails the call saying why
    (litellm's embedding() returns what it found: no vector, or fewer than the inputs)."""
    _without_litellm(monkeypatch)
    fake_llm.script_embeddings(Reply(body=body))
    with pytest.raises(llm.LLMError) as info:
        _embed(fake_llm)
    assert info.value.kind == "api_error" and words in info.value.message


def test_unreachable_provider_is_an_api_error(path):
    with pytest.raises(llm.LLMError) as info:
        llm.embed(["x"], model=MODEL, api_base="http://127.0.0.1:9/v1", api_key="fake", timeout=2)
    assert info.value.kind == "api_error"
    assert ("not reachable" if path == "own" else "Connection error") in info.value.message


def test_a_guarded_call_connects_only_where_the_egress_guard_allows(fake_llm, settings, monkeypatch):
    """An owner's base URL (guarded) is connected to at an address the egress guard checked when connecting."""
    monkeypatch.delenv("OPENAI_BASE_URL")  # the deployment's own endpoint is allowed without being listed
    settings.EGRESS_ALLOW = []
    with pytest.raises(llm.LLMError) as info:
        _embed(fake_llm, guarded=True)
    assert info.value.kind == "api_error" and "loopback" in info.value.message
    assert fake_llm.requests == []
    settings.EGRESS_ALLOW = ["127.0.0.1"]
    assert len(_embed(fake_llm, guarded=True)) == 2
