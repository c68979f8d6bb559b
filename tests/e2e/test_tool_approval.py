"""The workspace's "approval" box on an attached tool, in Chromium: attaching a tool whose default asks for approval
ticks it and shows the rule in the rules editor; unticking removes the rule (through htmx, with the page's CSRF)."""

import json

from playwright.sync_api import expect

from core.models import Agent
from tests.e2e.conftest import shot
from tests.factories import make_agent
from tools.services import tool_create

SOURCE = '''def wipe_disk(device: str) -> str:
    """Erase a disk.

    Args:
        device: The disk to erase.
    """
    return device
'''


def test_approval_box_follows_the_tools_default_and_toggles_the_rule(live_server_url, account, signed_in):
    tool_create(owner=account.org, source_code=SOURCE, default_requires_approval=True)
    agent = make_agent(account.org, name="careful")
    page = signed_in.new_page()
    page.goto(f"/agents/{agent.id}/")
    page.select_option("#attach-select", label="wipe_disk")
    page.click("#attach-btn")
    box = page.locator('#attached-tools input.needs-approval[data-tool="wipe_disk"]')
    expect(box).to_be_checked()
    rules = page.locator("#rules textarea[name=tool_rules]")
    expect(rules).to_have_value(json.dumps([{"tool_name": "wipe_disk", "type": "requires_approval"}], indent=2))
    shot(page, "tool-approval-01-attached-1280")

    box.uncheck()
    expect(rules).to_have_value("[]")
    expect(page.locator('#attached-tools input.needs-approval[data-tool="wipe_disk"]')).not_to_be_checked()
    assert Agent.objects.get(pk=agent.id).tool_rules == []
    page.locator('#attached-tools input.needs-approval[data-tool="send_message"]').check()
    expect(rules).to_contain_text('"tool_name": "send_message"')
    assert Agent.objects.get(pk=agent.id).tool_rules == [{"tool_name": "send_message", "type": "requires_approval"}]
