"""Scale-out: two daphne processes and a run worker on PostgreSQL + Redis, against the fake LLM.

Shows that the web tier holds no state: a tab on server 1 sees a run started through server 2 and executed
by the worker; concurrent sends to one agent through both servers are serialized (one run, the other 409);
a worker killed mid-run leaves the run failed after another worker's reaper finds its lapsed lease, with only
whole steps written. Needs PostgreSQL and Redis (the SQLite pass skips; CI=true never skips)."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import IN_CI, postgres_required
from tests.fake_llm import FakeLLM
from tests.helpers import daphne_start, database_url, free_port, redis_test_url, until

ROOT = Path(__file__).resolve().parents[2]
LEASE_S = 3


def _redis_url() -> str:
    return redis_test_url("multiprocess")


def _require_redis() -> None:
    try:
        import redis

        redis.Redis.from_url(_redis_url(), socket_connect_timeout=2).flushdb()
    except Exception as exc:  # noqa: BLE001
        if IN_CI:
            pytest.fail(f"Redis is needed at {_redis_url()}: {exc}")
        pytest.skip(f"missing service: Redis is not reachable at {_redis_url()}")


class Cluster:
    """The processes of one test: servers by port, workers by handle."""

    def __init__(self):
        self.env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "REDIS_URL": _redis_url(),
            "RUNS_IN_WORKER": "true",
            "RUN_LEASE_S": str(LEASE_S),
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "PYTHONUNBUFFERED": "1",
            "RUN_POLL_S": "0.1",
            "LOG_LEVEL": "INFO",
        }
        self.procs: list[subprocess.Popen] = []
        self.logs = ROOT / "test-artifacts"

    def _spawn(self, args: list[str], name: str) -> subprocess.Popen:
        out = open(self.logs / f"scale-{name}.log", "w") if self.logs.exists() else subprocess.DEVNULL
        proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT)
        self.procs.append(proc)
        return proc

    def server(self) -> str:
        port = free_port()
        overrides = {k: self.env[k] for k in ("REDIS_URL", "RUNS_IN_WORKER", "RUN_LEASE_S", "RUN_POLL_S", "LOG_LEVEL")}
        log = self.logs / f"scale-web-{port}.log" if self.logs.exists() else None
        server = daphne_start(env=overrides, port=port, log=log)
        self.procs.append(server.proc)
        return server.url

    def worker(self, name: str) -> subprocess.Popen:
        """A worker process, returned once it listens for runs: a send made before that waits for its start-up,
        which on a loaded machine outlasts the client's timeout."""
        before = _listeners()
        proc = self._spawn(["manage.py", "run_worker", "--threads", "4"], f"worker-{name}")
        until(lambda: _listeners() > before or proc.poll() is not None, timeout=120, what=f"worker {name} to listen")
        assert proc.poll() is None, f"worker {name} exited with {proc.returncode}"
        return proc

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _listeners() -> int:
    """Worker processes listening for runs (each holds one LISTEN session on PostgreSQL)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE query = 'LISTEN agents_ide_runs'")
        return cursor.fetchone()[0]


def _post(url: str, token: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def _run_row(run_id: str):
    from core.models import Run

    return Run.objects.get(pk=run_id)


@pytest.fixture
def cluster(transactional_db, fake_llm):
    postgres_required()
    _require_redis()
    c = Cluster()
    try:
        yield c
    finally:
        c.stop()


def _session_cookie(user) -> str:
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"


async def _collect(ws_url: str, cookie: str, origin: str, started: threading.Event, stop_on_run: list) -> list[dict]:
    import aiohttp

    events = []
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(ws_url, headers={"Cookie": cookie, "Origin": origin}) as ws:
            started.set()
            while True:
                msg = await asyncio.wait_for(ws.receive(), timeout=120)
                if msg.type != aiohttp.WSMsgType.TEXT:
                    return events + [{"message_type": "socket_closed", "data": msg.data}]
                event = json.loads(msg.data)
                events.append(event)
                if (
                    event.get("message_type") == "run_status"
                    and event.get("run_id") in stop_on_run
                    and event.get("status") not in ("created", "running")
                ):
                    return events


def test_two_servers_one_worker(cluster, account, fake_llm):
    from core.models import Message, QueuedTask, Run, Step
    from tests.factories import make_agent

    agent = make_agent(account.org, name="shared")
    one, two = cluster.server(), cluster.server()
    worker = cluster.worker("a")

    # 1. A tab on server 1 receives the streamed events of a run started through server 2, run by the worker.
    fake_llm.script(FakeLLM.tool("send_message", {"message": "across processes"}, thinking="hm", latency=0.3))
    started, run_ids, box = threading.Event(), [], {}
    ws_url = one.replace("http", "ws") + f"/ws/agents/{agent.id}/"
    t = threading.Thread(
        target=lambda: box.update(
            events=asyncio.run(_collect(ws_url, _session_cookie(account.user), one, started, run_ids))
        )
    )
    t.start()
    assert started.wait(30)
    status, run = _post(f"{two}/v1/agents/{agent.id}/messages/async", account.token, {"input": "hello"})
    assert status == 200 and run["status"] == "created"
    run_ids.append(run["id"])
    t.join(120)
    events = box["events"]
    types = [e["message_type"] for e in events]
    assert "assistant_message" in types and "stop_reason" in types
    assert [e["content"] for e in events if e["message_type"] == "assistant_message" and not e.get("delta")] == [
        "across processes"
    ]
    assert events[-1]["status"] == "completed"
    assert _run_row(run["id"]).worker.endswith(f":{worker.pid}")

    # 2. Concurrent sends to one agent through both servers: exactly one run, the other gets 409.
    fake_llm.script(FakeLLM.tool("send_message", {"message": "only one"}, latency=1.0))
    results = {}
    barrier = threading.Barrier(2)

    def send(name, base):
        barrier.wait()
        results[name] = _post(f"{base}/v1/agents/{agent.id}/messages/async", account.token, {"input": name})

    threads = [threading.Thread(target=send, args=(n, b)) for n, b in (("via-one", one), ("via-two", two))]
    [x.start() for x in threads]
    [x.join(30) for x in threads]
    codes = sorted(code for code, _ in results.values())
    assert codes == [200, 409], results
    [winner] = [body for code, body in results.values() if code == 200]
    until(lambda: _run_row(winner["id"]).status == "completed", what="the winning run")
    seqs = list(Message.objects.filter(agent=agent).order_by("seq").values_list("seq", "run_id"))
    assert [s for s, _ in seqs] == list(range(len(seqs)))
    winner_seqs = [s for s, r in seqs if r == winner["id"]]
    assert winner_seqs == list(range(winner_seqs[0], winner_seqs[0] + len(winner_seqs)))

    # 3. A worker killed mid-run: the run ends failed (lease lapsed), with only whole steps written.
    fake_llm.script(
        *[FakeLLM.tool("conversation_search", {"query": "x"}, heartbeat=True, latency=1.0) for _ in range(8)]
    )
    status, doomed = _post(f"{one}/v1/agents/{agent.id}/messages/async", account.token, {"input": "long job"})
    assert status == 200
    until(lambda: Step.objects.filter(run_id=doomed["id"]).exists(), what="a committed step")
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()
    assert _run_row(doomed["id"]).status == "running"
    cluster.worker("b")
    final = until(lambda: (r := _run_row(doomed["id"])).status == "failed" and r, timeout=60, what="the reaper")
    assert "worker lost" in final.error
    steps = Step.objects.filter(run_id=doomed["id"]).count()
    assert steps >= 1
    assert Message.objects.filter(run_id=doomed["id"], role="assistant").count() == steps
    assert Message.objects.filter(run_id=doomed["id"], role="tool").count() == steps
    agent.refresh_from_db()
    assert set(agent.message_ids) <= set(Message.objects.filter(agent=agent).values_list("id", flat=True))

    def task_status():
        return list(QueuedTask.objects.filter(kwargs__run_id=doomed["id"]).values_list("status", flat=True))

    until(lambda: task_status() == ["FAILED"], timeout=20, what="the task row to be failed")

    # The agent is free again and the surviving worker runs its next message.
    fake_llm.clear()
    status, again = _post(f"{two}/v1/agents/{agent.id}/messages/async", account.token, {"input": "still there?"})
    assert status == 200
    until(lambda: _run_row(again["id"]).status == "completed", what="a run on the new worker")
    assert Run.objects.filter(agent=agent, status="running").count() == 0


def test_web_tier_runs_nothing_and_a_killed_worker_heals_without_another(cluster, account, fake_llm):
    """RUNS_IN_WORKER: synchronous and SSE sends through a web process execute on the worker; SIGKILL of the
    only worker mid-run ends the waiting synchronous call with the run failed (the web process's own reaper
    finds the lapsed lease), and a new worker takes the agent's next message."""
    from core.models import Message, Step
    from tests.factories import make_agent

    agent = make_agent(account.org, name="solo")
    web = cluster.server()
    worker = cluster.worker("only")
    fake_llm.script(FakeLLM.tool("send_message", {"message": "sync via worker"}))
    status, body = _post(f"{web}/v1/agents/{agent.id}/messages", account.token, {"input": "hi"})
    assert status == 200 and body["stop_reason"]["stop_reason"] == "end_turn", body
    assert [m["content"] for m in body["messages"] if m["message_type"] == "assistant_message"] == ["sync via worker"]
    assert _run_row(body["run_id"]).worker.endswith(f":{worker.pid}")

    fake_llm.script(FakeLLM.tool("send_message", {"message": "streamed via worker"}))
    req = urllib.request.Request(
        f"{web}/v1/agents/{agent.id}/messages/stream",
        data=json.dumps({"input": "s"}).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {account.token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        frames = [
            json.loads(line[6:])
            for line in r.read().decode().splitlines()
            if line.startswith("data: ") and line != "data: [DONE]"
        ]
    [reply] = [f for f in frames if f["message_type"] == "assistant_message"]
    assert reply["content"] == "streamed via worker" and frames[-1]["message_type"] == "usage_statistics"
    assert _run_row(reply["run_id"]).worker.endswith(f":{worker.pid}")

    fake_llm.script(
        FakeLLM.tool("conversation_search", {"query": "x"}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "never"}, latency=30),
    )
    box = {}
    waiting = threading.Thread(
        target=lambda: box.update(r=_post(f"{web}/v1/agents/{agent.id}/messages", account.token, {"input": "long job"}))
    )
    waiting.start()
    until(lambda: len(fake_llm.chat_requests) == 4, what="the hanging model call")
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()
    waiting.join(LEASE_S * 10 + 30)
    assert not waiting.is_alive(), "the synchronous caller still waits for a run whose worker died"
    status, body = box["r"]
    assert status == 200 and body["stop_reason"]["stop_reason"] == "error" and "worker lost" in body["error"]
    doomed = _run_row(body["run_id"])
    assert doomed.status == "failed" and Step.objects.filter(run=doomed).count() == 1
    assert Message.objects.filter(run=doomed, role="tool").count() == 1

    cluster.worker("replacement")
    fake_llm.clear()
    fake_llm.script(FakeLLM.tool("send_message", {"message": "back"}))
    status, body = _post(f"{web}/v1/agents/{agent.id}/messages", account.token, {"input": "still there?"})
    assert status == 200 and body["stop_reason"]["stop_reason"] == "end_turn", body


def test_a_worker_takes_the_servers_runs_when_notified_not_polled(cluster, account, fake_llm):
    """On PostgreSQL a web process NOTIFYs the workers when it commits a task: a worker that would poll only once an
    hour takes every run sent through the server at once (the sync call would otherwise time out)."""

    from tests.factories import make_agent

    agent = make_agent(account.org, name="notified")
    cluster.env["RUN_POLL_S"] = "3600"
    web = cluster.server()
    worker = cluster.worker("listening")

    assert _listeners() == 1
    for text in ("one", "two"):
        fake_llm.script(FakeLLM.tool("send_message", {"message": f"reply {text}"}))
        status, body = _post(f"{web}/v1/agents/{agent.id}/messages", account.token, {"input": text})
        assert status == 200 and body["stop_reason"]["stop_reason"] == "end_turn", body
        said = [m["content"] for m in body["messages"] if m["message_type"] == "assistant_message"]
        assert said == [f"reply {text}"]
        assert _run_row(body["run_id"]).worker.endswith(f":{worker.pid}")
