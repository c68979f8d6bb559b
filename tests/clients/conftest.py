"""Fixtures for Letta's own clients (Letta Code, the TypeScript SDK) driven against a live server: the pinned
Node packages, a daphne server with a request log, and a clean environment for each client process."""

import os

import pytest

from tests.clients import node_deps
from tests.clients.server import start_server, view_from_now
from tests.shared_servers import fake_llm, module_fake_llm, module_servers  # noqa: F401 - fixtures


@pytest.fixture(scope="session")
def node_clients():
    """The locked Node packages in tests/clients/node_modules (`npm ci` once per session, only if needed; the session
    installed them before any test ran, tests/system_needs.py). A missing Node fails, never skips."""
    try:
        node_deps.ensure_installed()
    except node_deps.NodeDepsError as exc:
        pytest.fail(f"Node clients could not be installed: {exc}", pytrace=False)
    return node_deps.NODE_MODULES


@pytest.fixture
def daphne_server(node_clients, transactional_db, fake_llm, module_servers, tmp_path_factory):  # noqa: F811
    """A daphne process serving the project against the test database, the fake LLM as its `openai` provider,
    every request it answers written to its request log; shared by a module's tests (tests/shared_servers.py), each
    test seeing the requests made since it began."""
    server = module_servers.get({}, lambda: start_server(tmp_path_factory.mktemp("server")))
    yield view_from_now(server)
    module_servers.release({}, fake_llm)


@pytest.fixture
def client_env(daphne_server, account, tmp_path):
    """The environment a client process gets: our server's URL and the account's key, a throwaway HOME (Letta
    Code keeps settings and agent pins there), Letta Code's calls home turned off, and of this machine's only PATH."""
    home = tmp_path / "home"
    home.mkdir()
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "LETTA_BASE_URL": daphne_server.url,
        "LETTA_API_KEY": account.token,
        # Letta Code otherwise runs `npm install -g @letta-ai/letta-code@latest` when the registry has a newer one,
        # and sends usage events with this API key to api.letta.com; neither touches our server
        "DISABLE_AUTOUPDATER": "1",
        "LETTA_CODE_TELEM": "0",
        "NO_COLOR": "1",
    }


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A failing test with a live server gets the server's request log as a section of its report."""
    report = yield
    server = getattr(item, "funcargs", {}).get("daphne_server")
    if server is not None and report.when == "call" and report.failed:
        report.sections.append(("requests the server answered", server.report()))
    return report
