"""POST /v1/agents/ refuses what is not an agent's description (422, naming the field), as docs/api.md says: a body
that is not a JSON object or not sent as JSON, objects given as another type, and a model no configured provider
serves (Letta refuses a handle it does not know)."""

import json

import pytest
from django.test import Client

from core.models import Agent


def _post(account, raw: str, content_type: str = "application/json"):
    return Client(HTTP_AUTHORIZATION=f"Bearer {account.token}").post("/v1/agents/", data=raw, content_type=content_type)


@pytest.mark.parametrize("raw", ["null", "[]", '"x"', "1"])
def test_a_body_that_is_not_an_object_is_422(account, fake_llm, raw):
    r = _post(account, raw)
    assert r.status_code == 422 and r.json()["errors"][0]["loc"][:1] == ["body"], r.content
    assert not Agent.objects.exists()


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded"])
def test_a_body_not_sent_as_json_is_422(account, fake_llm, content_type):
    r = _post(account, '{"name": "a"}', content_type)
    assert r.status_code == 422 and "Content-Type: application/json" in r.json()["detail"], r.content
    assert not Agent.objects.exists()


@pytest.mark.parametrize(
    "field,value",
    [
        ("compaction_settings", "x"),
        ("compaction_settings", 1),
        ("compaction_settings", []),
        ("llm_config", "x"),
        ("llm_config", 1),
        ("llm_config", []),
        ("initial_message_sequence", ["x"]),
    ],
)
def test_an_object_given_as_another_type_is_422_naming_it(account, fake_llm, field, value):
    r = _post(account, json.dumps({"name": "a", field: value}))
    assert r.status_code == 422, r.content
    assert field in r.json()["errors"][0]["loc"]
    assert not Agent.objects.exists()


def test_a_model_no_configured_provider_serves_is_422_naming_it(account, fake_llm):
    r = _post(account, json.dumps({"name": "a", "model": "nope/nope"}))
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == ["body", "model"], r.content
    assert "nope/nope" in r.json()["detail"] and not Agent.objects.exists()
    r = _post(account, json.dumps({"name": "a", "model": "openai/fake-model"}))  # one the configured provider serves
    assert r.status_code == 201, r.content


def test_with_no_provider_configured_yet_any_model_is_kept(account):
    """A fresh install creates its agents before adding a provider; their first send says how to add one."""
    r = _post(account, json.dumps({"name": "a", "model": "openai/gpt-4o-mini"}))
    assert r.status_code == 201 and r.json()["model"] == "openai/gpt-4o-mini", r.content
