"""The History tab in Chromium: the timeline of an agent's versions, a diff between two, and restore (block
values left alone). Screenshots go to test-artifacts/screenshots/."""

import pytest
from playwright.sync_api import expect

from core.agents.services import agent_update
from core.models import Agent, AgentVersion
from memory.models import Block
from memory.services import block_update
from tests.e2e.conftest import shot
from tests.factories import make_agent


@pytest.fixture
def versioned(live_server_url, account):
    """An agent at version 2 with a block value changed since; made before the browser's event loop starts
    (a block write sends an event, which sync code may only do outside a running loop)."""
    agent = make_agent(account.org, name="versioned", system="Answer in English.\nBe kind.")
    agent_update(
        agent=agent,
        changes={"system": "Answer in French.\nBe kind.", "tags": ["fr"], "version_message": "<i>switch to French</i>"},
    )
    block = Block.objects.get(agentblock__agent=agent, label="human")
    block_update(block=block, changes={"value": "The user's name is Zoé."})
    return agent, block


def test_history_tab_diffs_two_versions_and_restores_one(versioned, signed_in):
    agent, block = versioned
    page = signed_in.new_page()
    page.goto(f"/agents/{agent.id}/")
    page.click('.pill-nav [data-tab="tab-versions"]')
    rows = page.locator("#versions-list .version-row")
    expect(rows).to_have_count(2)
    expect(rows.first.locator(".version-message")).to_have_text("<i>switch to French</i>")  # shown as text
    page.click("#compare-versions")  # v2 against v1, the defaults
    diff = page.locator("#version-diff-body")
    expect(diff).to_have_attribute("data-against", "1")
    expect(diff.locator('[data-field="system"] .del')).to_contain_text(["-Answer in English."])
    expect(diff.locator('[data-field="system"] .ins')).to_contain_text(["+Answer in French."])
    expect(diff.locator('[data-field="tags"]')).to_contain_text("fr")
    shot(page, "versions-01-diff")

    page.on("dialog", lambda dialog: dialog.accept())
    restore = rows.nth(1)
    restore.locator("input[name=message]").fill("back to English")
    restore.locator("[data-restore-version='1']").click()
    expect(page.locator("#versions-restored")).to_have_text("Restored as version 3.")
    expect(rows).to_have_count(3)
    expect(rows.first.locator(".version-message")).to_have_text("back to English")
    expect(rows.first).to_contain_text("restored v1")
    shot(page, "versions-02-restored")
    agent = Agent.objects.get(pk=agent.pk)
    assert agent.system == "Answer in English.\nBe kind."
    v3 = AgentVersion.objects.get(agent=agent, number=3)
    assert (v3.author_kind, v3.author, v3.restored_from) == ("user", "alice", 1)
    assert Block.objects.get(pk=block.pk).value == "The user's name is Zoé."

    page.select_option("#version-compare select[name=number]", "3")
    page.select_option("#version-compare select[name=against]", "1")
    page.click("#compare-versions")
    expect(page.locator("#diff-none")).to_be_visible()
