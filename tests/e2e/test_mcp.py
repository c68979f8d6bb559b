"""MCP servers and the sleep-time panel in Chromium: add a stdio MCP server from the page (an inline error first),
see its tools, run one; enable an agent's sleep-time companion, trigger a run and read what it changed."""

from django.conf import settings
from playwright.sync_api import expect

from core.runs.executor import run_submit, run_wait
from core.runs.request import RunRequest
from tests.e2e.conftest import shot
from tests.factories import make_agent
from tests.fake_llm import FakeLLM
from tests.tools.test_mcp import DEMO
from tools.mcp_client import manager
from tools.models import McpServer


def test_mcp_page_adds_a_server_lists_its_tools_and_runs_one(signed_in):
    page = signed_in.new_page()
    try:
        page.goto("/mcp-servers/")
        expect(page.locator("#mcp-empty")).to_be_visible()
        page.fill("#mcp-name", "demo")
        page.click("#mcp-add")  # no command yet
        expect(page.locator("#mcp-command-error")).to_contain_text("a command is required")
        assert not McpServer.objects.exists()
        page.fill("#mcp-command", settings.MCP_DEMO_PYTHON)
        page.fill("#mcp-args", f"{DEMO}\nstdio")
        page.fill("#mcp-env", "GREETING=<i>hello</i>")
        page.click("#mcp-add")
        card = page.locator(".mcp-server[data-name='demo']")
        expect(card.locator(".mcp-tool[data-tool='add']")).to_be_visible(timeout=60000)
        expect(card).to_contain_text("GREETING")
        expect(page.locator("#mcp-name")).to_have_value("")  # the form is fresh again
        tool = card.locator(".mcp-tool[data-tool='read_env']")
        tool.locator("summary").click()
        expect(tool.locator("pre").first).to_contain_text('"required": [')
        tool.locator("[name=arg_name]").fill("GREETING")  # the typed form (tools.arg_form)
        tool.locator("button[type=submit]").click()
        out = tool.locator(".mcp-run-output")
        expect(out).to_contain_text("<i>hello</i>", timeout=60000)  # shown as text, not markup
        expect(out.locator("i")).to_have_count(0)
        expect(out).to_contain_text("server demo")
        shot(page, "mcp-servers")
    finally:
        page.close()
        manager().close_all()


def test_sleeptime_panel_enables_the_companion_runs_it_and_shows_its_edit(signed_in, account, fake_llm):
    agent = make_agent(account.org, name="Ada")
    page = signed_in.new_page()
    try:
        page.goto(f"/agents/{agent.id}/")
        panel = page.locator("#sleeptime-panel")
        panel.locator("summary").click()
        page.check("#sleeptime-enabled")
        page.fill("#sleeptime-frequency", "4")
        page.click("#sleeptime-save")
        expect(page.locator("#sleeptime-companion")).to_contain_text("Ada (sleep-time)")
        expect(panel).to_contain_text("every 4 turns")
        page.click("#sleeptime-run")
        expect(page.locator("#sleeptime-error")).to_contain_text("nothing new")
        fake_llm.script(
            FakeLLM.tool("send_message", {"message": "noted"}),
            FakeLLM.tool("core_memory_append", {"label": "human", "content": "Prefers mornings."}, heartbeat=False),
        )
        run_wait(
            run=run_submit(
                RunRequest(
                    owner=agent.owner,
                    agent_id=agent.id,
                    input_messages=[{"role": "user", "content": "I work best in the morning"}],
                )
            )
        )
        page.click("#sleeptime-run")
        expect(page.locator("#sleeptime-started")).to_be_visible()
        expect(page.locator("#sleeptime-runs")).to_contain_text("completed", timeout=60000)
        edit = page.locator(".sleeptime-edit").first
        edit.locator("summary").click()
        expect(edit).to_contain_text("+Prefers mornings.")
        shot(page, "sleeptime-panel")
    finally:
        page.close()
