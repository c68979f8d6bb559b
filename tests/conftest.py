"""Shared test fixtures. Real provider calls are impossible here: provider keys are removed from the
environment and sockets may only connect to this machine (the fake LLM, PostgreSQL, Redis, our servers)."""

import ipaddress
import os
import socket

import pytest

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["LITELLM_TELEMETRY"] = "False"
# The servers the tests start (a hundred a pass) skip the warm-up (agents_ide/asgi.py): it imports litellm, about 3 s
# of CPU a server, which only calls to providers our own client does not serve need, and they import it when first used.
os.environ.setdefault("AIDE_WARM_UP", "0")
for _var in (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_API_BASE",
    "ANTHROPIC_API_KEY",
    "DEEPSEEK_API_KEY",
    "OLLAMA_API_BASE",
    "GEMINI_API_KEY",
    "GROQ_API_KEY",
    "E2B_API_KEY",
    "EMBEDDING_MODEL",
):
    os.environ.pop(_var, None)

_real_connect = socket.socket.connect


def _loopback_only_connect(self, address):
    """Refuse any connection that would leave this machine."""
    if self.family in (socket.AF_INET, socket.AF_INET6):
        host = address[0]
        try:
            ok = ipaddress.ip_address(host).is_loopback
        except ValueError:
            ok = host in ("localhost",)
        if not ok:
            raise ConnectionRefusedError(f"tests may not reach the network ({host}); use the fake LLM")
    return _real_connect(self, address)


socket.socket.connect = _loopback_only_connect

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

# Files of one long test go first: pytest-xdist gives a worker a file at a time in this order (scripts/test), and one
# scheduled last would keep its worker going for a minute after the others ran out of files.
LONG_FILES = ("tests/web/test_api_schema.py",)


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: not item.nodeid.startswith(LONG_FILES))  # stable: the rest keep their order


def pytest_configure(config):
    config.addinivalue_line("markers", "needs(part): the test needs a system part (agents_ide/system_parts.py)")


def pytest_sessionstart(session):
    """An xdist controller collects nothing: it provides what its run may need before its workers start."""
    from tests import system_needs

    config = session.config
    if not hasattr(config, "workerinput") and config.pluginmanager.hasplugin("dsession"):
        system_needs.provided_or_exit(system_needs.needs_of_args(list(config.invocation_params.args)), config)


def pytest_collection_finish(session):
    """A run in one process provides what the tests it chose need (after -k and -m chose), or stops naming it."""
    from tests import system_needs

    config = session.config
    if hasattr(config, "workerinput") or config.pluginmanager.hasplugin("dsession"):
        return  # a worker: its controller provided them
    needs = set()
    for item in session.items:
        needs |= system_needs.needs_of(item.nodeid, item.iter_markers("needs"))
    if needs:
        system_needs.provided_or_exit(needs, config)


def pytest_terminal_summary(terminalreporter):
    from tests import system_needs

    for line in system_needs.skipped_for_missing_service(terminalreporter):
        terminalreporter.write_line(line, yellow=True)


@pytest.fixture(autouse=True)
def _run_pool_stopped_after():
    """Runs execute on the run pool's threads: stop it after each test that started it, waiting for its runs,
    so no run outlives its test's data."""
    yield
    import sys

    queue = sys.modules.get("core.runs.queue")
    if queue is not None and (queue._pool is not None or queue._lease_thread is not None):
        queue.shutdown()
    _pooled_connections_returned()


def pool_in_use(pool) -> int:
    """Connections of PostgreSQL's pool that some thread has borrowed and not given back."""
    stats = pool.get_stats()
    return stats["pool_size"] - stats["pool_available"]


POOL_IN_USE_AFTER_A_TEST = 4  # the test's own connection, pytest-django's, and slack for a thread still ending


def _pooled_connections_returned() -> None:
    """On PostgreSQL, a thread that kept its pooled connection would take it for good: after DB_POOL_MAX such
    threads every query waits 30 s and fails, and the rest of the run fails with it. Fail the test that left
    connections taken, then start a fresh pool so the tests after it are not failed too."""
    import sys

    if "django.db" not in sys.modules:
        return
    from django.db import connections

    from tests.helpers import until

    pool = getattr(connections["default"], "pool", None)
    if pool is None:
        return
    try:
        until(lambda: pool_in_use(pool) <= POOL_IN_USE_AFTER_A_TEST, timeout=5, what="pooled connections given back")
    except AssertionError:
        taken = pool_in_use(pool)
        connections["default"].close_pool()
        pytest.fail(f"{taken} pooled database connections were still taken after this test: a thread kept one")


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, request):
    """pytest-django's test databases; before it drops them, close PostgreSQL's connection pool (it keeps idle
    connections open, and a database with open sessions cannot be dropped) and end any session still open."""
    yield
    from django.db import connections

    for alias in connections:
        if getattr(connections[alias], "pool", None) is not None:
            connections[alias].close_pool()
        if connections[alias].vendor == "postgresql":
            connections[alias].close()
            _other_sessions_ended(connections[alias], request.config)


def _other_sessions_ended(conn, config) -> None:
    """A session still open on the test database (a thread that kept its connection, a server subprocess still
    exiting) would stop pytest-django from dropping it. Say which ones were left, with this process's live threads,
    and end them: every test has finished."""
    import threading

    import psycopg

    name = conn.settings_dict["NAME"]
    with psycopg.connect(**{**conn.get_connection_params(), "dbname": "postgres"}, autocommit=True) as admin:
        left = admin.execute(
            "SELECT pid, state, backend_start, left(query, 120) FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid()",
            [name],
        ).fetchall()
        if not left:
            return
        threads = sorted(t.name for t in threading.enumerate())
        with config.pluginmanager.get_plugin("capturemanager").global_and_fixture_disabled():
            reporter = config.pluginmanager.get_plugin("terminalreporter")
            reporter.write_line("")  # off the progress dots
            reporter.write_line(f"{len(left)} session(s) left open on {name}, ended: {left}; threads alive: {threads}")
        admin.execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", [[row[0] for row in left]])


@pytest.fixture
def fake_llm(monkeypatch):
    """A running fake OpenAI-compatible server, configured as the `openai` provider for this test."""
    from tests.fake_llm import FakeLLM

    llm = FakeLLM()
    llm.start()
    monkeypatch.setenv("OPENAI_API_KEY", "fake-key")
    monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
    try:
        yield llm
    finally:
        llm.stop()


@pytest.fixture
def account(db):
    """A user with their organization and a raw API token."""
    from tests.factories import make_account

    return make_account("alice")


@pytest.fixture
def web(account):
    """A Django test client signed in as the test account (the IDE's pages and views)."""
    from django.test import Client

    client = Client()
    client.force_login(account.user)
    return client


@pytest.fixture
def other_account(db):
    from tests.factories import make_account

    return make_account("mallory")


@pytest.fixture
def api(account):
    """A Django test client authenticated with the account's bearer token."""
    from tests.factories import ApiClient

    return ApiClient(account.token)


def postgres_required() -> None:
    """Skip outside PostgreSQL runs; CI runs the suite on both databases, so this is exercised there."""
    from django.conf import settings

    if not settings.IS_POSTGRES:
        pytest.skip("needs PostgreSQL (this pass runs on SQLite; the CI PostgreSQL pass runs it)")


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Each test starts with an empty cache (login throttling counts failures there)."""
    from django.core.cache import cache

    cache.clear()
