"""Feedback on the settings page (a provider's URL is asked before it is saved, a new token is shown with a copy
button, errors beside the button pressed), the styled 404/500 pages, and the sentence for a provider that cannot be
reached during a run. Servers are the fake LLM and closed ports on loopback; nothing leaves the machine."""

import json

import pytest
from django.test import Client, RequestFactory
from django.urls import include, path
from django.views import defaults

from core.llm.client import LLMError, complete
from core.models import ProviderConfig
from tests.factories import ApiClient, make_agent
from tests.helpers import free_port


def _boom(request):
    raise RuntimeError("a bug in a view")


# A URLconf with a view that fails, beside the project's own (for the 500 page through the real handler).
urlpatterns = [path("__boom__/", _boom), path("", include("agents_ide.urls"))]


@pytest.fixture
def loopback_allowed(settings):
    settings.EGRESS_ALLOW = ["127.0.0.1"]  # the owners' servers below are the test's own, on loopback


def _provider(base_url: str, **extra) -> dict:
    return {"kind": "openai_compatible", "name": "mine", "base_url": base_url, "api_key": "k", **extra}


def test_a_provider_that_answers_is_saved_and_says_so(web, account, fake_llm, loopback_allowed):
    r = web.post("/settings/providers/", _provider(fake_llm.base_url), follow=True)
    assert r.status_code == 200
    assert ProviderConfig.objects.filter(owner=account.org, name="mine").exists()
    assert "Saved mine. Its server answered." in r.content.decode()
    asked = [q for q in fake_llm.requests if q.method == "GET"]
    assert asked and asked[-1].path == "/v1/models" and asked[-1].headers.get("Authorization") == "Bearer k"


def test_an_unreachable_provider_is_not_saved_and_the_error_is_beside_the_button(web, account, loopback_allowed):
    url = f"http://127.0.0.1:{free_port()}/v1"
    r = web.post("/settings/providers/", _provider(url))
    assert r.status_code == 400
    assert not ProviderConfig.objects.filter(owner=account.org).exists()
    html = r.content.decode()
    sentence = f"The model provider at {url} is not reachable"
    assert 'id="base-url-error"' in html and 'id="provider-form-error"' in html
    field = html.split('id="base-url-error">', 1)[1].split("</span>", 1)[0]
    beside = html.split('id="provider-form-error"', 1)[1].split("</span>", 1)[0]
    assert sentence in field and sentence in beside
    assert 'name="save_anyway"' in html  # offered only now


def test_save_anyway_keeps_an_unreachable_provider_with_a_warning(web, account, loopback_allowed):
    url = f"http://127.0.0.1:{free_port()}/v1"
    r = web.post("/settings/providers/", _provider(url, save_anyway="on"), follow=True)
    assert r.status_code == 200
    row = ProviderConfig.objects.get(owner=account.org, name="mine")
    assert row.base_url == url
    html = r.content.decode()
    assert "Saved mine, but it cannot be used yet." in html and f"The model provider at {url} is not reachable" in html


def test_a_server_that_is_not_a_provider_is_named(web, account, fake_llm, loopback_allowed):
    url = fake_llm.base_url + "/chat"  # answers, but /v1/chat/models is not a model list
    r = web.post("/settings/providers/", _provider(url))
    assert r.status_code == 400
    assert "not a list of models" in r.content.decode() and "HTTP 404" in r.content.decode()
    assert not ProviderConfig.objects.filter(owner=account.org).exists()


def test_a_provider_without_base_url_is_not_asked(web, account, fake_llm):
    before = len(fake_llm.requests)
    r = web.post("/settings/providers/", {"kind": "anthropic", "name": "claude", "api_key": "k"})
    assert r.status_code == 302 and r["Location"].endswith("/settings/#providers")
    assert len(fake_llm.requests) == before


def test_a_new_token_is_shown_with_a_copy_button(web):
    r = web.post("/settings/tokens/", {"name": "ci"})
    assert r.status_code == 200
    html = r.content.decode()
    token = html.split('id="new-token-value">', 1)[1].split("</code>", 1)[0]
    assert len(token) > 20
    button = html.split('id="copy-token"', 1)[1].split(">", 1)[0]
    assert 'data-copy="#new-token-value"' in button and "autofocus" in button and "data-reveal" in button


def test_a_bad_token_name_answers_400_beside_the_button(web):
    r = web.post("/settings/tokens/", {"name": ""})
    assert r.status_code == 400
    assert 'id="token-form-error"' in r.content.decode()


def test_owner_settings_errors_are_at_the_field_and_beside_save(web):
    r = web.post("/settings/owner/", {"sandbox_default": "mars"})
    assert r.status_code == 400
    html = r.content.decode()
    assert 'id="owner-form-error"' in html and "Select a valid choice" in html.split('id="owner-form-error"', 1)[1]


def test_the_404_page_is_styled(web, settings):
    settings.DEBUG = False
    r = web.get("/no/such/page/")
    assert r.status_code == 404
    html = r.content.decode()
    assert 'id="error-page"' in html and "This page does not exist" in html and "ide/feedback.css" in html
    assert "Log out" in html  # the signed-in person keeps the top bar


def test_the_500_page_is_styled_and_needs_no_database(db, settings, django_assert_num_queries):
    settings.DEBUG = False
    with django_assert_num_queries(0):
        r = defaults.server_error(RequestFactory().get("/"))
    html = r.content.decode()
    assert r.status_code == 500 and 'id="error-page"' in html and "Something went wrong on the server" in html


def test_a_failing_view_answers_the_500_page(account, settings):  # an account: no first-run redirect
    settings.DEBUG, settings.ROOT_URLCONF = False, __name__
    r = Client(raise_request_exception=False).get("/__boom__/")
    assert r.status_code == 500 and "Something went wrong on the server" in r.content.decode()


def test_a_call_to_a_closed_port_names_the_provider():
    url = f"http://127.0.0.1:{free_port()}/v1"
    request = {"model": "openai/fake-model", "messages": [{"role": "user", "content": "hi"}]}
    with pytest.raises(LLMError) as caught:
        complete(request, api_base=url, api_key="k", timeout=3, stream=False, on_delta=None)
    assert caught.value.message.startswith(f"The model provider at {url} is not reachable")


def test_a_litellm_call_to_a_closed_port_names_the_provider():
    url = f"http://127.0.0.1:{free_port()}"
    request = {"model": "anthropic/claude-3-5-haiku-latest", "messages": [{"role": "user", "content": "hi"}]}
    with pytest.raises(LLMError) as caught:
        complete(request, api_base=url, api_key="k", timeout=3, stream=False, on_delta=None)
    assert f"The model provider at {url} is not reachable" in caught.value.message


@pytest.mark.django_db(transaction=True)
def test_a_run_against_an_unreachable_provider_says_so(account, monkeypatch):
    url = f"http://127.0.0.1:{free_port()}/v1"
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    agent = make_agent(account.org)
    r = ApiClient(account.token).post(
        f"/v1/agents/{agent.id}/messages", {"messages": [{"role": "user", "content": "hi"}], "streaming": True}
    )
    frames = [f for f in b"".join(r).decode().split("\n\n") if f.strip()]
    error = [f for f in frames if f.startswith("event: error")]
    assert error, frames
    payload = json.loads(error[0].split("data: ", 1)[1])
    assert f"The model provider at {url} is not reachable" in json.dumps(payload)


def test_the_check_sends_the_owners_key_or_none_never_the_deployments(web, account, fake_llm, loopback_allowed):
    # fake_llm set OPENAI_API_KEY (the deployment's key) to "fake-key"
    assert web.post("/settings/providers/", _provider(fake_llm.base_url, api_key="")).status_code == 302
    assert web.post("/settings/providers/", _provider(fake_llm.base_url, api_key="sk-own")).status_code == 302
    assert web.post("/settings/providers/", _provider(fake_llm.base_url, api_key="")).status_code == 302  # kept
    sent = [q.headers.get("Authorization") for q in fake_llm.requests if q.path == "/v1/models"]
    assert sent == [None, "Bearer sk-own", "Bearer sk-own"]


def test_agent_settings_errors_are_beside_save_settings(web, account, fake_llm):
    agent = make_agent(account.org)
    form = {"name": "Ada", "model": "openai/fake-model", "system": "s", "temperature": "9", "max_steps": "10"}
    html = web.post(f"/agents/{agent.id}/settings/", {**form, "context_window_limit": "8000"}).content.decode()
    beside = html.split('id="settings-form-error"', 1)[1].split("</span>", 1)[0]
    assert "Not saved" in beside and "Temperature" in beside
    assert 'hx-disabled-elt="find #save-settings"' in html
