"""Evals in Chromium: a dataset built in the IDE from conversations ("add these turns as a case") and a typed case,
graded by contains and a rubric the fake model judges, run against the agent's model and another, followed live, and
the compare view filtered to regressions. Screenshots at 390, 1280 and 1920 px, light and dark."""

import json

from playwright.sync_api import expect

from core.models import Dataset
from core.runs.runner import run_agent
from tests.e2e.conftest import shot
from tests.factories import make_agent
from tests.fake_llm import FakeLLM

RUN_S = 90000  # ms: each case a copy and a run through the executor, then the judge
GRADERS = [
    {"name": "answer", "kind": "contains"},
    {
        "name": "quality",
        "kind": "rubric",
        "model": "openai/judge",
        "prompt": "Expected {ground_truth}; got {submission}",
    },
]


def _shots(page, name: str) -> None:
    for width in (390, 1280, 1920):
        page.set_viewport_size({"width": width, "height": 860})
        for theme in ("light", "dark"):
            page.evaluate(f"document.documentElement.dataset.theme = '{theme}'")
            shot(page, f"evals-{name}-{width}-{theme}")
    page.set_viewport_size({"width": 1280, "height": 860})
    page.evaluate("document.documentElement.dataset.theme = 'light'")


def _converse(agent, account, fake_llm, question: str, answer: str) -> None:
    fake_llm.script(FakeLLM.tool("send_message", {"message": answer}))
    run_agent(agent_id=agent.id, owner=account.org, input_messages=[{"role": "user", "content": question}])


def _run(page, dataset_id: str, model: str) -> None:
    page.goto(f"/evals/datasets/{dataset_id}/")
    page.fill("#run-model", model)
    page.fill("input[name=concurrency]", "1")
    page.click("#run-start")
    expect(page.locator("#experiment-body")).to_have_attribute("data-status", "completed", timeout=RUN_S)


def test_a_dataset_from_conversations_run_on_two_models_and_compared(signed_in, account, fake_llm):
    barista = make_agent(account.org, name="barista")
    baker = make_agent(account.org, name="baker")
    _converse(barista, account, fake_llm, "What do I drink?", "tea")
    _converse(baker, account, fake_llm, "What do I bake?", "bread")
    page = signed_in.new_page()
    page.goto("/evals/")
    page.fill("#create-dataset input[name=name]", "kitchen")
    page.select_option("#create-dataset select[name=agent_id]", barista.id)
    page.click("#create-dataset button[type=submit]")
    expect(page.locator("#dataset-name")).to_have_text("kitchen")
    dataset = Dataset.objects.get(owner=account.org)
    for agent in (barista, baker):
        page.click("#from-agent-form >> xpath=.. >> summary")
        page.select_option("#from-agent-form select[name=agent_id]", agent.id)
        page.click("#add-conversation")
    page.fill("#case-form textarea[name=turns]", "And for dessert?")
    page.fill("#case-form input[name=ground_truth]", "cake")
    page.click("#case-form button[type=submit]")
    expect(page.locator("#cases-list tr[data-case]")).to_have_count(3)
    page.fill("#graders-form textarea[name=graders]", json.dumps(GRADERS))
    page.fill("#graders-form textarea[name=gate]", json.dumps({"metric_key": "answer", "op": "gte", "value": 0.9}))
    page.click("#graders-form button[type=submit]")
    _shots(page, "dataset")

    fake_llm.by_model = {"judge": FakeLLM.text('{"score": 0.8, "rationale": "close enough"}')}
    fake_llm.script(*(FakeLLM.tool("send_message", {"message": m}) for m in ("tea", "bread", "cake")))
    _run(page, dataset.id, "")
    expect(page.locator("#experiment-status")).to_have_text("gate passed")
    expect(page.locator("#results-list .grade")).to_have_count(6)
    expect(page.locator("#results-list")).to_contain_text("close enough")
    expect(page.locator("#results-list .run-link")).to_have_count(3)
    _shots(page, "experiment")

    fake_llm.by_model["other"] = FakeLLM.tool("send_message", {"message": "tea and cake"})
    _run(page, dataset.id, "openai/other")
    expect(page.locator("#experiment-status")).to_have_text("gate failed")
    page.click("#compare-start")
    expect(page.locator("#compare-heads")).to_contain_text("openai/other")
    expect(page.locator("#compare-list tr[data-verdict]")).to_have_count(3)
    page.click('#compare-filter [data-verdict="worse"]')
    expect(page.locator("#compare-list tr[data-verdict=worse]")).to_have_count(1)
    expect(page.locator("#compare-list")).to_contain_text("output does not contain 'bread'")
    expect(page.locator("#compare-deltas")).to_contain_text("pass_rate")
    _shots(page, "compare")
