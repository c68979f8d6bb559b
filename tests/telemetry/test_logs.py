"""Structured logs: one JSON line per request and per run end, carrying the request, run, step and agent ids."""

import io
import json
import logging

import pytest

from core.models import Run
from core.telemetry import logs, tracing
from tests.factories import make_agent
from tests.fake_llm import FakeLLM


@pytest.fixture
def json_lines():
    """What the loggers of requests and runs write through the JSON formatter, as settings configure it."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(logs.ContextFilter())
    handler.setFormatter(logs.JsonFormatter())
    loggers = [logging.getLogger(name) for name in ("agents_ide.requests", "agents_ide.runs")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    try:
        yield lambda: [json.loads(line) for line in out.getvalue().splitlines()]
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.removeHandler(handler)
            logger.setLevel(level)


def test_a_request_and_its_run_each_log_one_json_line(api, account, fake_llm, json_lines):
    agent = make_agent(account.org)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Hello"}))
    response = api.post(
        f"/v1/agents/{agent.id}/messages",
        {"messages": [{"role": "user", "content": "hi"}]},
        HTTP_X_REQUEST_ID="req-logs-1",
    )
    assert response.status_code == 200 and response["X-Request-ID"] == "req-logs-1"
    run = Run.objects.get(agent=agent)
    ended, request = json_lines()
    assert ended["logger"] == "agents_ide.runs" and ended["message"] == "run ended" and ended["level"] == "INFO"
    assert (
        ended.items()
        >= {
            "request_id": "req-logs-1",
            "user": "alice",
            "run_id": run.id,
            "agent_id": agent.id,
            "trace_id": tracing.trace_id_hex(run.id),
            "status": "completed",
            "stop_reason": "end_turn",
            "steps": 1,
        }.items()
    )
    assert ended["duration_ms"] > 0 and ended["total_tokens"] > 0 and "step_id" not in ended  # the step had ended
    assert request["logger"] == "agents_ide.requests"
    assert (
        request.items()
        >= {
            "message": f"POST /v1/agents/{agent.id}/messages 200",
            "request_id": "req-logs-1",
            "method": "POST",
            "status": 200,
            "user": "alice",
            "path": f"/v1/agents/{agent.id}/messages",
        }.items()
    )
    assert "run_id" not in request and request["time"].endswith("+00:00")


def test_a_request_without_a_sane_id_gets_one(client, db, json_lines):
    response = client.get("/healthz", HTTP_X_REQUEST_ID="no spaces or <tags> allowed")
    [line] = json_lines()
    assert len(response["X-Request-ID"]) == 32 and line["request_id"] == response["X-Request-ID"]
    assert "user" not in line


def test_the_text_format_appends_the_ids():
    record = logging.makeLogRecord({"msg": "step failed", "levelname": "WARNING", "name": "core.runs.runner"})
    with logs.bound(run_id="run-1", agent_id="agent-1"):
        logs.bind(step_id="step-1")
        text = logs.TextFormatter().format(record)
    assert text.endswith("core.runs.runner: step failed [run_id=run-1 step_id=step-1 agent_id=agent-1]")
    assert logs.ids() == {}  # the block's ids, the step's too, end with it


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_request_that_ends_in_an_exception_leaves_no_ids_bound(mode, rf):
    """The request's ids are unbound in the frame that bound them, also when the rest of the chain raises (a
    cancelled task, an aborted request) and `after` never runs."""
    import asyncio

    from core.telemetry.middleware import RequestLogMiddleware

    seen = {}

    def view(request):
        seen["inside"] = logs.ids().get("request_id")
        raise asyncio.CancelledError

    async def aview(request):
        return view(request)

    request = rf.get("/v1/agents", HTTP_X_REQUEST_ID="req-abc")
    with pytest.raises(asyncio.CancelledError):
        if mode == "sync":
            RequestLogMiddleware(view)(request)
        else:
            asyncio.run(RequestLogMiddleware(aview)(request))
    assert seen["inside"] == "req-abc"
    assert logs.ids().get("request_id") is None
    assert logs.request_user() == ""
