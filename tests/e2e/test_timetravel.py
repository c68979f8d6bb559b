"""Time travel in Chromium: replay a step on two models with an edited block (both answers side by side, diffed
against what the agent did, the agent unchanged), "Fork here" (the fork opens; lineage links both ways), and what
each run cost. Screenshots of each state, light and dark, go to /tmp/shots-ui/ and test-artifacts/screenshots/."""

from pathlib import Path

from django.template.defaultfilters import floatformat
from playwright.sync_api import expect

from core.models import Agent, Message, Step
from core.runs.runner import run_agent
from memory.models import Block
from tests.e2e.conftest import shot
from tests.e2e.test_csp import _watch
from tests.factories import make_agent
from tests.fake_llm import FakeLLM
from tests.helpers import in_thread

SHOTS_UI = Path("/tmp/shots-ui")


def _shots(page, name: str) -> None:
    """The same state in light and dark."""
    SHOTS_UI.mkdir(exist_ok=True)
    for theme in ("light", "dark"):
        page.evaluate(f"document.documentElement.dataset.theme = '{theme}'")
        page.screenshot(path=str(SHOTS_UI / f"{name}-{theme}.png"), full_page=False)
        shot(page, f"tt-{name}-{theme}")
    page.evaluate("document.documentElement.dataset.theme = 'light'")


def _one_turn(account, agent, fake_llm, reply: str) -> Step:
    fake_llm.script(FakeLLM.tool("send_message", {"message": reply}))
    in_thread(
        run_agent,
        agent_id=agent.id,
        owner=account.org,
        input_messages=[{"role": "user", "content": "Where should we eat?"}],
    )
    return Step.objects.filter(agent=agent).order_by("-created_at").first()


def _number(step) -> int:
    """The step's number in its agent's one thread (steps are numbered within the conversation)."""
    return Step.objects.filter(agent_id=step.agent_id, kind="agent", created_at__lte=step.created_at).count()


def _open_step(context, agent, step):
    page = context.new_page()
    page.goto(f"/agents/{agent.id}/")
    page.locator(f'#steps-list .step-chip[data-step="{step.id}"]').click()
    expect(page.locator("#step-detail .step-card strong").first).to_have_text(f"Step {_number(step)}")
    return page


def test_replay_on_two_models_with_an_edited_block(signed_in, account, fake_llm):
    agent = make_agent(account.org, name="Diner")
    step = _one_turn(account, agent, fake_llm, "Let's try the <b>noodle</b> bar, Alice.")
    blocks_before = list(Block.objects.filter(agentblock__agent=agent).values_list("id", "value", "version"))
    messages_before = list(Message.objects.filter(agent=agent).values_list("id", "text"))
    page = _open_step(signed_in, agent, step)
    card = page.locator("#step-detail .step-card")
    expect(card.locator("#step-estimate")).to_contain_text("ours ")
    expect(card.locator("#step-cost")).to_have_text("price unknown")
    _shots(page, "01-inspector-step-actions")

    violations = _watch(page)
    card.locator("#step-replay").click()
    expect(page.locator("h2")).to_contain_text(f"Replay step {_number(step)}")
    expect(page.locator("#replay-empty")).to_be_visible()
    fake_llm.by_model = {
        "model-a": FakeLLM.tool("send_message", {"message": "Bob, the <i>taco</i> truck!"}),
        "model-b": FakeLLM.text("Plain answer from model b for Bob."),
    }
    page.locator('input[name="models"][value="openai/fake-model"]').uncheck()
    page.fill("#extra-models", "openai/model-a, openai/model-b")
    edited = page.locator('[data-edited-for="block:human"]')
    expect(edited).to_be_hidden()
    page.fill('textarea[data-block="human"]', "The user's name is Bobby.")
    expect(edited).to_be_visible()
    page.click('[data-revert="block:human"]')  # back to what the step had
    expect(page.locator('textarea[data-block="human"]')).to_have_value("The user's name is Alice.")
    expect(edited).to_be_hidden()
    page.fill('textarea[data-block="human"]', "The user's name is Bob.")
    _shots(page, "02-replay-overrides")
    page.click("#replay-submit")

    columns = page.locator("#replay-columns .replay-col[data-model]")
    expect(columns).to_have_count(2, timeout=60000)
    a = page.locator('.replay-col[data-model="openai/model-a"]')
    b = page.locator('.replay-col[data-model="openai/model-b"]')
    expect(a.locator(".call-name")).to_have_text("send_message")
    expect(a.locator(".replay-call pre")).to_contain_text("Bob, the <i>taco</i> truck!")  # shown as text
    expect(a.locator("i")).to_have_count(0)
    expect(b.locator(".replay-content")).to_have_text("Plain answer from model b for Bob.")
    expect(page.locator("#replay-actual")).to_contain_text("Let's try the <b>noodle</b> bar, Alice.")
    for col in (a, b):
        expect(col.locator(".replay-cost")).to_have_text("price unknown")
        expect(col.locator(".replay-diff .add").first).to_be_visible()
    expect(b.locator(".replay-diff .add")).to_contain_text(["Plain answer from model b for Bob."])
    expect(b.locator(".replay-diff .del").first).to_contain_text("send_message")
    # the form shows the replay's overrides, and it is listed
    expect(page.locator('textarea[data-block="human"]')).to_have_value("The user's name is Bob.")
    expect(page.locator("#replay-list li.active")).to_contain_text("openai/model-a, openai/model-b · 1 block")
    _shots(page, "03-replay-results")

    # the agent itself is untouched
    assert list(Block.objects.filter(agentblock__agent=agent).values_list("id", "value", "version")) == blocks_before
    assert list(Message.objects.filter(agent=agent).values_list("id", "text")) == messages_before
    assert all("Bob" in r["request"]["messages"][0]["content"] for r in agent.steps.get().replays.get().results)

    # a second replay; the first reopens from the list
    page.locator('input[name="models"][value="openai/fake-model"]').check()
    page.fill("#extra-models", "")
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Let's try the <b>noodle</b> bar, Alice."}))
    page.fill('textarea[data-block="human"]', "The user's name is Alice.")
    page.click("#replay-submit")
    expect(page.locator('.replay-col[data-model="openai/fake-model"] .badge.ok')).to_have_text("same as actual")
    expect(page.locator("#replay-list li")).to_have_count(2)
    page.locator("#replay-list li a").nth(1).click()
    expect(page.locator("#replay-columns .replay-col[data-model]")).to_have_count(2)
    assert violations == []
    page.click("#back-to-agent")
    expect(page).to_have_url(f"{page.url.split('/agents/')[0]}/agents/{agent.id}/")


def test_fork_here_opens_the_fork_with_lineage_both_ways(signed_in, account, fake_llm):
    agent = make_agent(account.org, name="Trunk")
    first = _one_turn(account, agent, fake_llm, "First answer.")
    _one_turn(account, agent, fake_llm, "Second answer.")
    page = _open_step(signed_in, agent, first)
    page.locator("#step-fork button", has_text="Fork here").click()
    expect(page.locator("#forked-from")).to_be_visible()
    fork = Agent.objects.exclude(id=agent.id).get()
    assert page.url.endswith(f"/agents/{fork.id}/")
    expect(page.locator("#agent-title")).to_have_text(fork.name)
    expect(page.locator("#forked-from")).to_contain_text(f"Forked from Trunk at step {first.index}")
    # the fork continues from the first turn: the second is not in its conversation
    expect(page.locator("#history")).to_contain_text("First answer.")
    expect(page.locator("#history")).not_to_contain_text("Second answer.")
    _shots(page, "04-fork-lineage")
    page.locator("#forked-from a", has_text="Trunk").click()
    expect(page.locator("#agent-title")).to_have_text("Trunk")
    expect(page.locator("#forks a")).to_have_text([fork.name])
    _shots(page, "05-original-lists-forks")
    page.locator("#forks a").click()
    expect(page.locator("#forked-from")).to_be_visible()


def test_runs_show_tokens_and_cost(signed_in, account, fake_llm):
    priced = make_agent(account.org, name="Priced", model="openai/gpt-4o-mini")
    step = _one_turn(account, priced, fake_llm, "Costs money.")
    unpriced = make_agent(account.org, name="Unpriced")
    free_step = _one_turn(account, unpriced, fake_llm, "Free?")
    page = signed_in.new_page()
    page.goto(f"/agents/{priced.id}/")
    page.click("[data-tab=tab-runs]")
    row = page.locator(f'.run-row[data-run="{step.run_id}"]')
    expect(row.locator(".run-cost")).to_have_text("$" + floatformat(step.usage["cost_usd"], "-6"))
    expect(row.locator(".run-main td.num").nth(2)).to_have_text(str(step.usage["total_tokens"]))
    expect(page.locator("#agent-usage")).to_contain_text(f"1 step · {step.usage['total_tokens']} tokens")
    _shots(page, "06-runs-cost")
    page.click("[data-tab=tab-context]")
    expect(page.locator("#ctx-calibrated")).to_have_text("calibrated")
    expect(page.locator("#ctx-raw")).to_be_visible()
    _shots(page, "07-context-calibrated")

    page.goto(f"/agents/{unpriced.id}/")
    page.click("[data-tab=tab-runs]")
    expect(page.locator(f'.run-row[data-run="{free_step.run_id}"] .run-cost')).to_have_text("price unknown")
    expect(page.locator("#agent-usage")).to_contain_text("price unknown")
