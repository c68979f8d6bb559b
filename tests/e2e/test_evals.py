"""Evals in Chromium: a person builds a 10-case dataset from ten conversations in the IDE ("add these turns as a
case"), grades it by contains and a rubric the fake model judges, runs it in one go against the agent's model,
another model and an edited system prompt, and the compare view shows case by case which changed and why (the
graders that moved, with their reasons), filtered to regressions. Screenshots at 390, 1280 and 1920 px, light and
dark (also to /tmp/shots-evals/ when it exists)."""

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from django.db import connections, transaction
from playwright.sync_api import expect

from core.agents.history import agent_messages_reset
from core.models import Dataset, Experiment
from core.runs.runner import run_agent
from tests.e2e.conftest import shot
from tests.factories import make_agent
from tests.fake_llm import FakeLLM

RUN_S = 180000  # ms: 30 cases, each a copy and a run through the executor, then the judge
FACTS = [
    ("What do I drink in the morning?", "tea"),
    ("What do I bake on Sundays?", "bread"),
    ("What is my dessert?", "cake"),
    ("Which fruit do I like?", "apple"),
    ("What do I put on toast?", "butter"),
    ("Which cheese do I buy?", "cheddar"),
    ("What soup do I make?", "tomato"),
    ("What is my snack?", "almonds"),
    ("What spice do I use?", "cumin"),
    ("What do I drink at night?", "cocoa"),
]
ONE_WORD = "Answer in one word."
OTHER_WRONG = {"Which fruit do I like?", "What is my snack?", "What spice do I use?"}
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
    # a full-page shot of a page scrolled to an anchor draws its sticky bar midway
    page.evaluate("window.scrollTo(0, 0)")
    for width in (390, 1280, 1920):
        page.set_viewport_size({"width": width, "height": 860})
        for theme in ("light", "dark"):
            page.evaluate(f"document.documentElement.dataset.theme = '{theme}'")
            shot(page, f"evals-{name}-{width}-{theme}")
            if Path("/tmp/shots-evals").is_dir():
                page.screenshot(path=f"/tmp/shots-evals/{name}-{width}-{theme}.png", full_page=True)
    page.set_viewport_size({"width": 1280, "height": 860})
    page.evaluate("document.documentElement.dataset.theme = 'light'")


def _text(message: dict) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else json.dumps(content)


def _answer(req: dict):
    """The agent's models and the judge, answering by what they are asked: the agent's own model knows every fact
    but the last; the other model misses three and knows the last; under the edited prompt the reply is one word.
    The judge scores whether the expected fact is in the submission."""
    messages = req.get("messages") or []
    if req.get("model") == "judge":
        prompt = _text(messages[-1])
        expected, got = re.search(r"Expected (.*); got (.*)", prompt, re.S).groups()
        fact = expected.strip().rstrip(".").split()[-1]
        if fact in got.lower():
            return FakeLLM.text(json.dumps({"score": 1, "rationale": f"it says {fact}"}))
        return FakeLLM.text(json.dumps({"score": 0, "rationale": f"{fact} is missing"}))
    asked = [m for m in messages if m.get("role") == "user"]
    question = next((q for q, _ in FACTS if asked and q in _text(asked[-1])), None)
    if question is None:
        return None
    fact = dict(FACTS)[question]
    if ONE_WORD in _text(messages[0]):
        reply = fact.capitalize()
    elif req.get("model") == "other":
        reply = "I am not sure." if question in OTHER_WRONG else f"You like {fact}."
    else:
        reply = "I am not sure." if question == FACTS[-1][0] else f"You like {fact}."
    return FakeLLM.tool("send_message", {"message": reply})


def _off_the_page_thread(fn, **kwargs):
    """Call a server function on a thread of its own: Playwright's thread runs an event loop, where the sync event
    sends a run and a reset make are refused."""

    def call():
        try:
            return fn(**kwargs)
        finally:
            connections.close_all()  # the thread's pooled connection goes back

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(call).result()


def _converse(agent, account, fake_llm, question: str, fact: str) -> None:
    fake_llm.script(FakeLLM.tool("send_message", {"message": f"You like {fact}."}))
    _off_the_page_thread(
        run_agent, agent_id=agent.id, owner=account.org, input_messages=[{"role": "user", "content": question}]
    )


def _reset(agent) -> None:
    with transaction.atomic():
        agent_messages_reset(agent=agent)


def _compare(page, dataset_id: str, a: str, b: str) -> None:
    page.goto(f"/evals/datasets/{dataset_id}/")
    page.select_option("#compare-form select[name=a]", a)
    page.select_option("#compare-form select[name=b]", b)
    page.click("#compare-form-start")
    expect(page.locator("#compare-list tr[data-verdict]")).to_have_count(len(FACTS))


def test_a_dataset_from_conversations_run_against_two_models_and_an_edited_prompt(signed_in, account, fake_llm):
    barista = make_agent(account.org, name="barista")
    page = signed_in.new_page()
    page.goto("/evals/")
    page.fill("#create-dataset input[name=name]", "kitchen")
    page.select_option("#create-dataset select[name=agent_id]", barista.id)
    page.click("#create-dataset button[type=submit]")
    expect(page.locator("#dataset-name")).to_have_text("kitchen")
    dataset = Dataset.objects.get(owner=account.org, tests_of__isnull=True)
    for n, (question, fact) in enumerate(FACTS, 1):
        _converse(barista, account, fake_llm, question, fact)
        page.click("#from-agent-form >> xpath=.. >> summary")
        page.select_option("#from-agent-form select[name=agent_id]", barista.id)
        page.click("#add-conversation")
        expect(page.locator("#cases-list tr[data-case]")).to_have_count(n)
        _off_the_page_thread(_reset, agent=barista)  # the next conversation starts afresh
    expect(page.locator("#cases-list tr[data-case]").last).to_contain_text("You like cocoa.")
    page.fill("#graders-form textarea[name=graders]", json.dumps(GRADERS))
    page.fill("#graders-form textarea[name=gate]", json.dumps({"metric_key": "answer", "op": "gte", "value": 0.8}))
    page.click("#graders-form button[type=submit]")
    expect(page.locator("#graders-form textarea[name=gate]")).to_contain_text('"metric_key": "answer"')

    fake_llm.responder = _answer
    page.fill("#run-name", "baseline")
    page.fill("#run-model-2", "openai/other")
    page.fill("#run-name-2", "other model")
    page.fill("#run-system-3", ONE_WORD)
    page.fill("#run-name-3", "one-word prompt")
    page.fill("#run-form input[name=concurrency]", "2")
    _shots(page, "dataset")
    page.click("#run-start")
    expect(page.locator("#experiments-live")).to_have_attribute("data-running", "no", timeout=RUN_S)
    rows = page.locator("#experiments-list tr[data-experiment]")
    expect(rows).to_have_count(3)
    expect(page.locator("#experiments-list")).to_contain_text("completed · passed")
    expect(page.locator("#experiments-list .badge.err")).to_have_count(2)
    runs = {e.name: e for e in Experiment.objects.filter(dataset=dataset).order_by("created_at")}
    assert set(runs) == {"baseline", "other model", "one-word prompt"}
    assert runs["other model"].model == "openai/other" and runs["one-word prompt"].overrides == {"system": ONE_WORD}
    _shots(page, "dataset-run")

    page.goto(f"/evals/experiments/{runs['baseline'].id}/")
    expect(page.locator("#experiment-status")).to_have_text("gate passed")
    expect(page.locator("#results-list .grade")).to_have_count(2 * len(FACTS))
    expect(page.locator("#results-list .run-link")).to_have_count(len(FACTS))
    expect(page.locator("#results-list")).to_contain_text("cocoa is missing")
    _shots(page, "experiment")

    _compare(page, dataset.id, runs["baseline"].id, runs["other model"].id)
    expect(page.locator("#compare-heads")).to_contain_text("other model")
    expect(page.locator('#compare-filter [data-verdict="worse"]')).to_have_text("regressions (3)")
    expect(page.locator('#compare-filter [data-verdict="better"]')).to_have_text("better (1)")
    better = page.locator("#compare-list tr[data-verdict=better]")
    expect(better).to_contain_text("What do I drink at night?")
    expect(better.locator("li[data-grader=answer]")).to_contain_text("0.0 → 1.0")
    expect(better.locator("li[data-grader=quality]")).to_contain_text("it says cocoa")
    _shots(page, "compare")
    page.click('#compare-filter [data-verdict="worse"]')
    worse = page.locator("#compare-list tr[data-verdict=worse]")
    expect(worse).to_have_count(3)
    for fact in ("apple", "almonds", "cumin"):
        expect(page.locator("#compare-list")).to_contain_text(f"output does not contain 'You like {fact}.'")
        expect(page.locator("#compare-list")).to_contain_text(f"{fact} is missing")
    expect(page.locator("#compare-deltas [data-delta=pass_rate]")).to_have_text("pass_rate -0.2")

    _compare(page, dataset.id, runs["baseline"].id, runs["one-word prompt"].id)
    expect(page.locator('#compare-filter [data-verdict="worse"]')).to_have_text("regressions (9)")
    tea = page.locator("#compare-list tr[data-verdict]").first
    expect(tea.locator("li[data-grader=answer]")).to_contain_text("1.0 → 0.0")
    expect(tea.locator("li[data-grader=quality]")).to_have_count(0)  # the judge still finds tea in "Tea"
    expect(tea).to_contain_text("You like tea.")
    expect(tea.locator("td").nth(2)).to_contain_text("Tea")
    expect(page.locator("#compare-list tr[data-verdict=better]")).to_have_count(0)
