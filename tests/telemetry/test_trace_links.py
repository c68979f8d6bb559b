"""The IDE shows a run's trace id on the run always (copyable, in its timeline) and on each of its steps when traces
are sent or linked, linked to TRACE_UI_URL when it is set."""

from core.models import Step
from core.runs.runner import run_agent
from core.telemetry import tracing
from tests.factories import make_agent
from tests.fake_llm import FakeLLM

JAEGER = "http://jaeger.example:16686/trace/{trace_id}"


def _run(account, fake_llm):
    agent = make_agent(account.org)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Hello"}))
    result = run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "hi"}])
    return agent, result.run_id, Step.objects.get(run_id=result.run_id)


def test_run_and_step_link_to_their_trace(web, account, fake_llm, settings):
    settings.TRACE_UI_URL = JAEGER
    agent, run_id, step = _run(account, fake_llm)
    trace_id = tracing.trace_id_hex(run_id)
    link = f'href="http://jaeger.example:16686/trace/{trace_id}"'
    run_page = web.get(f"/agents/{agent.id}/runs/{run_id}/").content.decode()
    step_page = web.get(f"/agents/{agent.id}/steps/{step.id}/").content.decode()
    assert link in run_page and f'">{trace_id}</code>' in run_page
    assert link in step_page and 'rel="noopener noreferrer"' in step_page


def test_without_traces_the_run_still_shows_its_trace_id_unlinked_and_the_step_does_not(
    web, account, fake_llm, settings
):
    settings.TRACE_UI_URL = ""
    before = tracing.tracing_install(None)
    try:
        agent, run_id, step = _run(account, fake_llm)
        pages = [web.get(f"/agents/{agent.id}/runs/{run_id}/"), web.get(f"/agents/{agent.id}/steps/{step.id}/")]
    finally:
        tracing.tracing_install(before)
    assert all(p.status_code == 200 for p in pages)
    run_page, step_page = (p.content.decode() for p in pages)
    assert f'">{tracing.trace_id_hex(run_id)}</code>' in run_page and "data-copy=" in run_page
    assert "open ↗" not in run_page and "trace-id" not in step_page


def test_a_traced_run_shows_its_trace_id_without_a_link(web, account, fake_llm, settings, otlp):
    settings.TRACE_UI_URL = ""
    agent, run_id, _ = _run(account, fake_llm)
    run = web.get(f"/agents/{agent.id}/runs/{run_id}/").content.decode()
    step = web.get(f"/agents/{agent.id}/steps/{Step.objects.get(run_id=run_id).id}/").content.decode()
    assert f'">{tracing.trace_id_hex(run_id)}</code>' in run and "open ↗" not in run
    assert f'<span class="trace-id muted small">trace <code>{tracing.trace_id_hex(run_id)}</code></span>' in step
