"""Every run is a trace, exported over OTLP/HTTP to a real receiver started by the test: its root span, a span per
step, per model call (GenAI attributes), per tool call and per memory edit; agent-to-agent messages are linked."""

import json

import pytest

from core.models import Run, Step
from core.runs import queue
from core.telemetry import tracing
from tests.factories import make_agent
from tests.fake_llm import FakeLLM


def _trace(otlp, run_id: str) -> list[dict]:
    otlp.provider.force_flush()
    return [s for s in otlp.spans if s["trace_id"] == tracing.trace_id_hex(run_id)]


def _one(spans, name):
    [found] = [s for s in spans if s["name"] == name]
    return found


def _send(api, agent, text: str, **headers):
    response = api.post(f"/v1/agents/{agent.id}/messages", {"messages": [{"role": "user", "content": text}]}, **headers)
    assert response.status_code == 200, response.content
    return Run.objects.get(agent=agent)


def test_a_run_is_a_trace_of_steps_model_calls_and_tool_calls(api, account, fake_llm, otlp):
    agent = make_agent(account.org)
    fake_llm.script(
        FakeLLM.tool("core_memory_append", {"label": "human", "content": "Likes cats."}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "Noted"}),
    )
    run = _send(api, agent, "I like cats", HTTP_X_REQUEST_ID="req-43")
    spans = _trace(otlp, run.id)

    root = _one(spans, "invoke_agent")
    assert root["parent"] == "" and root["trace_id"] == run.id.removeprefix("run-").replace("-", "")
    assert root["resource"]["service.name"] == "agents-ide"
    assert (
        root["attributes"].items()
        >= {
            "agents_ide.run.id": run.id,
            "agents_ide.agent.id": agent.id,
            "gen_ai.agent.id": agent.id,
            "agents_ide.owner.id": account.org.id,
            "agents_ide.request.id": "req-43",
            "enduser.id": "alice",
            "agents_ide.run.status": "completed",
            "agents_ide.run.stop_reason": "end_turn",
            "agents_ide.run.steps": 2,
        }.items()
    )

    steps = {s["name"]: s for s in spans if s["name"].startswith("step ")}
    assert set(steps) == {"step 0", "step 1"} and all(s["parent"] == root["span_id"] for s in steps.values())
    stored = list(Step.objects.filter(run=run).order_by("index").values_list("id", flat=True))
    assert [steps[f"step {i}"]["attributes"]["agents_ide.step.id"] for i in (0, 1)] == stored

    calls = [s for s in spans if s["name"] == "chat fake-model"]
    assert sorted(c["parent"] for c in calls) == sorted(s["span_id"] for s in steps.values())
    for call in calls:
        a = call["attributes"]
        assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.system"] == "openai"
        assert a["gen_ai.request.model"] == "fake-model"
        assert a["gen_ai.usage.input_tokens"] > 0 and a["gen_ai.usage.output_tokens"] > 0
        assert a["gen_ai.response.finish_reasons"] == ["tool_calls"]
        assert "gen_ai.input.messages" not in a and "gen_ai.output.messages" not in a  # content is opt-in

    append = _one(spans, "execute_tool core_memory_append")
    assert append["parent"] == steps["step 0"]["span_id"]
    assert (
        append["attributes"].items()
        >= {
            "gen_ai.tool.name": "core_memory_append",
            "agents_ide.tool.sandbox": "in-process",
            "agents_ide.tool.status": "success",
        }.items()
    )
    assert _one(spans, "execute_tool send_message")["parent"] == steps["step 1"]["span_id"]
    edit = _one(spans, "memory_edit")
    assert edit["parent"] == steps["step 0"]["span_id"] and edit["attributes"]["agents_ide.block.label"] == "human"


@pytest.mark.capture_content
def test_prompts_and_completions_are_on_model_spans_only_when_asked(api, account, fake_llm, otlp):
    agent = make_agent(account.org)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Hello there"}))
    run = _send(api, agent, "a secret prompt")
    attributes = _one(_trace(otlp, run.id), "chat fake-model")["attributes"]
    assert json.loads(attributes["gen_ai.input.messages"])[-1]["content"] == "a secret prompt"
    [reply] = json.loads(attributes["gen_ai.output.messages"])
    assert reply["tool_calls"][0]["name"] == "send_message" and "Hello there" in reply["tool_calls"][0]["arguments"]


def test_a_failed_model_call_marks_its_span_and_the_run(api, account, fake_llm, otlp):
    agent = make_agent(account.org)
    fake_llm.script(FakeLLM.error(401, "bad key"))
    run = _send(api, agent, "hi")
    spans = _trace(otlp, run.id)
    call = _one(spans, "chat fake-model")
    assert call["attributes"]["error.type"] == "auth" and call["status"] == 2  # STATUS_CODE_ERROR
    root = _one(spans, "invoke_agent")
    assert root["attributes"]["agents_ide.run.status"] == "failed" and root["status"] == 2


@pytest.mark.django_db(transaction=True)
def test_an_agent_message_links_the_two_runs(account, fake_llm, otlp):
    from core.runs.runner import run_agent  # a run whose receiver executes on another thread

    a = make_agent(account.org, name="a", include_multi_agent_tools=True)
    b = make_agent(account.org, name="b")
    fake_llm.script(
        FakeLLM.tool("send_message_to_agent_and_wait_for_reply", {"message": "ping", "other_agent_id": b.id}),
        FakeLLM.tool("send_message", {"message": "pong"}),
        FakeLLM.tool("send_message", {"message": "b said pong"}),
    )
    try:
        sent = run_agent(agent_id=a.id, owner=a.owner, input_messages=[{"role": "user", "content": "hi"}])
    finally:
        queue.shutdown()
    received = Run.objects.get(agent=b)
    a_spans, b_spans = _trace(otlp, sent.run_id), _trace(otlp, received.id)
    a_root, b_root = _one(a_spans, "invoke_agent"), _one(b_spans, "invoke_agent")
    tool = _one(a_spans, "execute_tool send_message_to_agent_and_wait_for_reply")
    assert tool["links"] == [{"trace_id": b_root["trace_id"], "span_id": b_root["span_id"]}]
    assert b_root["links"] == [{"trace_id": a_root["trace_id"], "span_id": a_root["span_id"]}]
    assert b_root["attributes"]["agents_ide.parent_run.id"] == sent.run_id


class _Stuck:
    """An exporter that holds its first batch until released (a collector that does not answer)."""

    def __init__(self, result):
        import threading

        self.release, self.result, self.exported = threading.Event(), result, 0

    def export(self, spans):
        self.release.wait(10)
        self.exported += len(spans)
        return self.result

    def shutdown(self):
        self.release.set()

    def force_flush(self, timeout_millis=30000):
        return True


def _sample(reason: str) -> float:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value("agents_ide_trace_spans_dropped_total", {"reason": reason}) or 0.0


def test_spans_beyond_the_queue_are_dropped_and_counted_never_waited_for():
    from opentelemetry.sdk.trace.export import SpanExportResult

    exporter = _Stuck(SpanExportResult.SUCCESS)
    provider = tracing.provider_build(exporter, max_queue_size=2)
    tracer = provider.get_tracer("test")
    before = _sample("queue_full")
    for i in range(5):
        tracer.start_span(f"s{i}").end()  # returns at once though the exporter is stuck
    assert _sample("queue_full") - before == 3
    exporter.release.set()
    provider.force_flush()
    provider.shutdown()
    assert exporter.exported == 2


def test_a_batch_the_collector_refuses_is_counted():
    from opentelemetry.sdk.trace.export import SpanExportResult

    exporter = _Stuck(SpanExportResult.FAILURE)
    exporter.release.set()
    provider = tracing.provider_build(exporter)
    before = _sample("export_failed")
    provider.get_tracer("test").start_span("lost").end()
    provider.force_flush()
    provider.shutdown()
    assert _sample("export_failed") - before == 1


COUNT_SOURCE = '''
def count_rows(table: str) -> int:
    """Count a table's rows.

    Args:
        table: The table's name.
    """
    return 42
'''


@pytest.mark.django_db(transaction=True)
def test_a_streamed_calls_first_token_and_a_sandboxs_start_are_spans_stored_with_the_step(api, account, fake_llm, otlp):
    import dataclasses

    from core.agents.run_view import run_timeline
    from core.models import Message
    from tools.services import tool_attach, tool_create

    agent = make_agent(account.org)
    tool_attach(agent=agent, tool=tool_create(owner=account.org, source_code=COUNT_SOURCE))
    fake_llm.script(  # the first fragment comes after 0.3 s, so its wait is at least that
        dataclasses.replace(FakeLLM.tool("count_rows", {"table": "t"}, heartbeat=True), latency=0.3),
        FakeLLM.tool("send_message", {"message": "42 rows"}),
    )
    response = api.post(f"/v1/agents/{agent.id}/messages/stream", {"input": "how many?", "stream_tokens": True})
    assert b"".join(response).decode().endswith("data: [DONE]\n\n")
    run = Run.objects.get(agent=agent)
    spans = _trace(otlp, run.id)
    first_step = Step.objects.filter(run=run).order_by("index").first()

    calls = [s for s in spans if s["name"] == "chat fake-model"]
    firsts = [s for s in spans if s["name"] == "first_token"]
    assert sorted(f["parent"] for f in firsts) == sorted(c["span_id"] for c in calls)
    [first] = [f for f in firsts if f["parent"] == _one_parent(spans, first_step.id, calls)["span_id"]]
    call = next(c for c in calls if c["span_id"] == first["parent"])
    ttft = first_step.usage["first_token_ms"]
    assert ttft >= 300 and call["attributes"]["agents_ide.llm.first_token_ms"] == ttft
    assert first["start_ns"] == call["start_ns"] and abs((first["end_ns"] - first["start_ns"]) / 1e6 - ttft) < 0.001

    tool = _one(spans, "execute_tool count_rows")
    start = _one(spans, "sandbox_start")
    stored = Message.objects.get(step=first_step, role="tool").tool_return
    assert start["parent"] == tool["span_id"] and start["start_ns"] == tool["start_ns"]
    assert 0 < stored["sandbox_start_ms"] <= stored["duration_ms"]
    assert tool["attributes"]["agents_ide.tool.sandbox_start_ms"] == stored["sandbox_start_ms"]
    assert abs((start["end_ns"] - start["start_ns"]) / 1e6 - stored["sandbox_start_ms"]) < 0.001

    # the IDE's timeline draws the same two spans from the stored step, each under the span it is part of
    rows = [(s.kind, s.label, s.depth, round(s.ms, 3)) for s in run_timeline(run=run)["spans"]]
    model_row = rows.index(("model", "step 1 · model call", 0, first_step.model_ms))
    assert rows[model_row + 1] == ("first_token", "first token", 1, ttft)
    tool_row = next(i for i, r in enumerate(rows) if r[:2] == ("tool", "count_rows"))
    assert rows[tool_row + 1] == ("sandbox", "sandbox start", 1, stored["sandbox_start_ms"])


def _one_parent(spans, step_id: str, calls):
    """The model call span of the stored step `step_id`."""
    [step] = [s for s in spans if s["attributes"].get("agents_ide.step.id") == step_id]
    [call] = [c for c in calls if c["parent"] == step["span_id"]]
    return call
