"""A package runner's first start (npx -y …) may install its package: while a registration waits on it, the MCP
page's progress partial says so and shows what the installer printed, and nothing once the server answered."""

import os
import shutil
import tempfile
import threading

import pytest
from django.conf import settings
from django.db import connections
from django.test import override_settings

from tests.tools.test_mcp import DEMO
from tools import mcp_services
from tools.mcp_client import McpManager, ServerSpec, manager
from tools.models import McpServer

pytestmark = pytest.mark.django_db(transaction=True)

PRINTED = "fetching demo-server from the registry"


def write_installing_npx(directory: str) -> str:
    """Write an `npx` into `directory` that prints what an installer does, waits until the test lets it go on (the
    file whose path this returns appears; at most 60 s) and then runs the demo server."""
    go = os.path.join(directory, "go")
    script = os.path.join(directory, "npx")
    with open(script, "w") as f:
        f.write(
            f"#!/bin/sh\necho '{PRINTED}' >&2\n"
            f"i=0; while [ ! -e {go} ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\n"
            f"exec {settings.MCP_DEMO_PYTHON} {DEMO} stdio\n"
        )
    os.chmod(script, 0o755)
    os.chmod(directory, 0o777)  # the server's throwaway uid reads the script; the test writes `go`
    return go


@pytest.fixture
def installing_npx():
    """A directory (approved for MCP servers by the tests that use it) holding `write_installing_npx`'s npx."""
    directory = tempfile.mkdtemp(prefix="agents-ide-test-npx-")
    yield directory, write_installing_npx(directory)
    shutil.rmtree(directory, ignore_errors=True)


def _until(condition, what: str, tries: int = 600):
    """Poll `condition()` (every 0.1 s, at most `tries` times) until it returns something true; that value."""
    for _ in range(tries):
        value = condition()
        if value:
            return value
        threading.Event().wait(0.1)
    raise AssertionError(f"never saw {what}")


def test_the_manager_reports_a_first_start_installing_and_what_it_printed(installing_npx):
    directory, go = installing_npx
    mcp = McpManager(connect_timeout_s=2.0, install_timeout_s=120.0)
    spec = ServerSpec(
        key="npx-demo",
        server_type="stdio",
        command=os.path.join(directory, "npx"),
        args=("-y", "demo-server"),
        paths=(directory, *settings.MCP_STDIO_PATHS),
    )
    listed = []
    worker = threading.Thread(target=lambda: listed.extend(mcp.list_tools(spec, timeout_s=30)))
    worker.start()
    try:
        (seen,) = _until(lambda: [s for s in mcp.starting({"npx-demo"}) if PRINTED in s["output"]], "the output")
        assert seen["key"] == "npx-demo" and seen["installing"] is True and seen["seconds"] >= 0
        assert mcp.starting({"another"}) == []  # only the keys asked about
        open(go, "w").close()
        worker.join(60)
        assert "add" in {t.name for t in listed}
        assert mcp.starting({"npx-demo"}) == []  # started: nothing under way any more
    finally:
        open(go, "w").close()
        worker.join(60)
        mcp.close_all()


def test_the_mcp_page_shows_a_registration_installing_its_package(web, account, installing_npx):
    directory, go = installing_npx
    config = {"mcp_server_type": "stdio", "command": os.path.join(directory, "npx"), "args": ["-y", "demo-server"]}
    page = web.get("/mcp-servers/").content.decode()
    assert 'id="mcp-starting"' in page and "/static/ide/mcp.js" in page
    assert web.get("/mcp-servers/starting/").content.decode().strip() == ""
    errors = []

    def register():
        try:
            mcp_services.mcp_server_create(owner=account.org, server_name="slow-npx", config=config)
        except Exception as exc:  # noqa: BLE001 - shown by the assertion below
            errors.append(exc)
        finally:
            connections.close_all()  # this thread's connection (PostgreSQL: given back to the pool, not kept)

    with override_settings(MCP_STDIO_PATHS=[directory, *settings.MCP_STDIO_PATHS]):
        worker = threading.Thread(target=register)
        worker.start()
        try:
            shown = _until(
                lambda: (html := web.get("/mcp-servers/starting/").content.decode()) and PRINTED in html and html,
                "the installer's output on the page",
            )
            assert "<strong>slow-npx</strong>" in shown and "installing its package on its first start" in shown
            assert f"at most {int(settings.MCP_INSTALL_TIMEOUT_S)} s" in shown
        finally:
            open(go, "w").close()
            worker.join(60)
    assert not errors, errors
    server = McpServer.objects.get(owner=account.org, server_name="slow-npx")
    assert "add" in set(server.tools.values_list("name", flat=True)), server.last_error
    assert web.get("/mcp-servers/starting/").content.decode().strip() == ""
    manager().close_all()
