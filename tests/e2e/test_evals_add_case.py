"""'Add to dataset' in Chromium: a person talks to the agent in the workspace, adds the conversation to a new dataset
named in the form, sees a refusal inline, adds it again to the now existing dataset and follows the confirmation's
link to the dataset, where the case is listed. Screenshots at 390 and 1280 px, light and dark (also to
/tmp/shots-addcase/ when it exists)."""

from pathlib import Path

from playwright.sync_api import expect

from core.models import Dataset, EvalCase
from tests.e2e.conftest import shot
from tests.factories import make_agent
from tests.fake_llm import FakeLLM


def _shots(page, name: str) -> None:
    for width in (390, 1280):
        page.set_viewport_size({"width": width, "height": 860})
        for theme in ("light", "dark"):
            page.evaluate(f"document.documentElement.dataset.theme = '{theme}'")
            shot(page, f"addcase-{name}-{width}-{theme}")
            if Path("/tmp/shots-addcase").is_dir():
                page.screenshot(path=f"/tmp/shots-addcase/{name}-{width}-{theme}.png")
    page.set_viewport_size({"width": 1280, "height": 860})
    page.evaluate("document.documentElement.dataset.theme = 'light'")


def test_a_conversation_is_added_to_a_new_then_the_same_dataset(signed_in, account, fake_llm):
    agent = make_agent(account.org, name="barista")
    fake_llm.script(FakeLLM.tool("send_message", {"message": "You like tea."}))
    page = signed_in.new_page()
    page.goto(f"/agents/{agent.id}/")
    page.fill("#composer-input", "What do I drink in the morning?")
    page.press("#composer-input", "Enter")
    expect(page.locator("#conversation")).to_contain_text("You like tea.")
    page.click("#save-menu > summary")  # the conversation's Save as… menu
    page.click("#add-to-dataset")
    expect(page.locator("#add-case-form")).to_be_visible()
    page.click("#add-case-save")  # "a new dataset…" is chosen and has no name yet
    expect(page.locator("#add-case-error")).to_have_text("Name the new dataset.")
    _shots(page, "error")
    page.fill("#add-case-name", "breakfast")
    page.click("#add-case-save")
    expect(page.locator("#case-added")).to_contain_text("to breakfast")
    _shots(page, "added")
    page.click("#save-menu > summary")  # the conversation's Save as… menu
    page.click("#add-to-dataset")
    dataset = Dataset.objects.get(owner=account.org, name="breakfast")
    expect(page.locator("#add-case-dataset")).to_have_value(dataset.id)  # the agent's dataset comes first
    page.click("#add-case-save")
    expect(page.locator("#case-added")).to_be_visible()
    page.click("#case-added-link")
    page.wait_for_url(f"**/evals/datasets/{dataset.id}/")
    expect(page.locator("body")).to_contain_text("What do I drink in the morning?")
    cases = list(EvalCase.objects.filter(dataset=dataset).order_by("position"))
    assert [(c.turns, c.ground_truth) for c in cases] == [(["What do I drink in the morning?"], "You like tea.")] * 2
    assert dataset.agent_id == agent.id
