"""A Letta client's llm_config is checked where we use its fields: a wrong type or range answers 422 and changes
nothing (before, it was stored as sent and the agent's every read then failed, or its model call did)."""

import pytest

from core.models import Agent

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent_id(api):
    body = api.post("/v1/agents/", {"name": "cfg", "model": "openai/fake-model"}).json()
    return body["id"]


@pytest.mark.parametrize(
    "cfg",
    [
        {"temperature": "hot"},
        {"temperature": 7},
        {"max_tokens": 0},
        {"context_window": "big"},
        {"put_inner_thoughts_in_kwargs": "maybe"},
        {"model": ["a", "list"]},
    ],
)
def test_a_bad_llm_config_is_refused_and_nothing_changes(api, agent_id, cfg):
    before = Agent.objects.values().get(pk=agent_id)
    r = api.patch(f"/v1/agents/{agent_id}", {"llm_config": cfg})
    assert r.status_code == 422, r.content
    assert "llm_config" in r.content.decode()
    assert Agent.objects.values().get(pk=agent_id) == before
    assert api.get(f"/v1/agents/{agent_id}").status_code == 200
    r = api.post("/v1/agents/", {"name": "cfg2", "model": "openai/fake-model", "llm_config": cfg})
    assert r.status_code == 422 and not Agent.objects.filter(name="cfg2").exists()


def test_a_letta_llm_config_with_fields_we_do_not_use_is_accepted(api, agent_id):
    cfg = {
        "model": "gpt-4o-mini",
        "model_endpoint_type": "openai",
        "model_endpoint": "https://example.invalid/v1",
        "context_window": 32000,
        "temperature": 0.2,
        "max_tokens": 512,
        "put_inner_thoughts_in_kwargs": False,
        "handle": None,
        "compatibility_type": None,
        "frequency_penalty": 0.5,
    }
    r = api.patch(f"/v1/agents/{agent_id}", {"llm_config": cfg})
    assert r.status_code == 200, r.content
    out = r.json()["llm_config"]
    assert (out["handle"], out["context_window"], out["temperature"], out["max_tokens"]) == (
        "openai/gpt-4o-mini",
        32000,
        0.2,
        512,
    )
    assert out["put_inner_thoughts_in_kwargs"] is False
