"""The tool workbench in Chromium: a run shows its elapsed time and can be cancelled, saving keeps the arguments
and the result, and "Run as agent" gives the tool the agent's API token, with which it calls this server back on
its own (non-default) port and sees the agent."""

import re

from playwright.sync_api import expect

from tests.e2e.conftest import shot
from tests.factories import make_agent
from tools.models import Tool

SLEEPER = '''def nap(seconds: int = 300) -> str:
    """Sleep, then wake.

    Args:
        seconds: How long to sleep.
    """
    import time
    time.sleep(seconds)
    return "woke"
'''

GREET = '''def greet(name: str, times: int = 2) -> str:
    """Greet someone.

    Args:
        name: Who to greet.
        times: How often.
    """
    return " ".join(["hi " + name] * times)
'''

CALL_BACK = '''def who_calls() -> str:
    """Ask this server, with the run's own token, which agent runs the tool."""
    import json, os, urllib.request
    request = urllib.request.Request(os.environ["AIDE_BASE_URL"] + "/v1/agents/" + os.environ["AIDE_AGENT_ID"],
                                     headers={"Authorization": "Bearer " + os.environ["AIDE_API_TOKEN"]})
    with urllib.request.urlopen(request, timeout=20) as answer:
        agent = json.load(answer)
    return os.environ["AIDE_BASE_URL"] + " " + agent["name"]
'''


def _set_source(page, source: str) -> None:
    page.goto("/tools/")
    expect(page.locator(".CodeMirror")).to_have_count(1)
    page.evaluate("(s) => window.AIDE_EDITOR.setValue(s)", source)
    name = re.search(r"def (\w+)", source).group(1)
    expect(page.locator("#schema-json")).to_contain_text(f'"name": "{name}"')


def test_a_running_tool_shows_its_time_and_can_be_cancelled(signed_in):
    page = signed_in.new_page()
    _set_source(page, SLEEPER)
    page.click("#run-tool")
    expect(page.locator("#run-progress")).to_be_visible()
    expect(page.locator("#run-tool")).to_be_disabled()
    expect(page.locator("#run-elapsed")).not_to_have_text("0.0 s")  # the clock moves
    shot(page, "wb-running")
    page.click("#cancel-run")
    expect(page.locator("#run-status")).to_have_text("cancelled")
    expect(page.locator("#run-progress")).to_be_hidden()
    expect(page.locator("#run-tool")).to_be_enabled()
    expect(page.locator("#run-return")).to_have_text("Cancelled: stopped from the workbench")
    # the page can run again after a cancel
    page.fill("[name=arg_seconds]", "0")
    page.click("#run-tool")
    expect(page.locator("#run-return")).to_have_text("woke")


def test_saving_keeps_the_arguments_and_the_last_result(signed_in, account):
    page = signed_in.new_page()
    _set_source(page, GREET)
    page.fill("[name=arg_name]", "Bob")
    page.click("#run-tool")
    expect(page.locator("#run-return")).to_have_text("hi Bob hi Bob")
    page.click("#save-tool")
    expect(page.locator("#save-ok")).to_contain_text("greet")
    tool = Tool.objects.get(owner=account.org, name="greet")
    expect(page).to_have_url(re.compile(rf"/tools/\?tool={tool.id}$"))
    expect(page.locator("#run-return")).to_have_text("hi Bob hi Bob")
    expect(page.locator("[name=arg_name]")).to_have_value("Bob")
    expect(page.locator("#tool-id")).to_have_value(tool.id)
    expect(page.locator(".tool-settings > #tool-env")).to_have_count(1)  # swapped in place, no wrapper
    expect(page.locator("#tool-library a.active")).to_have_text("greet")  # the library lists it, selected
    page.fill("[name=arg_times]", "1")
    page.click("#save-tool")  # the second save updates the same tool
    page.click("#run-tool")
    expect(page.locator("#run-return")).to_have_text("hi Bob")
    assert Tool.objects.filter(owner=account.org, name="greet").count() == 1
    # reopening the tool fills in the last run's arguments
    page.goto(f"/tools/?tool={tool.id}")
    expect(page.locator("[name=arg_name]")).to_have_value("Bob")
    expect(page.locator("#prefill-note")).to_be_visible()


def test_run_as_agent_calls_the_api_back_on_the_servers_own_port(signed_in, account, live_server_url):
    agent = make_agent(account.org, name="Ada Lovelace")
    assert not live_server_url.endswith(":8000")
    page = signed_in.new_page()
    _set_source(page, CALL_BACK)
    page.select_option("#tool-network", "true")
    page.click("#run-tool")  # without an agent: it says what the run lacks
    expect(page.locator("#run-status")).to_have_text("error")
    expect(page.locator("#run-lacks")).to_contain_text("AIDE_API_TOKEN")
    page.select_option("#run-agent", agent.id)
    page.click("#run-tool")
    expect(page.locator("#run-return")).to_have_text(f"{live_server_url} Ada Lovelace")
    expect(page.locator("#run-agent-name")).to_have_text("Ada Lovelace")
    expect(page.locator("#run-lacks")).to_have_count(0)
    shot(page, "wb-run-as-agent")


def test_the_schema_preview_keeps_the_arguments_the_person_changed(signed_in):
    page = signed_in.new_page()
    _set_source(page, GREET)
    page.fill("[name=arg_name]", "Bob")
    expect(page.locator("[name=arg_times]")).to_have_value("2")
    # an edit of the source draws the form again (tools.views.schema_preview): the typed name stays, the default
    # the form drew follows the new schema, a new argument gets its default
    page.evaluate(
        "(s) => window.AIDE_EDITOR.setValue(s)",
        GREET.replace("times: int = 2)", "times: int = 3, loud: bool = True)").replace(
            "often.", "often.\n        loud: Shout."
        ),
    )
    expect(page.locator("[name=arg_times]")).to_have_value("3")
    expect(page.locator("[name=arg_name]")).to_have_value("Bob")
    expect(page.locator("[name=arg_loud]")).to_have_count(1)
