"""The workspace posts its sends and cancels (core.web.ws_handlers) and its socket only listens: the answer to a
post is the event the socket would have replied with, with the texts the page tells (core.web.live); a run that did
not complete arrives with its notice drawn by the server, a run that waits before a model call with its card."""

from django.test import Client

from core.agents.services import agent_update
from core.models import Run
from core.runs.request import RunRequest
from core.runs.runner import run_agent, run_start
from core.web.live import LiveRenderer
from tests.factories import make_agent
from tests.fake_llm import FakeLLM


def test_a_posted_send_starts_a_run_that_carries_its_otid(web, account, fake_llm):
    agent = make_agent(account.org)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "hello"}))
    out = web.post(f"/agents/{agent.id}/send/", {"text": "hi <i>there</i>", "otid": "otid-7"}).json()
    assert out["message_type"] == "run_status" and out["status"] == "created" and out["otid"] == "otid-7"
    assert out["label"] == f"running …{out['run_id'][-8:]}…"
    run = Run.objects.get(pk=out["run_id"])
    assert run.input_messages[0]["text"] == "hi <i>there</i>" and run.input_messages[0]["otid"] == "otid-7"


def test_a_refused_send_says_why_and_a_busy_agent_names_its_run(web, account, fake_llm):
    agent = make_agent(account.org)
    empty = web.post(f"/agents/{agent.id}/send/", {"text": "  "}).json()
    assert empty["message_type"] == "error_message" and "Type a message first" in empty["reason"]
    assert web.post(f"/agents/{agent.id}/send/", {"text": "a\x00b"}).status_code == 422  # the middleware refuses it
    agent_update(agent=agent, changes={"model": "mystery/model-x"})
    refused = web.post(f"/agents/{agent.id}/send/", {"text": "hello", "otid": "otid-8"}).json()
    assert refused["message_type"] == "error_message" and "mystery/model-x" in refused["reason"]
    assert refused["otid"] == "otid-8" and not Run.objects.filter(agent_id=agent.id).exists()

    other = make_agent(account.org)
    held = run_start(
        RunRequest(owner=account.org, agent_id=other.id, input_messages=[{"role": "user", "content": "x"}])
    )
    busy = web.post(f"/agents/{other.id}/send/", {"text": "are you free?"}).json()
    assert busy["message_type"] == "error_message" and busy["detail"]["run_id"] == held.id


def test_a_posted_cancel_with_nothing_to_cancel_carries_its_html(web, account):
    agent = make_agent(account.org)
    out = web.post(f"/agents/{agent.id}/cancel/").json()
    assert out["message_type"] == "error_message" and "Nothing to cancel" in out["html"]


def test_sends_and_cancels_are_posts_of_the_agents_owner(web, account, other_account):
    agent = make_agent(account.org)
    assert web.get(f"/agents/{agent.id}/send/").status_code == 405
    stranger = Client()
    stranger.force_login(other_account.user)
    assert stranger.post(f"/agents/{agent.id}/send/", {"text": "hi"}).status_code == 404
    assert stranger.post(f"/agents/{agent.id}/cancel/").status_code == 404
    assert web.post(f"/agents/{agent.id}/send/?conversation=conv-nope", {"text": "hi"}).status_code == 404
    assert Client(enforce_csrf_checks=True).post(f"/agents/{agent.id}/send/", {"text": "hi"}).status_code in (302, 403)


def test_a_failed_runs_status_arrives_with_its_notice(account, fake_llm):
    agent = make_agent(account.org)
    fake_llm.script(FakeLLM.error(500, "upstream exploded"))
    run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "keep <b>this</b>"}])
    run = Run.objects.get(agent_id=agent.id)
    event = {"message_type": "run_status", "run_id": run.id, "status": run.status, "stop_reason": run.stop_reason}
    out = LiveRenderer(agent.id).event(event)
    assert 'class="run-notice"' in out["html"] and "upstream exploded" in out["html"] and "data-retry" in out["html"]
    assert "keep &lt;b&gt;this&lt;/b&gt;" in out["html"]
    done = LiveRenderer(agent.id).event({**event, "status": "completed", "stop_reason": "end_turn"})
    assert "html" not in done and done["label"] == "completed · end_turn"
