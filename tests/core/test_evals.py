"""Evals end to end with the fake model as both the agent's model and the judge: a dataset run as an experiment on
throwaway copies, deterministic and rubric graders, a malformed judge answer shown as a grader error, the gate, the
compare view's regressions, `manage.py eval run` with its exit code and JUnit, and Letta Evals' suite files."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.agents import versions
from core.evals import datasets, experiments
from core.evals.compare import experiments_compare
from core.models import Agent, AgentVersion, Experiment, Message, ProviderConfig, Run
from tests.factories import make_agent
from tests.fake_llm import FakeLLM
from tests.helpers import until

pytestmark = pytest.mark.django_db(transaction=True)

GOOD_JUDGE = FakeLLM.text('{"score": 0.9, "rationale": "It names the tea."}')
RUBRIC = "The user asked: {input}\nExpected: {ground_truth}\nAnswer: {submission}\nScore how well it answers."


def _dataset(org, agent, *, graders=None, gate=None):
    graders = graders or [
        {"name": "mentions", "kind": "contains"},
        {"name": "quality", "kind": "rubric", "model": "openai/judge", "prompt": RUBRIC},
    ]
    dataset = datasets.dataset_create(
        owner=org, name="tea", graders=graders, gate=gate or {"metric_key": "mentions", "op": "gte", "value": 1.0}
    )
    datasets.cases_add(
        dataset=dataset,
        cases=[
            {"turns": ["What do I drink?"], "ground_truth": "tea"},
            {"turns": ["And in the evening?"], "ground_truth": "cocoa"},
        ],
    )
    return dataset


def _finished(org, experiment_id):
    return until(
        lambda: (e := Experiment.objects.get(pk=experiment_id)).status == "completed" and e,
        what="the experiment",
    )


def _state(agent):
    agent.refresh_from_db()
    return list(agent.message_ids), Message.objects.filter(agent=agent).count(), agent.model, agent.system


def test_an_experiment_grades_each_case_on_a_copy_and_the_rubric_is_judged(account, fake_llm):
    org = account.org
    agent = make_agent(org, name="barista")
    before = _state(agent)
    fake_llm.by_model = {"judge": GOOD_JUDGE}
    fake_llm.script(
        FakeLLM.tool("send_message", {"message": "You drink tea."}),
        FakeLLM.tool("send_message", {"message": "Coffee, always."}),
    )
    dataset = _dataset(org, agent)
    started = experiments.experiment_start(owner=org, dataset=dataset, agent=agent, concurrency=1)
    done = _finished(org, started.id)
    first, second = experiments.results_list(experiment=done)
    assert first.output == "You drink tea." and first.passed and first.run_ids
    assert [(s["grader"], s["score"], s["passed"]) for s in first.scores] == [
        ("mentions", 1.0, True),
        ("quality", 0.9, True),
    ]
    assert first.scores[1]["reason"] == "It names the tea."
    judged = [r for r in fake_llm.chat_requests if r.get("model") == "judge"]
    assert "Answer: You drink tea." in judged[0]["messages"][0]["content"]
    assert "Expected: tea" in judged[0]["messages"][0]["content"]
    assert not second.passed and second.scores[0]["reason"] == "output does not contain 'cocoa'"
    assert second.scores[0]["passed"] is False
    figures = done.aggregates
    assert figures["graders"]["mentions"]["avg_score"] == 0.5 and figures["graders"]["quality"]["avg_score"] == 0.9
    assert figures["gate"]["actual"] == 0.5 and figures["gate"]["passed"] is False and done.gate_passed is False
    assert figures["prompt_tokens"] > 0 and figures["latency_ms"]["max"] > 0
    # the agent under edit is untouched; each case's runs are on a kept copy marked as the eval's
    assert _state(agent) == before
    copy = Agent.objects.get(pk=first.copy_agent_id)
    assert copy.metadata["eval_copy"]["experiment_id"] == done.id
    assert Message.objects.filter(agent=copy, run_id=first.run_ids[0]).exists()
    # its one version, written from the agent's latest when copied, is what recording it anew would write
    [version] = AgentVersion.objects.filter(agent=copy)
    assert version.content_hash == versions.definition_hash(versions.agent_definition(agent=copy))
    assert Run.objects.get(pk=first.run_ids[0]).agent_version_id == version.pk
    experiments.experiment_delete(experiment=done)
    assert not Agent.objects.filter(pk=copy.pk).exists() and Agent.objects.filter(pk=agent.pk).exists()


def test_an_experiment_resolves_its_judge_once_not_once_a_case(account, fake_llm):
    """The owner's providers are read for the judge at its first case only (the agent's runs read theirs apart)."""
    agent = make_agent(account.org, name="barista")
    fake_llm.by_model = {"judge": GOOD_JUDGE}
    dataset = _dataset(account.org, agent)
    datasets.cases_add(dataset=dataset, cases=[{"turns": ["Once more?"], "ground_truth": "tea"}])
    started = experiments.experiment_start(owner=account.org, dataset=dataset, agent=agent, concurrency=1, queued=False)
    table = ProviderConfig._meta.db_table
    with CaptureQueriesContext(connection) as queries:
        assert experiments.experiment_execute(experiment_id=started.id) == "completed"
    assert sum(1 for q in queries if f'FROM "{table}"' in q["sql"]) == 1
    scores = [r.scores[1] for r in experiments.results_list(experiment=Experiment.objects.get(pk=started.id))]
    assert [(s["grader"], s["score"]) for s in scores] == [("quality", 0.9)] * 3


def test_a_malformed_judge_answer_is_a_grader_error_not_a_zero(account, fake_llm):
    org = account.org
    agent = make_agent(org)
    fake_llm.by_model = {"sloppy": FakeLLM.text("Looks great to me!")}
    graders = [{"name": "quality", "kind": "rubric", "model": "openai/sloppy", "prompt": RUBRIC}]
    dataset = _dataset(org, agent, graders=graders, gate={"metric_key": "quality", "op": "gte", "value": 0.5})
    done = _finished(org, experiments.experiment_start(owner=org, dataset=dataset, agent=agent, concurrency=2).id)
    for result in experiments.results_list(experiment=done):
        [grade] = result.scores
        assert grade["score"] is None and grade["passed"] is None
        assert grade["error"].startswith("malformed judge answer: the judge's answer is not JSON")
        assert result.passed is False
    assert done.aggregates["graders"]["quality"]["errors"] == 2 and done.gate_passed is False


def test_compare_shows_regressions_case_by_case(account, fake_llm):
    org = account.org
    agent = make_agent(org)
    dataset = _dataset(org, agent, graders=[{"name": "mentions", "kind": "contains"}])
    fake_llm.script(
        FakeLLM.tool("send_message", {"message": "tea"}), FakeLLM.tool("send_message", {"message": "coffee"})
    )
    a = _finished(org, experiments.experiment_start(owner=org, dataset=dataset, agent=agent, concurrency=1).id)
    fake_llm.by_model = {"other": FakeLLM.tool("send_message", {"message": "cocoa"})}
    b = experiments.experiment_start(owner=org, dataset=dataset, agent=agent, model="openai/other", concurrency=1)
    b = _finished(org, b.id)
    compared = experiments_compare(a=a, b=b)
    assert [c.verdict for c in compared.cases] == ["worse", "better"]
    assert compared.counts["worse"] == 1 and compared.deltas["pass_rate"] == 0.0
    [regression] = experiments_compare(a=a, b=b, only="worse").cases
    assert (regression.a.output, regression.b.output) == ("tea", "cocoa")
    assert regression.b.scores[0]["reason"] == "output does not contain 'tea'"


def test_an_agent_test_becomes_a_case_with_its_expectations_as_the_grader(api, account, fake_llm):
    org = account.org
    agent = make_agent(org)
    test = {"name": "greets", "turns": ["hi"], "expect": {"reply": {"contains": "hello"}, "stop_reason": "end_turn"}}
    assert api.post(f"/v1/agents/{agent.id}/tests", test).status_code == 200
    dataset = datasets.dataset_create(owner=org, name="from tests")
    [case] = datasets.cases_from_agent_tests(dataset=dataset, agent=Agent.objects.get(pk=agent.pk))
    assert case.graders[0]["kind"] == "expect" and case.start == {"agent_id": agent.id}
    fake_llm.script(FakeLLM.tool("send_message", {"message": "goodbye"}))
    done = _finished(org, experiments.experiment_start(owner=org, dataset=dataset, concurrency=1).id)
    [result] = experiments.results_list(experiment=done)
    assert result.passed is False and "reply contains: expected 'hello', got 'goodbye'" in result.scores[0]["reason"]


def test_a_cancelled_experiment_runs_no_more_cases(api, account, fake_llm):
    org = account.org
    agent = make_agent(org)
    dataset = _dataset(org, agent, graders=[{"name": "mentions", "kind": "contains"}])
    fake_llm.script(FakeLLM.tool("send_message", {"message": "tea"}))
    experiment = experiments.experiment_start(owner=org, dataset=dataset, agent=agent, queued=False)
    first, second = experiments.results_list(experiment=experiment)
    experiments.case_execute(experiment=experiment, result=first)
    cancelled = api.post(f"/v1/evals/experiments/{experiment.id}/cancel", {})
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert experiments.experiment_execute(experiment_id=experiment.id) == "cancelled"
    experiments.case_execute(experiment=experiment, result=second)  # a worker reaching it now leaves it
    experiment.refresh_from_db()
    assert experiment.status == "cancelled" and experiment.aggregates["done"] == 1
    assert [r.status for r in experiments.results_list(experiment=experiment)] == ["done", "pending"]
    again = api.post(f"/v1/evals/experiments/{experiment.id}/cancel", {})
    assert again.status_code == 422 and "already ended" in again.content.decode()
