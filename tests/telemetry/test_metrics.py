"""GET /metrics: Prometheus' text format behind METRICS_TOKEN, with the counters and histograms a run moves."""

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.factories import make_agent
from tests.fake_llm import FakeLLM

TOKEN = "metrics-token-43"


@pytest.fixture
def metrics_on(settings):
    settings.METRICS_TOKEN = TOKEN
    settings.METRICS_MODELS = ["openai/fake-model"]  # the operator's model (the fake provider's) is named in labels


def _scrape(client) -> dict:
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def _value(scraped: dict, name: str, **labels) -> float:
    return scraped.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_are_off_without_a_token(client, db, settings):
    settings.METRICS_TOKEN = ""
    assert client.get("/metrics").status_code == 404


def test_metrics_refuse_a_missing_or_wrong_token(client, db, metrics_on):
    missing = client.get("/metrics")
    assert missing.status_code == 401 and missing["WWW-Authenticate"].startswith("Bearer")
    assert b"METRICS_TOKEN" in missing.content
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Basic {TOKEN}").status_code == 401


def test_a_run_moves_the_counters_and_histograms(client, api, account, fake_llm, metrics_on):
    agent = make_agent(account.org)
    fake_llm.script(
        FakeLLM.tool("core_memory_append", {"label": "human", "content": "Likes cats."}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "Noted"}),
    )
    before = _scrape(client)
    response = api.post(f"/v1/agents/{agent.id}/messages", {"messages": [{"role": "user", "content": "I like cats"}]})
    assert response.status_code == 200
    after = _scrape(client)

    def moved(name, **labels):
        return _value(after, name, **labels) - _value(before, name, **labels)

    assert moved("agents_ide_runs_total", status="completed", stop_reason="end_turn") == 1
    assert moved("agents_ide_step_duration_seconds_count") == 2
    assert moved("agents_ide_step_duration_seconds_sum") > 0
    assert moved("agents_ide_model_call_duration_seconds_count", model="openai/fake-model", outcome="ok") == 2
    assert moved("agents_ide_tokens_total", model="openai/fake-model", type="input") > 0
    assert moved("agents_ide_tokens_total", model="openai/fake-model", type="output") > 0
    assert moved("agents_ide_tool_runs_total", status="success", sandbox="in-process") == 2
    assert moved("agents_ide_http_requests_total", method="POST", status="200") == 1
    # read from the database when scraped: nothing is queued, running or waiting now
    assert _value(after, "agents_ide_queue_depth") == 0
    assert _value(after, "agents_ide_runs_in_progress") == 0
    assert _value(after, "agents_ide_runs_waiting") == 0
    assert ("agents_ide_websocket_connections", ()) in after


def test_a_model_the_operator_did_not_configure_is_counted_as_other(client, api, account, fake_llm, metrics_on):
    """A tenant chooses its agents' model names: as label values each would be a series kept for good."""
    agent = make_agent(account.org, model="openai/tenant-chosen-0001")
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Hi"}))
    before = _scrape(client)
    assert (
        api.post(f"/v1/agents/{agent.id}/messages", {"messages": [{"role": "user", "content": "hi"}]}).status_code
        == 200
    )
    after = _scrape(client)
    assert (
        _value(after, "agents_ide_model_call_duration_seconds_count", model="other", outcome="ok")
        - _value(before, "agents_ide_model_call_duration_seconds_count", model="other", outcome="ok")
        == 1
    )
    assert _value(after, "agents_ide_tokens_total", model="other", type="input") > _value(
        before, "agents_ide_tokens_total", model="other", type="input"
    )
    assert not [key for key in after if ("model", "openai/tenant-chosen-0001") in key[1]]


def test_the_operators_models_are_its_settings_and_its_environments_providers(settings, monkeypatch, account):
    from core.models import ProviderConfig
    from core.providers import operator_model_handles
    from core.telemetry.metrics import model_label

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "operator-key")
    settings.DEFAULT_MODEL, settings.EMBEDDING_MODEL = "ollama/llama3.1", "openai/text-embedding-3-small"
    settings.METRICS_MODELS = ["openai/my-vllm-model"]
    ProviderConfig.objects.create(owner=account.org, name="mine", kind="openai_compatible", model_names=["x"])
    handles = operator_model_handles()
    assert {"ollama/llama3.1", "openai/text-embedding-3-small", "openai/my-vllm-model", "openai/gpt-4o"} <= handles
    assert not {h for h in handles if h.startswith(("anthropic/", "mine/"))}  # no key: not configured; a tenant's
    assert [model_label(m) for m in ("openai/gpt-4o", "openai/my-vllm-model", "mine/x", "openai/x" * 30, "")] == [
        "openai/gpt-4o",
        "openai/my-vllm-model",
        "other",
        "other",
        "other",
    ]


def test_a_failed_model_call_counts_an_error_by_kind(client, api, account, fake_llm, metrics_on):
    agent = make_agent(account.org)
    fake_llm.script(FakeLLM.error(429, "slow down", type_="rate_limit_error"))
    before = _scrape(client)
    api.post(f"/v1/agents/{agent.id}/messages", {"messages": [{"role": "user", "content": "hi"}]})
    after = _scrape(client)
    assert (
        _value(after, "agents_ide_errors_total", kind="llm_rate_limit")
        - _value(before, "agents_ide_errors_total", kind="llm_rate_limit")
        == 1
    )
    assert (
        _value(after, "agents_ide_runs_total", status="failed", stop_reason="llm_api_error")
        - _value(before, "agents_ide_runs_total", status="failed", stop_reason="llm_api_error")
        == 1
    )


@pytest.mark.django_db(transaction=True)
def test_a_lease_sweep_is_counted_with_the_runs_it_failed(client, metrics_on, account, settings):
    """The lease thread's sweeps are counted, and the runs a sweep failed because their process died."""
    from datetime import timedelta

    from django.utils import timezone

    from core.models import Run
    from core.runs import queue
    from tests.helpers import until

    agent = make_agent(account.org)
    before = _scrape(client)
    lost = Run.objects.create(
        owner=agent.owner,
        agent=agent,
        status="running",
        worker="gone:1",
        heartbeat_at=timezone.now() - timedelta(minutes=5),
        background=True,
    )
    settings.RUN_LEASE_S = 1.5  # the thread sweeps every half second from its next sweep on
    queue.lease_thread_ensure()
    until(lambda: Run.objects.get(pk=lost.pk).status == "failed", what="a sweep to fail the lapsed run")
    reaped = _value(before, "agents_ide_runs_reaped_total") + 1  # counted once the sweep that failed it returns
    after = until(
        lambda: (s := _scrape(client)) and _value(s, "agents_ide_runs_reaped_total") >= reaped and s,
        what="the sweep to be counted",
    )
    assert _value(after, "agents_ide_lease_sweeps_total") > _value(before, "agents_ide_lease_sweeps_total")
