"""What the tests of one module share when they drive a real server in its own process (the browser tests, Letta's
Node clients): one fake LLM, reset for each test, and daphne servers, each kept from test to test while nothing a
test began is still going in it. A server costs over a second of CPU to start; the database is emptied after every
test all the same. Conftests that want this import the fixtures below."""

from collections.abc import Callable

import pytest

from tests.fake_llm import FakeLLM
from tests.helpers import Daphne, server_environ


@pytest.fixture(scope="module")
def module_fake_llm():
    """One fake LLM for a module's tests: the servers they share are started with its address."""
    llm = FakeLLM().start()
    try:
        yield llm
    finally:
        llm.stop()


@pytest.fixture
def fake_llm(module_fake_llm, monkeypatch):
    """The module's fake LLM, reset (no script, no requests, default settings), as the `openai` provider."""
    monkeypatch.setenv("OPENAI_API_KEY", "fake-key")
    monkeypatch.setenv("OPENAI_BASE_URL", module_fake_llm.base_url)
    return module_fake_llm.reset()


class ServerPool:
    """A module's servers, by the environment a test would start them with."""

    def __init__(self):
        self._servers: dict[tuple, Daphne] = {}

    @staticmethod
    def key(env: dict[str, str]) -> tuple:
        return tuple(sorted({**server_environ(), **env}.items()))

    def get(self, env: dict[str, str], start: Callable[[], Daphne]) -> Daphne:
        """The running server for this environment, or a new one from `start()`."""
        key = self.key(env)
        server = self._servers.get(key)
        if server is None or server.proc.poll() is not None:
            server = self._servers[key] = start()
        return server

    def release(self, env: dict[str, str], fake: FakeLLM) -> None:
        """After a test: a server it left busy is stopped, so nothing of one test reaches the next."""
        if not quiet(fake) and (server := self._servers.pop(self.key(env), None)) is not None:
            server.stop()

    def close(self) -> None:
        for server in self._servers.values():
            server.stop()
        self._servers.clear()


@pytest.fixture(scope="module")
def module_servers(django_db_setup):
    pool = ServerPool()
    try:
        yield pool
    finally:
        pool.close()


def quiet(fake: FakeLLM) -> bool:
    """Nothing a test began is still going: no run, experiment (a test run is one) or file ingest unfinished, no
    model call being answered."""
    from core.models import RUN_ACTIVE, Experiment, Run
    from memory.models import FILE_TERMINAL, FolderFile

    return not (
        fake.in_flight
        or Run.objects.filter(status__in=RUN_ACTIVE).exists()
        or Experiment.objects.filter(status__in=("queued", "running")).exists()
        or FolderFile.objects.exclude(status__in=FILE_TERMINAL).exists()
    )
