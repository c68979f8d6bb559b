"""A provider an owner adds reaches only the public internet: a base URL on this host, its private network or
the metadata address is refused on the Settings page, and a stored one is refused again before any call — a
step, a model listing — so nothing connects. The deployment's own providers (environment) are the operator's."""

import socket
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.test import Client

from core import providers
from core.llm import client as llm
from core.models import ProviderConfig
from core.runs.runner import run_agent
from memory.embedders.selection import EmbeddingError, embedder_for_handle
from tests.factories import make_agent
from tests.fake_anthropic import FakeAnthropic
from tests.fake_llm import FakeLLM
from tests.helpers import serve_in_thread


@pytest.fixture
def fake(monkeypatch):
    server = FakeLLM().start()
    monkeypatch.setattr(providers, "_listing_cache", {})
    monkeypatch.setattr(providers, "_checked_bases", {})
    try:
        yield server
    finally:
        server.stop()


def _settings_post(account, base_url: str, *, kind: str = "openai_compatible"):
    web = Client()
    web.force_login(account.user)
    data = {"kind": kind, "name": "mine", "base_url": base_url, "api_key": "", "model_names": ""}
    if kind == "anthropic":  # the fake lists no models (HTTP 501): kept all the same, as an owner may
        data["save_anyway"] = "on"
    return web.post("/settings/providers/", data)


@pytest.mark.parametrize("host", ["127.0.0.1:5432", "169.254.169.254", "10.0.0.2:8080", "[::1]:11434", "localhost"])
def test_the_settings_page_refuses_a_base_url_inside(account, settings, host):
    settings.EGRESS_ALLOW = []
    resp = _settings_post(account, f"http://{host}/v1")
    assert resp.status_code == 400
    assert "base URL cannot be used" in resp.content.decode() and "public internet" in resp.content.decode()
    assert not ProviderConfig.objects.filter(owner=account.org).exists()


def test_a_stored_base_url_inside_is_refused_before_any_call(account, fake, settings):
    settings.EGRESS_ALLOW = ["127.0.0.1"]
    assert _settings_post(account, fake.base_url).status_code == 302  # allowed when it was saved
    asked = len(fake.requests)  # the save asked for its models
    settings.EGRESS_ALLOW = []
    agent = make_agent(account.org, model="mine/fake-model")
    fake.script(FakeLLM.tool("send_message", {"message": "hello"}))
    result = run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "hi"}])
    assert result.status != "completed"
    assert "loopback" in str(result.error if hasattr(result, "error") else result)
    assert [m["handle"] for m in providers.models_list(owner=account.org) if m["provider_name"] == "mine"] == []
    assert fake.requests[asked:] == []


def test_the_deployments_own_provider_on_loopback_is_the_operators_choice(account, fake, settings, monkeypatch):
    settings.EGRESS_ALLOW = []
    monkeypatch.setenv("OPENAI_API_KEY", "sk-operator")
    monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
    agent = make_agent(account.org, model="openai/fake-model")
    fake.script(FakeLLM.tool("send_message", {"message": "hello"}))
    result = run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "hi"}])
    assert result.status == "completed"


def test_an_owners_base_url_is_checked_again_when_the_call_connects(account, fake, settings, monkeypatch):
    """A name checked before the step may point inside by the time the call connects (DNS rebinding): the call to an
    owner's provider connects only through the egress guard, at an address checked as it connects."""
    settings.EGRESS_ALLOW = ["127.0.0.1"]
    assert _settings_post(account, fake.base_url).status_code == 302
    asked = len(fake.requests)  # the save asked for its models
    agent = make_agent(account.org, model="mine/fake-model")
    monkeypatch.setattr(providers, "base_url_check", lambda url: None)  # the check before the step passed...
    settings.EGRESS_ALLOW = []  # ...and the address is refused when the call connects
    result = run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "hi"}])
    assert result.status != "completed"
    assert "loopback" in str(result.error if hasattr(result, "error") else result)
    assert fake.requests[asked:] == []


def test_an_owners_embedding_provider_inside_is_refused_before_the_call_and_as_it_connects(
    account, fake, settings, monkeypatch
):
    settings.EGRESS_ALLOW = ["127.0.0.1"]
    assert _settings_post(account, fake.base_url).status_code == 302
    made_while_allowed = embedder_for_handle(owner=account.org, handle="mine/text-embedding-3-small")
    assert made_while_allowed.embed(["allowed"]).shape[0] == 1  # the provider answers: only the guard refuses below
    asked = len(fake.requests)
    settings.EGRESS_ALLOW = []
    monkeypatch.setattr(providers, "_checked_bases", {})
    # refused before any call: no embedder, so archival memory and file search use full text
    assert embedder_for_handle(owner=account.org, handle="mine/text-embedding-3-small") is None
    with pytest.raises(EmbeddingError, match="loopback"):  # and an embedder made before is refused as it connects
        made_while_allowed.embed(["inside"])
    assert fake.requests[asked:] == []


class _Internal(ThreadingHTTPServer):
    """What an owner's provider name must never lead to: a server inside (here on 127.0.0.2), counting its hits."""

    def __init__(self, port: int):
        hits = self.hits = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                hits.append(self.path)
                self.send_response(500)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST  # noqa: N815

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.2", port), Handler)
        serve_in_thread(self)


@pytest.fixture
def rebinding(account, settings, monkeypatch):
    """An owner's Anthropic-kind provider at http://rebind.test:P: the "public" server (FakeAnthropic, 127.0.0.1:P,
    the one address allowed) and an internal one (127.0.0.2:P) on the same port; `answers` scripts the resolver."""
    public = FakeAnthropic().start()
    internal = _Internal(int(public.base_url.rsplit(":", 1)[1]))
    base = public.base_url.replace("127.0.0.1", "rebind.test")
    answers, lookups = ["127.0.0.1"], []
    real = socket.getaddrinfo

    def resolve(host, port, *args, **kwargs):
        if host != "rebind.test":
            return real(host, port, *args, **kwargs)
        lookups.append(host)
        ip = answers[min(len(lookups), len(answers)) - 1]  # the last scripted answer repeats
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port))]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    monkeypatch.setattr(providers, "_checked_bases", {})
    settings.EGRESS_ALLOW = ["127.0.0.1"]
    assert _settings_post(account, base, kind="anthropic").status_code == 302
    answers[:], lookups[:] = ["127.0.0.1", "127.0.0.2"], []  # public when first asked, inside from then on
    monkeypatch.setattr(providers, "_checked_bases", {})
    try:
        yield public, internal, lookups, answers
    finally:
        public.stop()
        internal.shutdown()
        internal.server_close()


def test_dns_rebinding_never_reaches_inside_through_litellm(account, rebinding):
    """litellm resolves a name itself when it connects: an Anthropic-kind owner's call goes through the pinning
    relay, so the second answer (inside) is checked and refused instead of being connected to."""
    public, internal, lookups, _answers = rebinding
    agent = make_agent(account.org, model="mine/claude-sonnet-4-5")
    result = run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "hi"}])
    assert lookups == ["rebind.test", "rebind.test"]  # the check before the step, the check as the call connects
    assert internal.hits == []
    assert result.status != "completed" and "loopback" in str(result.error if hasattr(result, "error") else result)
    assert public.requests == []


@pytest.mark.parametrize("stream", [False, True])
def test_litellms_call_is_relayed_to_the_checked_address_whole(account, rebinding, stream):
    public, internal, lookups, answers = rebinding
    answers[:] = ["127.0.0.1"]
    resolved = providers.model_resolve(owner=account.org, handle="mine/claude-sonnet-4-5")
    lookups[:] = []  # from here every answer is the public one; only the guard asks, once per request
    public.script(FakeAnthropic.reply(text="pinned " * 50))
    request = {"model": resolved.litellm_model, "messages": [{"role": "user", "content": "hi"}]}
    got = llm.complete(request, api_base=resolved.api_base, api_key=resolved.api_key, stream=stream, guarded=True)
    assert got.content.strip() == ("pinned " * 50).strip()
    assert lookups == ["rebind.test"] and internal.hits == []
    assert [(r.path, r.headers.get("Host")) for r in public.requests] == [("/v1/messages", base_host(public))]


def base_host(server) -> str:
    return server.base_url.replace("http://127.0.0.1", "rebind.test")
