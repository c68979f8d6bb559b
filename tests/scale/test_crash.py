"""Crash recovery on the embedded default: the server is killed with SIGKILL in the middle of a run of each
kind (synchronous, SSE, websocket, async, agent-to-agent), during its first model call or a later one, then started
again. The message the API accepted is in the agent's history; the restarted server knows the process that held the
run is gone and fails the run at once (no wait for its lease, RUN_LEASE_S, set long here), so the agent takes a new
message as soon as the server answers; the run reads `failed` with a stop reason and an error saying why, and no step
is half-written: the step that committed has all its messages, the interrupted one left nothing. (A run worker killed
under RUNS_IN_WORKER is in test_multiprocess.py.)"""

import asyncio
import json
import os
import signal
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from core.models import Agent, Message, Run, Step
from core.runs.queue import GONE
from tests.factories import make_agent
from tests.fake_llm import FakeLLM
from tests.helpers import Daphne, daphne_start, free_port, until

ROOT = Path(__file__).resolve().parents[2]
LEASE_S = 600  # longer than any test: only the restarted server's own knowledge frees the agents
WAIT = "send_message_to_agent_and_wait_for_reply"
KINDS = ["sync", "sse", "websocket", "async", "agent_to_agent"]


class Server:
    """One daphne process on the embedded default (in-process channel layer and run pool), started by the tests'
    one starter (`tests.helpers.daphne_start`); restartable on the same port."""

    def __init__(self):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.daphne: Daphne | None = None
        self.starts = 0
        self.env = {"RUN_LEASE_S": str(LEASE_S)}  # the server's environment beyond the starter's; a test may add

    def start(self) -> None:
        logs = ROOT / "test-artifacts"
        self.starts += 1
        log = logs / f"crash-{self.port}-{self.starts}.log" if logs.exists() else None
        self.daphne = daphne_start(env=self.env, port=self.port, log=log)

    def kill(self) -> None:
        os.kill(self.daphne.proc.pid, signal.SIGKILL)
        self.daphne.proc.wait()

    def stop(self) -> None:
        if self.daphne is not None:
            self.daphne.stop(timeout=15)


@pytest.fixture
def server(transactional_db, fake_llm):
    s = Server()
    try:
        yield s
    finally:
        s.stop()


def _post(url: str, token: str, body: dict, timeout: float = 30) -> tuple[int, bytes]:
    req = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _in_background(fn) -> None:
    """Call fn on a thread and ignore how it ends (the server it talks to is about to die)."""

    def call():
        try:
            fn()
        except Exception:  # noqa: BLE001 - a dropped connection is the expected end
            pass

    threading.Thread(target=call, daemon=True).start()


def _session_cookie(user) -> str:
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


async def _ws_send(url: str, cookie: str, origin: str, agent_id: str) -> None:
    import aiohttp

    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(
            url.replace("http", "ws") + f"/ws/agents/{agent_id}/", headers={"Cookie": cookie, "Origin": origin}
        ) as ws:
            await ws.send_json({"type": "user_message", "text": "long job"})
            async for _ in ws:  # keep listening until the server dies
                pass


def _start(kind: str, server: Server, account, agent: Agent) -> None:
    base = f"{server.url}/v1/agents/{agent.id}"
    body = {"messages": [{"role": "user", "content": "long job"}]}
    if kind == "sync":
        _in_background(lambda: _post(f"{base}/messages", account.token, body, timeout=120))
    elif kind == "sse":
        _in_background(lambda: _post(f"{base}/messages/stream", account.token, body, timeout=120))
    elif kind == "async":
        status, _ = _post(f"{base}/messages/async", account.token, body)
        assert status == 200
    elif kind == "websocket":
        cookie = _session_cookie(account.user)
        _in_background(lambda: asyncio.run(_ws_send(server.url, cookie, server.url, agent.id)))
    else:
        _in_background(lambda: _post(f"{base}/messages", account.token, body, timeout=120))


def _assert_whole_steps(run: Run, committed: int) -> None:
    steps = list(Step.objects.filter(run=run).order_by("index"))
    assert len(steps) == committed, [s.index for s in steps]
    for step in steps:  # each committed step has its reply and its tool results, nothing of a later step
        assert Message.objects.filter(step=step, role="assistant").count() == 1
        assert Message.objects.filter(step=step, role="tool").count() == 1
    # the input, stored when the send was accepted, is linked to the first step if one committed, and outside the
    # window if none did
    early = list(Message.objects.filter(run=run, step__isnull=True))
    sent = run.input_messages[0]
    assert [(m.role, m.text) for m in early] == ([] if committed else [(sent["role"], sent["text"])])
    agent = Agent.objects.get(pk=run.agent_id)
    assert set(agent.message_ids) <= set(Message.objects.filter(agent=agent).values_list("id", flat=True))
    assert not {m.id for m in early} & set(agent.message_ids)


def _get(url: str, token: str) -> list | dict:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


@pytest.mark.parametrize(
    "kind,first_call",
    [(kind, False) for kind in KINDS] + [(kind, True) for kind in KINDS if kind != "agent_to_agent"],
)
def test_killed_mid_run_the_message_is_kept_and_the_agent_is_free_at_restart(
    kind, first_call, server, account, fake_llm
):
    agent = make_agent(account.org, name="worker-agent")
    if first_call:  # the first model call hangs until the kill: no step commits, the send was only accepted
        fake_llm.script(FakeLLM.tool("send_message", {"message": "never"}, latency=30))
        caller, watched, committed = agent, [agent], {agent.id: 0}
    elif kind == "agent_to_agent":
        caller = make_agent(account.org, name="caller", include_multi_agent_tools=True)
        # The caller waits for the other agent's reply; the other agent's model call hangs until the kill.
        fake_llm.script(
            FakeLLM.tool(WAIT, {"message": "ping", "other_agent_id": agent.id}),
            FakeLLM.tool("send_message", {"message": "never"}, latency=30),
        )
        watched, committed = [caller, agent], {caller.id: 0, agent.id: 0}
    else:
        # Step 1 commits (a search asking for another step); step 2's model call hangs until the kill.
        fake_llm.script(
            FakeLLM.tool("conversation_search", {"query": "x"}, heartbeat=True),
            FakeLLM.tool("send_message", {"message": "never"}, latency=30),
        )
        caller, watched, committed = agent, [agent], {agent.id: 1}
    server.start()
    _start(kind, server, account, caller)
    until(lambda: len(fake_llm.chat_requests) == 2 - first_call, what="the hanging model call")
    runs = {a.id: until(lambda a=a: Run.objects.filter(agent=a).first(), what="the run") for a in watched}
    assert all(r.status == "running" for r in Run.objects.filter(pk__in=[r.id for r in runs.values()]))

    server.kill()
    server.start()
    restarted_at = time.monotonic()
    fake_llm.clear()
    fake_llm.script(*[FakeLLM.tool("send_message", {"message": "back"}) for _ in watched])

    # Every agent the run held takes a message at once (its lease has long to go), and answers.
    for a in watched:
        status, raw = _post(f"{server.url}/v1/agents/{a.id}/messages/async", account.token, {"input": "still there?"})
        assert status == 200, raw
        print(
            f"{kind}{' (first call)' if first_call else ''}: agent {a.name} took a message "
            f"{time.monotonic() - restarted_at:.2f} s after the restart (RUN_LEASE_S={LEASE_S})"
        )
        again = until(
            lambda raw=raw: (r := Run.objects.get(pk=json.loads(raw)["id"])).status == "completed" and r,
            what="the new run",
        )
        replies = list(Message.objects.filter(run=again, role="assistant"))
        assert len(replies) == 1 and "back" in json.dumps(replies[0].tool_calls)

    for a in watched:
        run = Run.objects.get(pk=runs[a.id].id)
        assert run.status == "failed" and run.stop_reason == "error", (run.status, run.stop_reason)
        assert run.error == GONE and run.completed_at is not None
        _assert_whole_steps(run, committed[a.id])
        # the accepted message is in the agent's history (Letta's list), before the new send's
        listed = _get(f"{server.url}/v1/agents/{a.id}/messages?limit=50&order=asc", account.token)
        said = [m["content"] for m in listed if m["message_type"] in ("user_message", "system_message")]
        assert said[-2:] == [run.input_messages[0]["text"], "still there?"], said
        # and so is the run's end: failed, with why
        out = _get(f"{server.url}/v1/runs/{run.id}", account.token)
        assert (out["status"], out["stop_reason"]) == ("failed", "error") and "died" in json.dumps(out), out


def test_a_run_waiting_for_approval_survives_a_restart_and_is_answered_on_the_new_server(server, account, fake_llm):
    """A waiting run holds nothing in the process: killed while it waits, the server starts again and the answer
    resumes it there."""
    agent = make_agent(
        account.org,
        name="careful",
        tool_rules=[{"type": "requires_approval", "tool_name": "archival_memory_insert"}],
    )
    fake_llm.script(FakeLLM.tool("archival_memory_insert", {"content": "kept across restarts"}, heartbeat=True))
    server.start()
    base = f"{server.url}/v1/agents/{agent.id}/messages"
    status, body = _post(base, account.token, {"messages": [{"role": "user", "content": "store it"}]})
    assert status == 200, body
    paused = json.loads(body)
    assert paused["stop_reason"]["stop_reason"] == "requires_approval"
    call_id = next(m for m in paused["messages"] if m["message_type"] == "approval_request_message")["tool_call"][
        "tool_call_id"
    ]

    server.kill()
    server.start()
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Stored after the restart."}))
    answer = {
        "messages": [
            {"type": "approval", "approvals": [{"type": "approval", "tool_call_id": call_id, "approve": True}]}
        ]
    }
    status, body = _post(base, account.token, answer)
    assert status == 200, body
    out = json.loads(body)
    assert out["stop_reason"]["stop_reason"] == "end_turn"
    assert [m["content"] for m in out["messages"] if m["message_type"] == "assistant_message"] == [
        "Stored after the restart."
    ]
    from memory.models import Passage

    assert Passage.objects.filter(agent=agent, text="kept across restarts").count() == 1
    assert Run.objects.get(pk=paused["run_id"]).waiting_until is None
