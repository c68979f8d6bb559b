"""A daphne process serving the project (behind the request log) against the test run's database, for clients
that run in their own processes and so need a real server and port."""

import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.clients.request_log import describe, failures, read_log
from tests.helpers import database_url, free_port

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class LiveServer:
    url: str
    request_log: Path
    server_log: Path

    def requests(self) -> list[dict]:
        """The exchanges answered so far, without the start-up probes."""
        return [e for e in read_log(self.request_log) if e["path"] != "/healthz"]

    def failed(self) -> list[dict]:
        return failures(self.requests())

    def report(self) -> str:
        """Every exchange so far, then the failed ones again, for a failing test's message."""
        entries = self.requests()
        bad = failures(entries)
        text = f"requests the server answered ({len(entries)}):\n{describe(entries)}"
        if bad:
            text += f"\n\nanswered 4xx/5xx ({len(bad)}):\n{describe(bad, bodies=600)}"
        return text


def start_server(directory: Path, *, timeout: float = 60) -> tuple[subprocess.Popen, LiveServer]:
    """Start daphne on a free port, its logs in `directory`; wait for /healthz. The caller stops the process.
    Provider settings (the fake LLM's OPENAI_BASE_URL) come from this process's environment."""
    port = free_port()
    server = LiveServer(
        url=f"http://127.0.0.1:{port}",
        request_log=directory / "requests.jsonl",
        server_log=directory / "daphne.log",
    )
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "AIDE_REQUEST_LOG": str(server.request_log),
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "CSRF_TRUSTED_ORIGINS": server.url,
        "REDIS_URL": "",
        "RUNS_IN_WORKER": "",
        "PYTHONUNBUFFERED": "1",
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "PUBLIC_BASE_URL": "",
    }
    with open(server.server_log, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "tests.clients.asgi:application"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(server.url + "/healthz", timeout=1) as r:
                if r.status == 200:
                    return proc, server
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_server(proc)
            raise RuntimeError(f"the daphne test server did not start:\n{server.server_log.read_text()[-3000:]}")
        time.sleep(0.2)


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
