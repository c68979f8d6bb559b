"""The History tab in Chromium: the timeline of an agent's versions, a diff between two, restore (block values
left alone), and a version note given with a save. Screenshots go to test-artifacts/screenshots/."""

import pytest
from playwright.sync_api import expect

from core.agents.services import agent_update
from core.models import Agent, AgentVersion
from memory.models import Block
from memory.services import block_update
from tests.e2e.conftest import shot
from tests.factories import make_agent
from tests.helpers import in_thread


@pytest.fixture
def versioned(live_server_url, account):
    """An agent at version 2 with a block value changed since (on a plain thread: a block write sends an event,
    which sync code may only do outside the browser's running event loop)."""

    def make():
        agent = make_agent(account.org, name="versioned", system="Answer in English.\nBe kind.")
        agent_update(
            agent=agent,
            changes={
                "system": "Answer in French.\nBe kind.",
                "tags": ["fr"],
                "version_message": "<i>switch to French</i>",
            },
        )
        block = Block.objects.get(agentblock__agent=agent, label="human")
        block_update(block=block, changes={"value": "The user's name is Zoé."})
        return agent, block

    return in_thread(make)


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
    expect(diff.locator('[data-field="system"] .add')).to_contain_text(["+Answer in French."])
    expect(diff.locator('[data-field="system"]')).to_contain_text("System prompt")
    expect(diff.locator('[data-field="tags"]')).to_contain_text("fr")
    shot(page, "versions-01-diff")

    page.on("dialog", lambda dialog: dialog.accept())
    restore = rows.nth(1)
    expect(restore.locator("input[name=message]")).to_be_hidden()  # behind "Restore…" until asked for
    restore.locator(".version-restore summary").click()
    restore.locator("input[name=message]").fill("back to English")
    restore.locator("[data-restore-version='1']").click()
    expect(page.locator("#versions-restored")).to_have_text("Restored as version 3.")
    expect(rows).to_have_count(3)
    expect(rows.first.locator(".version-message")).to_have_text("back to English")
    expect(rows.first).to_contain_text("restored v1")
    # the settings show the restored definition: saving them next must not undo the restore
    expect(page.locator("#agent-settings textarea[name=system]")).to_have_value("Answer in English.\nBe kind.")
    expect(page.locator("#agent-settings input[name=tags]")).to_have_value("")
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


def _history(page, width: int):
    """Open the History tab as a person would at this width (below 768 px the inspector is a pane of its own)."""
    if width < 768:
        page.click('.ws-tabs [data-pane="inspector"]')
    elif width < 1280:
        page.click("#inspector-toggle")
    page.click('.pill-nav [data-tab="tab-versions"]')


@pytest.fixture
def noted_agent(live_server_url, account):
    return in_thread(make_agent, account.org, name="noted", system="Answer at length.")


def test_a_version_note_given_with_a_save_shows_in_history(noted_agent, signed_in):
    agent = noted_agent
    page = signed_in.new_page()
    page.goto(f"/agents/{agent.id}/")
    form = page.locator("#agent-settings")
    form.locator("textarea[name=system]").fill("Answer in one sentence.")
    note = page.locator("#settings-version-note")
    expect(note).to_have_attribute("placeholder", "Version note (optional)")
    note.fill("<b>users</b> asked for shorter answers")
    page.click("#save-settings")
    expect(page.locator("#settings-saved")).to_be_visible()
    expect(page.locator("#settings-version-note")).to_have_value("")  # cleared once saved

    page.locator("#rules textarea[name=tool_rules]").fill('[{"type": "exit_loop", "tool_name": "send_message"}]')
    page.locator("#rules-version-note").fill("stop after replying")
    page.click("#save-rules")
    expect(page.locator("#rules .ok-text")).to_have_text("Saved.")
    expect(page.locator("#rules-version-note")).to_have_value("")

    tool = page.locator("#attach-select option").first.text_content()
    page.locator("#tools-version-note").fill("let it talk to others")
    page.click("#attach-btn")
    expect(page.locator("#attached-tools")).to_contain_text(tool)
    expect(page.locator("#tools-version-note")).to_have_value("")

    _history(page, 1280)
    rows = page.locator("#versions-list .version-row")
    expect(rows).to_have_count(4)
    expect(rows.nth(0).locator(".version-message")).to_have_text("let it talk to others")
    expect(rows.nth(1).locator(".version-message")).to_have_text("stop after replying")
    expect(rows.nth(2).locator(".version-message")).to_have_text("<b>users</b> asked for shorter answers")
    expect(rows.nth(2).locator(".version-author")).to_have_text("person alice")
    rows.nth(2).locator("[data-diff-version='2']").click()
    expect(page.locator('#version-diff-body [data-field="system"] .add')).to_contain_text(["+Answer in one sentence."])
    assert AgentVersion.objects.get(agent=agent, number=2).message == "<b>users</b> asked for shorter answers"
    for theme in ("light", "dark"):
        page.evaluate("t => { document.documentElement.dataset.theme = t; }", theme)
        shot(page, f"versions-03-note-1280-{theme}")

    phone = signed_in.new_page()
    phone.set_viewport_size({"width": 390, "height": 844})
    phone.goto(f"/agents/{agent.id}/")
    _history(phone, 390)
    expect(phone.locator("#versions-list .version-row")).to_have_count(4)
    phone.locator("[data-diff-version='3']").click()
    body = phone.locator("#version-diff-body")
    expect(body.locator('[data-field="tool_rules"]')).to_contain_text("Tool rules")
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390  # nothing wider than the phone
    for theme in ("light", "dark"):
        phone.evaluate("t => { document.documentElement.dataset.theme = t; }", theme)
        shot(phone, f"versions-04-note-390-{theme}")
