"""The typed tool form in Chromium: a Python tool runs from the workbench with its defaults as drawn (the sandbox gets
flag=True, count=3 and no label), a bad value or bad JSON is refused beside its field with nothing run, what the tool
prints shows while it runs, a run without network says the sandbox blocked it, and an MCP tool (on its page and in
the workbench) and a built-in tool (as an agent) get the same typed form."""

import re
from pathlib import Path

from django.conf import settings
from playwright.sync_api import expect

from memory.models import Block
from tests.e2e.conftest import shot
from tests.factories import make_agent
from tests.tools.test_mcp import DEMO
from tools import mcp_services
from tools.mcp_client import manager
from tools.models import Tool, ToolRun

PROBE = '''def probe(flag: bool = True, count: int = 3, label: str | None = None, tags: list[str] | None = None) -> str:
    """Say what arrived.

    Args:
        flag: Whether to shout.
        count: How many times.
        label: An optional label.
        tags: Optional tags.
    """
    return f"flag={flag!r} count={count!r} label={label!r} tags={tags!r}"
'''

CHATTY = '''def chatty() -> str:
    """Print a line, wait, print another."""
    import time
    print("first line")
    time.sleep(2.5)
    print("second line")
    return "done"
'''

OFFLINE = '''def offline() -> str:
    """Fetch a page."""
    import urllib.request
    return urllib.request.urlopen("http://example.com", timeout=5).read(20).decode()
'''


def _shot(page, name: str) -> None:
    shot(page, f"8x-{name}")
    if Path("/tmp").is_dir():
        page.screenshot(path=f"/tmp/8x-{name}.png", full_page=False)


def _set_source(page, source: str) -> None:
    page.goto("/tools/")
    expect(page.locator(".CodeMirror")).to_have_count(1)
    page.evaluate("(s) => window.AIDE_EDITOR.setValue(s)", source)
    name = re.search(r"def (\w+)", source).group(1)
    expect(page.locator("#schema-json")).to_contain_text(f'"name": "{name}"')


def test_a_python_tool_runs_with_its_defaults_and_bad_values_are_refused_beside_their_field(signed_in, account):
    page = signed_in.new_page()
    _set_source(page, PROBE)
    expect(page.locator("[name=arg_flag]")).to_be_checked()
    expect(page.locator("[name=arg_count]")).to_have_value("3")
    expect(page.locator("[name=arg_label]")).to_have_value("")
    expect(page.locator(".arg-field[data-arg=flag] .arg-default")).to_have_text("true")
    _shot(page, "tool-form-defaults")
    page.click("#run-tool")
    expect(page.locator("#run-return")).to_have_text("flag=True count=3 label=None tags=None")
    assert ToolRun.objects.get(owner=account.org, tool_name="probe").args == {"flag": True, "count": 3}

    page.fill("[name=arg_count]", "2.5")
    page.fill("[name=arg_tags]", '["a",')
    page.click("#run-tool")
    expect(page.locator(".arg-field[data-arg=count] .arg-error")).to_have_text("'2.5' is not a whole number")
    expect(page.locator(".arg-field[data-arg=tags] .arg-error")).to_contain_text("not valid JSON")
    expect(page.locator("#run-error")).to_contain_text("Not run")
    _shot(page, "tool-form-inline-errors")
    assert ToolRun.objects.filter(owner=account.org, tool_name="probe").count() == 1  # nothing was run

    page.fill("[name=arg_count]", "2")
    page.fill("[name=arg_tags]", '["a", "<b>"]')
    page.uncheck("[name=arg_flag]")
    page.click("#run-tool")
    expect(page.locator("#run-return")).to_have_text("flag=False count=2 label=None tags=['a', '<b>']")
    expect(page.locator(".arg-field[data-arg=count] .arg-error")).to_be_empty()  # the errors are cleared


def test_output_shows_while_the_tool_runs_and_a_blocked_network_is_said_plainly(signed_in):
    page = signed_in.new_page()
    _set_source(page, CHATTY)
    page.click("#run-tool")
    expect(page.locator("#run-live")).to_have_text("first line\n")  # before the run has ended
    expect(page.locator("#run-progress")).to_be_visible()
    _shot(page, "tool-form-live-output")
    expect(page.locator("#run-return")).to_have_text("done", timeout=20000)
    expect(page.locator("#run-stdout")).to_have_text("first line\nsecond line")

    _set_source(page, OFFLINE)
    page.click("#run-tool")
    expect(page.locator("#run-return")).to_contain_text("network blocked by the sandbox: this run has no network")
    expect(page.locator("#run-network")).to_have_text("off")
    _shot(page, "tool-form-network-blocked")


def test_mcp_and_builtin_tools_get_the_typed_form(signed_in, account):
    agent = make_agent(account.org, name="Ada")
    server = mcp_services.mcp_server_create(
        owner=account.org,
        server_name="demo",
        config={"mcp_server_type": "stdio", "command": settings.MCP_DEMO_PYTHON, "args": [DEMO, "stdio"]},
    )
    page = signed_in.new_page()
    try:
        add = Tool.objects.get(mcp_server=server, name="add")
        page.goto("/mcp-servers/")
        card = page.locator(".mcp-tool[data-tool='add']")
        card.locator("summary").click()
        card.locator("[name=arg_a]").fill("2")
        card.locator("button[type=submit]").click()  # b is missing
        expect(card.locator(".arg-field[data-arg=b] .arg-error")).to_have_text("required")
        card.locator("[name=arg_b]").fill("40")
        card.locator("button[type=submit]").click()
        expect(card.locator(".mcp-run-output pre")).to_have_text("42", timeout=60000)
        _shot(page, "tool-form-mcp-page")

        page.goto(f"/tools/?tool={add.id}")
        expect(page.locator("#saved-tool-notice")).to_contain_text("demo")
        expect(page.locator("[name=arg_a]")).to_have_attribute("type", "number")
        page.fill("[name=arg_a]", "5")
        page.fill("[name=arg_b]", "6")
        page.click("#run-tool")
        expect(page.locator("#run-return")).to_have_text("11", timeout=60000)
        _shot(page, "tool-form-mcp-workbench")

        page.goto("/tools/")
        page.get_by_role("link", name="memory_insert", exact=True).click()
        expect(page.locator("#saved-tool-notice")).to_contain_text("built-in")
        expect(page.locator("[name=arg_insert_line]")).to_have_attribute("type", "number")
        page.fill("[name=arg_label]", "human")
        page.fill("[name=arg_new_string]", "Likes tea.")
        page.fill("[name=arg_insert_line]", "-1")
        page.click("#run-tool")  # no agent chosen yet
        expect(page.locator("#run-error")).to_contain_text("pick the agent under “Run as agent”")
        page.select_option("#run-agent", agent.id)
        page.click("#run-tool")
        expect(page.locator("#run-status")).to_have_text("success")
        expect(page.locator("#run-agent-name")).to_have_text("Ada")
        _shot(page, "tool-form-builtin")
        assert Block.objects.get(agents=agent, label="human").value.endswith("Likes tea.")

        page.set_viewport_size({"width": 390, "height": 844})
        page.emulate_media(color_scheme="dark")
        page.goto(f"/tools/?tool={add.id}")
        page.locator("#args-form").scroll_into_view_if_needed()
        _shot(page, "tool-form-390-dark")
    finally:
        page.close()
        manager().close_all()
