"""A key goes only where its owner sent it: the deployment's keys (environment) serve the deployment's providers, and
a provider an owner adds on the Settings page is called with that owner's key or none, never the environment's —
whatever the call (a step, a model listing, an embedding) and whichever client makes it (ours, litellm's)."""

import pytest
from django.test import Client

from core import providers
from core.errors import NotConfigured
from core.llm import client as llm
from core.llm import openai_wire
from core.models import Agent, ProviderConfig
from core.runs.runner import run_agent
from memory.services import passages_embed
from tests.factories import make_agent
from tests.fake_anthropic import FakeAnthropic
from tests.fake_llm import FakeLLM

SENTINEL = "sk-deployment-sentinel-0123456789"
ENV_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "DEEPSEEK_API_KEY", "OLLAMA_API_KEY")


@pytest.fixture(autouse=True)
def _deployment_keys(monkeypatch, settings):
    """Every provider key of the deployment is the sentinel; user URLs on this machine are allowed (the fakes)."""
    for var in ENV_KEYS:
        monkeypatch.setenv(var, SENTINEL)
    settings.EGRESS_ALLOW = ["127.0.0.1", "::1"]
    monkeypatch.setattr(providers, "_listing_cache", {})
    monkeypatch.setattr(providers, "_checked_bases", {})
    # The save's own check of the URL is not a call this file counts (tests/web/test_feedback.py checks its key).
    monkeypatch.setattr(providers, "provider_reach_check", lambda **kwargs: None)


@pytest.fixture
def fake():
    server = FakeLLM().start()
    try:
        yield server
    finally:
        server.stop()


def _seen(server) -> list[str]:
    """Every header value and body the server received, as text."""
    return [str(v) for r in server.requests for v in (*r.headers.values(), r.body)]


def _authorizations(server) -> set[str | None]:
    return {next((v for k, v in r.headers.items() if k.lower() == "authorization"), None) for r in server.requests}


def _never_got_the_sentinel(server) -> None:
    assert server.requests, "the fake server was not called: the test proves nothing"
    assert not [text for text in _seen(server) if SENTINEL in text]


def _provider_add(account, *, kind: str, base_url: str, api_key: str = "", name: str = "mine") -> None:
    """Add a provider as a user does, through the Settings page."""
    web = Client()
    web.force_login(account.user)
    r = web.post(
        "/settings/providers/",
        {"kind": kind, "name": name, "base_url": base_url, "api_key": api_key, "model_names": ""},
    )
    assert r.status_code == 302, r.content[:2000]


def _say_hi(agent):
    return run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "hi"}])


@pytest.mark.parametrize("path", ["own", "litellm"])
@pytest.mark.parametrize("kind", ["openai_compatible", "openai"])
def test_a_step_on_a_keyless_user_provider_never_sends_the_deployments_key(account, fake, monkeypatch, path, kind):
    if path == "litellm":  # litellm's completion(), as OpenAI's reasoning models and other providers are called
        monkeypatch.setattr(openai_wire, "serves", lambda *a, **k: False)
    _provider_add(account, kind=kind, base_url=fake.base_url)
    agent = make_agent(account.org, model="mine/fake-model")
    fake.script(FakeLLM.tool("send_message", {"message": "hello"}))
    result = _say_hi(agent)
    assert result.status == "completed", result
    assert fake.chat_requests
    _never_got_the_sentinel(fake)
    assert _authorizations(fake) == {f"Bearer {llm.NO_KEY}"}


def test_a_user_providers_own_key_is_the_one_sent(account, fake):
    _provider_add(account, kind="openai_compatible", base_url=fake.base_url, api_key="sk-alices-own")
    agent = make_agent(account.org, model="mine/fake-model")
    assert _say_hi(agent).status == "completed"
    assert _authorizations(fake) == {"Bearer sk-alices-own"}


def test_a_model_listing_of_a_keyless_user_provider_sends_no_authorization(account, fake):
    _provider_add(account, kind="openai_compatible", base_url=fake.base_url)
    handles = [m["handle"] for m in providers.models_list(owner=account.org) if m["provider_name"] == "mine"]
    assert "mine/fake-model" in handles
    _never_got_the_sentinel(fake)
    assert [r.path for r in fake.requests] == ["/v1/models"]
    assert _authorizations(fake) == {None}


def test_an_embedding_on_a_keyless_user_provider_never_sends_the_deployments_key(account, fake):
    _provider_add(account, kind="openai_compatible", base_url=fake.base_url)
    agent = make_agent(account.org, model="mine/fake-model", embedding="mine/fake-embedding")
    handle, vectors, error = passages_embed(agent=agent, texts=["cats are great"])
    assert (handle, error) == ("mine/fake-embedding", "") and vectors
    assert fake.embedding_requests
    _never_got_the_sentinel(fake)


@pytest.mark.parametrize("stream", [False, True])
def test_an_anthropic_kind_user_provider_never_gets_the_deployments_anthropic_key(account, stream):
    server = FakeAnthropic().start()
    try:
        _provider_add(account, kind="anthropic", base_url=server.base_url)
        resolved = providers.model_resolve(owner=account.org, handle="mine/claude-sonnet-4-5")
        request = {"model": resolved.litellm_model, "messages": [{"role": "user", "content": "hi"}]}
        llm.complete(request, api_base=resolved.api_base, api_key=resolved.api_key, stream=stream)
        _never_got_the_sentinel(server)
    finally:
        server.stop()


def test_a_user_provider_without_a_base_url_is_not_sent_to_the_deployments_base_url(account, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/deployment-proxy/v1")
    ProviderConfig.objects.create(owner=account.org, kind="openai", name="mine", api_key="sk-alices-own")
    resolved = providers.model_resolve(owner=account.org, handle="mine/gpt-4o-mini")
    assert (resolved.api_base, resolved.api_key) == ("https://api.openai.com/v1", "sk-alices-own")
    deployment = providers.model_resolve(owner=account.org, handle="openai/gpt-4o-mini")
    assert (deployment.api_base, deployment.api_key) == ("http://127.0.0.1:9/deployment-proxy/v1", SENTINEL)


def test_a_stored_llm_config_endpoint_does_not_steer_a_call(account, api, fake, monkeypatch):
    """Letta's llm_config/embedding_config name endpoints; they are stored and shown, but a call goes where the
    handle's provider is: the deployment's key reaches only the deployment's URL."""
    deployment = FakeLLM().start()
    try:
        monkeypatch.setenv("OPENAI_BASE_URL", deployment.base_url)
        r = api.post(
            "/v1/agents/",
            {
                "name": "steered",
                "llm_config": {
                    "model": "fake-model",
                    "model_endpoint_type": "openai",
                    "model_endpoint": fake.base_url,
                    "context_window": 16000,
                },
                "embedding_config": {
                    "embedding_model": "fake-embedding",
                    "embedding_endpoint_type": "openai",
                    "embedding_endpoint": fake.base_url,
                    "embedding_dim": 384,
                },
                "memory_blocks": [{"label": "human", "value": "Alice"}],
            },
        )
        assert r.status_code == 201, r.content
        agent = Agent.objects.get(pk=r.json()["id"])
        assert _say_hi(agent).status == "completed"
        passages_embed(agent=agent, texts=["cats"])
        assert not fake.requests
        assert deployment.chat_requests and deployment.embedding_requests
    finally:
        deployment.stop()


def test_a_request_cannot_name_its_own_base_url_or_key(fake):
    other = FakeLLM().start()
    try:
        request = {
            "model": "openai/fake-model",
            "messages": [{"role": "user", "content": "hi"}],
            "base_url": other.base_url,
            "api_key": SENTINEL,
            "extra_headers": {"X-Key": SENTINEL},
        }
        llm.complete(request, api_base=fake.base_url, api_key="k")
        assert not other.requests
        _never_got_the_sentinel(fake)
    finally:
        other.stop()


@pytest.mark.parametrize("path", ["own", "litellm"])
def test_no_key_given_to_the_client_means_the_placeholder_not_the_environments(fake, monkeypatch, path):
    if path == "litellm":
        monkeypatch.setattr(openai_wire, "serves", lambda *a, **k: False)
    request = {"model": "openai/fake-model", "messages": [{"role": "user", "content": "hi"}]}
    llm.complete(request, api_base=fake.base_url, api_key=None)
    assert _authorizations(fake) == {f"Bearer {llm.NO_KEY}"}
    llm.embed(["x"], model="openai/fake-embedding", api_base=fake.base_url, api_key=None)
    _never_got_the_sentinel(fake)


def test_a_user_ollama_provider_without_a_base_url_is_this_hosts_and_checked_by_the_egress_guard(account, settings):
    """Ollama has no public service: with no base URL litellm went to OLLAMA_API_BASE (the deployment's) or this
    host; an owner's provider is sent to this host's address only when the operator allows it."""
    _provider_add(account, kind="ollama", base_url="")
    assert providers.model_resolve(owner=account.org, handle="mine/llama3").api_base == "http://localhost:11434"
    settings.EGRESS_ALLOW = []
    with pytest.raises(NotConfigured, match="base URL cannot be used"):
        providers.model_resolve(owner=account.org, handle="mine/llama3")


def test_an_unknown_model_is_explained_without_contradiction(account, fake_llm):
    with pytest.raises(NotConfigured) as found:
        providers.model_resolve(owner=account.org, handle="mystery/model-x")
    message = str(found.value)
    assert "No LLM provider is configured" not in message  # one is: the message must not say otherwise
    assert "'mystery/model-x'" in message and "openai" in message and "named 'mystery'" in message
    with pytest.raises(NotConfigured, match="names a provider but no model"):
        providers.model_resolve(owner=account.org, handle="openai")


def test_a_providers_key_changed_in_settings_is_the_one_the_next_send_sends(account, fake):
    """An owner's providers are kept per process between sends (built from their stored columns): a key changed on the
    Settings page is sent by the very next send, and a deleted provider serves no longer."""
    _provider_add(account, kind="openai_compatible", base_url=fake.base_url, api_key="sk-first")
    agent = make_agent(account.org, model="mine/fake-model")
    assert _say_hi(agent).status == "completed"
    _provider_add(account, kind="openai_compatible", base_url=fake.base_url, api_key="sk-second")
    assert _say_hi(agent).status == "completed"
    sent = [
        next((v for k, v in r.headers.items() if k.lower() == "authorization"), None)
        for r in fake.requests
        if r.path.endswith("/chat/completions")
    ]
    assert sent == ["Bearer sk-first", "Bearer sk-second"]
    web = Client()
    web.force_login(account.user)
    row = ProviderConfig.objects.get(owner=account.org, name="mine")
    assert web.post(f"/settings/providers/{row.id}/delete/").status_code == 302
    with pytest.raises(NotConfigured):
        providers.model_resolve(owner=account.org, handle="mine/fake-model")
