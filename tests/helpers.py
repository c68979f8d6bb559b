"""Small helpers shared by tests that start servers or wait for background work."""

import asyncio
import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Redis databases by use; each test worker (pytest-xdist) gets its own four of Redis's sixteen, so a flush in one
# worker never empties another's.
REDIS_SLOTS = ("e2e", "layer", "layer_shard", "multiprocess")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def database_url() -> str:
    """DATABASE_URL for a process that must open the test database this process uses."""
    from django.db import connection

    d = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{d['NAME']}"
    auth = d["USER"] + (f":{d['PASSWORD']}" if d.get("PASSWORD") else "")
    return f"postgres://{auth}@{d.get('HOST') or '127.0.0.1'}:{d.get('PORT') or 5432}/{d['NAME']}"


@dataclass
class Daphne:
    """A daphne process serving an ASGI app of this project on 127.0.0.1, started by `daphne_start`."""

    proc: subprocess.Popen
    url: str
    port: int
    log: Path | None

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text()[-chars:] if self.log and self.log.exists() else "(no log kept)"

    def stop(self, timeout: float = 10) -> int:
        """Terminate the process (SIGKILL after `timeout` seconds) and return its exit code."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait()


# What the test process sets for itself and a server must not inherit: pytest's current test changes from test to test,
# and Playwright's sync API makes this process allow sync database calls beside its event loop.
_NOT_FOR_SERVERS = ("PYTEST_CURRENT_TEST", "DJANGO_ALLOW_ASYNC_UNSAFE")


def server_environ() -> dict[str, str]:
    """This process's environment as a server it starts gets it."""
    return {k: v for k, v in os.environ.items() if k not in _NOT_FOR_SERVERS}


def daphne_start(
    app: str = "agents_ide.asgi:application",
    *,
    env: dict[str, str],
    log: Path | None = None,
    port: int | None = None,
    timeout: float = 60,
) -> Daphne:
    """Start daphne serving `app` against this test run's database (`env` adds to or overrides the server's
    environment) and wait until /healthz answers. Raises with the server's log when it exits or does not start in
    time; the caller stops it."""
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    full_env = {
        **server_environ(),
        "DATABASE_URL": database_url(),
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "CSRF_TRUSTED_ORIGINS": url,
        "REDIS_URL": "",
        "RUNS_IN_WORKER": "",
        "PYTHONUNBUFFERED": "1",
        # as scripts/serve does: the server derives the tools' callback address (PUBLIC_BASE_URL) from these
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "PUBLIC_BASE_URL": "",
        **env,
    }
    out = open(log, "w") if log else subprocess.DEVNULL
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agents_ide.serve", "-b", "127.0.0.1", "-p", str(port), app],
            cwd=ROOT,
            env=full_env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    finally:
        if log:
            out.close()
    server = Daphne(proc=proc, url=url, port=port, log=log)

    def up() -> bool:
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=1) as r:
                return r.status == 200
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(f"the daphne test server exited at start:\n{server.log_tail()}") from None
            return False

    try:
        until(up, timeout=timeout, interval=0.1, what="the daphne test server to start")
    except AssertionError as exc:  # still not answering
        server.stop()
        raise RuntimeError(f"{exc}:\n{server.log_tail()}") from None
    return server


def serve_in_thread(server, name: str = "test-server"):
    """Serve a socketserver (an http.server) on a daemon thread and return the thread. Its loop checks for shutdown()
    every 20 ms: shutdown() waits until the loop sees it, which at the default half-second poll cost a quarter of a
    second on average at the end of every test that started a server."""
    import threading

    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, name=name, daemon=True)
    thread.start()
    return thread


def in_thread(fn, *args, timeout: float = 60, **kwargs):
    """fn(*args, **kwargs) on a plain thread, its result or exception returned or raised here: the code under test
    sends events synchronously, which it may not do on a thread with a running event loop (Playwright's sync API
    keeps one on the browser tests' own). The thread's database connection is closed when it ends."""
    import threading

    from django.db import connection

    out: dict = {}

    def target():
        try:
            out["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - raised again on the caller's thread
            out["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=target, name="in-thread", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise AssertionError(f"{getattr(fn, '__name__', fn)} did not end within {timeout:g} s")
    if "error" in out:
        raise out["error"]
    return out.get("value")


def worker_index() -> int:
    """This test process's pytest-xdist worker number (0 without xdist)."""
    return int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)


def redis_test_url(slot: str) -> str:
    """The Redis database this worker's tests use for `slot` (one of REDIS_SLOTS)."""
    index = worker_index()
    if index >= 16 // len(REDIS_SLOTS):
        raise RuntimeError(f"at most {16 // len(REDIS_SLOTS)} test workers share Redis's 16 databases")
    return f"redis://127.0.0.1:6379/{index * len(REDIS_SLOTS) + REDIS_SLOTS.index(slot)}"


def until(predicate, timeout: float = 90.0, interval: float = 0.05, what: str = "condition"):
    """Poll until `predicate()` returns something truthy and return it; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


async def until_async(predicate, timeout: float = 90.0, interval: float = 0.02, what: str = "condition"):
    """`until` for async tests: poll without blocking the event loop."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def require_redis(url: str) -> None:
    """Skip the test when Redis does not answer at `url`; in CI, fail it (Redis is part of the CI machine)."""
    import pytest
    import redis

    from tests.conftest import IN_CI

    try:
        redis.Redis.from_url(url, socket_timeout=2).ping()
    except redis.RedisError:
        if IN_CI:
            pytest.fail(f"Redis is not reachable at {url}")
        pytest.skip(f"missing service: Redis is not reachable at {url}")  # named in the summary (tests/system_needs.py)


async def agent_socket(user, agent_id):
    """A connected test client of an agent's websocket (agents_ide.routing), signed in as `user`."""
    from channels.routing import URLRouter
    from channels.testing import WebsocketCommunicator

    from agents_ide.routing import websocket_urlpatterns

    comm = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/agents/{agent_id}/")
    comm.scope["user"] = user
    connected, _ = await comm.connect()
    assert connected, "the agent's websocket refused the connection"
    return comm


async def events_until(comm, message_type: str, timeout: float = 20, **match) -> list[dict]:
    """The socket's events up to the first of this type whose fields equal `match` (a run_status: one that ended)."""
    seen = []
    while True:
        event = await comm.receive_json_from(timeout=timeout)
        seen.append(event)
        if event.get("message_type") != message_type or any(event.get(k) != v for k, v in match.items()):
            continue
        if message_type != "run_status" or event["status"] not in ("running", "created"):
            return seen
