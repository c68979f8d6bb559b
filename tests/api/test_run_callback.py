"""A send made with `callback_url` (Letta's LettaAsyncRequest) has its run's end POSTed there, in Letta's payload
(letta/services/run_manager.py _dispatch_callback_async), through the egress guard."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from core.models import Run
from core.runs import executor
from tests.factories import ApiClient, make_agent
from tests.fake_llm import FakeLLM
from tests.helpers import serve_in_thread

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def receiver():
    """A local HTTP server keeping the JSON bodies POSTed to it; `got` is set at the first."""
    bodies: list[dict] = []
    got = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()
            got.set()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    serve_in_thread(server, "callback-receiver")
    yield f"http://127.0.0.1:{server.server_address[1]}/done", bodies, got
    server.shutdown()
    server.server_close()


def _until_recorded(run_id: str) -> dict:
    for _ in range(100):
        config = Run.objects.get(pk=run_id).request_config or {}
        if config.get("callback_sent_at"):
            return config
        threading.Event().wait(0.1)
    raise AssertionError("the callback's outcome was never recorded")


def test_an_async_send_posts_its_end_to_the_callback_url(api, account, fake_llm, receiver, settings):
    settings.EGRESS_ALLOW = ["127.0.0.1"]  # the receiver is on loopback, which the guard refuses otherwise
    url, bodies, got = receiver
    agent = make_agent(account.org, agent_type="memgpt_v2_agent")
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Done."}))
    run = api.post(f"/v1/agents/{agent.id}/messages/async", {"input": "go", "callback_url": url}).json()
    executor.run_wait(run=Run.objects.get(pk=run["id"]))
    assert got.wait(30), "no callback arrived"
    (body,) = bodies
    assert (body["run_id"], body["status"]) == (run["id"], "completed") and body["completed_at"]
    listed = api.get(f"/v1/runs/{run['id']}/messages").json()
    assert body["metadata"]["result"]["messages"] == json.loads(json.dumps(listed, default=str))
    assert body["metadata"]["result"]["stop_reason"]["stop_reason"] == "end_turn"
    config = _until_recorded(run["id"])
    assert config["callback_url"] == url and config["callback_status_code"] == 204


def test_a_callback_the_guard_refuses_is_recorded_and_the_run_is_untouched(api, account, fake_llm, receiver):
    url, bodies, got = receiver  # loopback, not allowed here
    agent = make_agent(account.org)
    fake_llm.script(FakeLLM.text("Done."))
    run = api.post(f"/v1/agents/{agent.id}/messages/async", {"input": "go", "callback_url": url}).json()
    executor.run_wait(run=Run.objects.get(pk=run["id"]))
    config = _until_recorded(run["id"])
    assert "callback_error" in config and url in config["callback_error"] and not bodies
    assert Run.objects.get(pk=run["id"]).status == "completed"


def test_a_callback_url_must_be_http(api, account):
    agent = make_agent(account.org)
    bad = api.post(f"/v1/agents/{agent.id}/messages/async", {"input": "go", "callback_url": "file:///etc/passwd"})
    assert bad.status_code == 422 and "callback_url" in json.dumps(bad.json())
    assert ApiClient(account.token).get(f"/v1/runs/?agent_id={agent.id}").json() == []
