"""A daphne process serving the project (behind the request log) against the test run's database, for clients
that run in their own processes and so need a real server and port."""

from dataclasses import dataclass
from pathlib import Path

from tests.clients.request_log import describe, failures, read_log
from tests.helpers import Daphne, daphne_start


@dataclass
class LiveServer:
    """A server as one test sees it: its request log from the test's start (`since`: the entries before it)."""

    url: str
    request_log: Path
    server_log: Path
    since: int = 0

    def requests(self) -> list[dict]:
        """The exchanges answered since the test began, without the start-up probes."""
        return [e for e in read_log(self.request_log)[self.since :] if e["path"] != "/healthz"]

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


def start_server(directory: Path) -> Daphne:
    """Start daphne on a free port, its logs in `directory` (daphne.log, requests.jsonl); wait for /healthz. The
    caller stops it. Provider settings (the fake LLM's OPENAI_BASE_URL) come from this process's environment."""
    return daphne_start(
        "tests.clients.asgi:application",
        env={"AIDE_REQUEST_LOG": str(directory / "requests.jsonl")},
        log=directory / "daphne.log",
    )


def view_from_now(server: Daphne) -> LiveServer:
    """The server as a test that begins now sees it."""
    request_log = server.log.parent / "requests.jsonl"
    return LiveServer(url=server.url, request_log=request_log, server_log=server.log, since=len(read_log(request_log)))
