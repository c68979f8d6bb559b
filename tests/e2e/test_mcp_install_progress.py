"""In Chromium: adding a stdio server whose package runner installs first shows, while the form waits, that it is
installing and what the installer printed; once it answered the progress is gone and the server is listed."""

import os
import shutil
import tempfile

import pytest
from django.conf import settings
from playwright.sync_api import expect

from tests.tools.test_mcp_install_progress import PRINTED, write_installing_npx


@pytest.fixture
def approved_npx():
    """The installing npx in a directory inside the one the test settings approve for MCP servers (the live
    server is its own process, with those settings)."""
    directory = tempfile.mkdtemp(prefix="npx-", dir=settings.MCP_STDIO_PATHS[0])
    yield directory, write_installing_npx(directory)
    shutil.rmtree(directory, ignore_errors=True)


def test_adding_a_package_runner_server_shows_its_install_while_it_waits(signed_in, account, approved_npx):
    directory, go = approved_npx
    page = signed_in.new_page()
    page.goto("/mcp-servers/")
    page.fill("#mcp-name", "slow-npx")
    page.select_option("#mcp-type", "stdio")
    page.fill("#mcp-command", os.path.join(directory, "npx"))
    page.fill("#mcp-args", "-y\ndemo-server")
    page.click("#mcp-add")
    progress = page.locator("#mcp-starting")
    try:
        expect(progress).to_contain_text("installing its package on its first start", timeout=30_000)
        expect(progress.locator(".mcp-starting-output")).to_contain_text(PRINTED)
        expect(page.locator("#mcp-busy")).to_be_visible()
    finally:
        open(go, "w").close()
    expect(page.locator("#mcp-list")).to_contain_text("slow-npx", timeout=60_000)
    expect(page.locator("#mcp-list")).to_contain_text("add")  # its tools, listed once it answered
    expect(progress).to_be_empty()
