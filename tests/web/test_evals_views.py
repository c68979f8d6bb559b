"""The Evals pages: a dataset made in the IDE (a case typed in, one from a conversation, the agent's tests), an
experiment started and followed to its results with grader reasons and debugger links, the compare view filtered to
regressions, inline errors, escaping, and another owner's dataset is a 404."""

import pytest
from django.test import Client

from core.evals import datasets
from core.models import Dataset, Experiment, Step
from tests.factories import make_agent
from tests.fake_llm import FakeLLM
from tests.helpers import until

pytestmark = pytest.mark.django_db(transaction=True)


def _finished(web, experiment_id):
    until(lambda: Experiment.objects.get(pk=experiment_id).status == "completed", what="the experiment")
    return web.get(f"/evals/experiments/{experiment_id}/").content.decode()


def test_a_dataset_is_built_run_twice_and_compared_in_the_ide(web, account, fake_llm):
    agent = make_agent(account.org, name="barista")
    page = web.post("/evals/new/", {"name": "drinks <b>", "agent_id": agent.id})
    dataset = Dataset.objects.get(owner=account.org)
    assert page.status_code == 302 and page["Location"] == f"/evals/datasets/{dataset.id}/"
    for turns, truth in (("What do I drink?", "tea"), ("Hi\n---\nAnd later?", "cocoa")):
        assert (
            web.post(f"/evals/datasets/{dataset.id}/cases/", {"turns": turns, "ground_truth": truth}).status_code == 302
        )
    shown = web.get(f"/evals/datasets/{dataset.id}/").content.decode()
    assert "drinks &lt;b&gt;" in shown and "› And later?" in shown and 'id="run-start">Run 2 cases' in shown
    fake_llm.script(
        FakeLLM.tool("send_message", {"message": "Tea, as ever."}),
        FakeLLM.tool("send_message", {"message": "Hello!"}),
        FakeLLM.tool("send_message", {"message": "Coffee."}),
    )
    started = web.post(f"/evals/datasets/{dataset.id}/run/", {"concurrency": "1"})
    first = Experiment.objects.get(dataset=dataset)
    assert started["Location"] == f"/evals/experiments/{first.id}/"
    body = _finished(web, first.id)
    assert "gate failed" in body and "1/2" in body and "output does not contain &#x27;cocoa&#x27;" in body
    assert f"/agents/{first.results.get(position=0).copy_agent_id}/?step=step-" in body
    listed = web.get("/").content.decode()  # the agents page hides the cases' copies
    assert agent.id in listed and first.results.get(position=0).copy_agent_id not in listed
    fake_llm.by_model = {"other": FakeLLM.tool("send_message", {"message": "cocoa, and tea"})}
    web.post(f"/evals/datasets/{dataset.id}/run/", {"model": "openai/other", "concurrency": "2"})
    second = Experiment.objects.filter(dataset=dataset).exclude(pk=first.pk).get()
    assert "gate passed" in _finished(web, second.id)
    compared = web.get(f"/evals/compare/?a={first.id}&b={second.id}").content.decode()
    assert 'data-verdict="better"' in compared and "better (1)" in compared and "Coffee." in compared
    regressions = web.get(f"/evals/compare/?a={second.id}&b={first.id}&only=worse").content.decode()
    assert regressions.count('<tr data-verdict="worse">') == 1 and "regressions (1)" in regressions


def test_cases_from_a_conversation_and_from_tests(web, api, account, fake_llm):
    agent = make_agent(account.org)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Hello there."}))
    sent = api.post(f"/v1/agents/{agent.id}/messages", {"messages": [{"role": "user", "content": "Say hello"}]})
    assert sent.status_code == 200, sent.content
    test = {"name": "greets", "turns": ["hi"], "expect": {"reply": {"contains": "hello"}}}
    assert api.post(f"/v1/agents/{agent.id}/tests", test).status_code == 200
    dataset = datasets.dataset_create(owner=account.org, name="d")
    web.post(f"/evals/datasets/{dataset.id}/from-agent/", {"agent_id": agent.id, "source": "conversation"})
    web.post(f"/evals/datasets/{dataset.id}/from-agent/", {"agent_id": agent.id, "source": "tests"})
    conversation, tested = datasets.cases_list(dataset=dataset)
    assert conversation.turns == ["Say hello"] and conversation.ground_truth == "Hello there."
    assert tested.graders[0]["expect"] == {"reply": {"contains": "hello"}}


def test_bad_input_is_shown_and_other_owners_get_404(web, account, other_account):
    dataset = datasets.dataset_create(owner=account.org, name="d")
    bad = web.post(f"/evals/datasets/{dataset.id}/settings/", {"graders": '[{"kind": "regex", "value": "("}]'})
    assert bad.status_code == 400 and "bad regular expression" in bad.content.decode()
    empty = web.post(f"/evals/datasets/{dataset.id}/run/", {"concurrency": "1"})
    assert empty.status_code == 400 and "no cases to run" in empty.content.decode()
    other = Client()
    other.force_login(other_account.user)
    assert other.get(f"/evals/datasets/{dataset.id}/").status_code == 404
    assert other.post(f"/evals/datasets/{dataset.id}/delete/", {"confirm": "1"}).status_code == 404
    assert Dataset.objects.filter(pk=dataset.pk).exists()


def test_runs_marked_with_feedback_become_cases(web, api, account, fake_llm):
    agent = make_agent(account.org)
    for question, answer in (("Say hello", "Hello there."), ("Say bye", "Whatever.")):
        fake_llm.script(FakeLLM.tool("send_message", {"message": answer}))
        api.post(f"/v1/agents/{agent.id}/messages", {"messages": [{"role": "user", "content": question}]})
    liked, disliked = Step.objects.filter(agent=agent).order_by("created_at")
    assert api.patch(f"/v1/steps/{liked.id}/feedback", {"feedback": "positive"}).status_code == 200
    marked = api.patch(f"/v1/steps/{disliked.id}/feedback", {"feedback": "negative", "comment": "rude"})
    assert marked.status_code == 200, marked.content
    dataset = datasets.dataset_create(owner=account.org, name="d")
    web.post(f"/evals/datasets/{dataset.id}/from-agent/", {"agent_id": agent.id, "source": "feedback"})
    good, bad = datasets.cases_list(dataset=dataset)
    assert (good.name, good.turns, good.ground_truth) == ("👍 Say hello", ["Say hello"], "Hello there.")
    assert (bad.name, bad.ground_truth, bad.rubric_vars) == ("👎 Say bye", None, {"feedback": "rude"})
    only = api.post(
        f"/v1/evals/datasets/{dataset.id}/cases/from-feedback", {"agent_id": agent.id, "feedback": "negative"}
    )
    assert only.status_code == 200 and [c["name"] for c in only.json()] == ["👎 Say bye"]
