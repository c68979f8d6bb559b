"""Evals through the API, `manage.py eval run` (gate exit code, JUnit) and Letta Evals' suite and JSONL files, with
the fake model as both the agent's model and the judge."""

import json
import xml.etree.ElementTree as ET

import pytest
from django.core.management import call_command

from core.models import Dataset
from tests.factories import ApiClient, make_agent
from tests.fake_llm import FakeLLM
from tests.helpers import until

pytestmark = pytest.mark.django_db(transaction=True)

SUITE = """\
name: drinks
description: What the user drinks
dataset: drinks.jsonl
target:
  kind: letta_agent
  agent_id: {agent_id}
  base_url: http://localhost:8283
  model_handles: [openai/fake-model]
graders:
  answer:
    kind: tool
    function: contains
    extractor: last_assistant
  quality:
    kind: model_judge
    prompt: "Question: {{input}} Expected: {{ground_truth}} Answer: {{submission}}"
    model: judge
    provider: openai
    extractor: last_assistant
gate:
  metric_key: answer
  metric: accuracy
  op: gte
  value: {value}
"""
DATASET = '{"input": "What do I drink?", "ground_truth": "tea"}\n{"input": ["Hi", "And later?"], "ground_truth": ["hello", "cocoa"]}\n'


def _suite(tmp_path, agent, value):
    path = tmp_path / "suite.yaml"
    path.write_text(SUITE.format(agent_id=agent.id, value=value))
    (tmp_path / "drinks.jsonl").write_text(DATASET)
    return path


def _script(fake_llm):
    fake_llm.by_model = {"judge": FakeLLM.text('{"score": 1, "rationale": "fine"}')}
    fake_llm.script(
        FakeLLM.tool("send_message", {"message": "Tea, as ever."}),
        FakeLLM.tool("send_message", {"message": "Hello!"}),
        FakeLLM.tool("send_message", {"message": "Coffee."}),
    )


def test_eval_run_exits_1_when_the_gate_fails_and_writes_junit(account, fake_llm, tmp_path, capsys):
    agent = make_agent(account.org)
    _script(fake_llm)
    out = tmp_path / "evals.xml"
    with pytest.raises(SystemExit) as exit_:
        call_command("eval", "run", str(_suite(tmp_path, agent, 1.0)), junit=str(out))
    assert exit_.value.code == 1
    printed = capsys.readouterr().out
    assert "PASS drinks" in printed and "FAIL drinks" in printed and "gate accuracy of answer = 0.5 gte 1.0" in printed
    suites = ET.parse(out).getroot()
    [suite] = suites.findall("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "1", "0")
    failure = suite.findall("testcase")[1].find("failure")
    assert failure.get("message") == "answer: score 0.0" and failure.text == "output does not contain 'cocoa'"


def test_eval_run_exits_0_when_the_gate_passes(account, fake_llm, tmp_path, capsys):
    agent = make_agent(account.org)
    _script(fake_llm)
    call_command("eval", "run", str(_suite(tmp_path, agent, 0.5)))  # no SystemExit: the gate passed
    assert "PASSED drinks" in capsys.readouterr().out
    dataset = Dataset.objects.get(name="drinks")
    assert [g["kind"] for g in dataset.graders] == ["contains", "rubric"]
    assert dataset.graders[1]["model"] == "openai/judge"


def test_datasets_and_experiments_over_the_api(api, account, other_account, fake_llm):
    agent = make_agent(account.org)
    graders = [{"name": "answer", "kind": "contains"}]
    dataset = api.post("/v1/evals/datasets", {"name": "drinks", "graders": graders, "agent_id": agent.id}).json()
    imported = api.post(f"/v1/evals/datasets/{dataset['id']}/import", {"jsonl": DATASET})
    assert imported.status_code == 200 and [c["turns"] for c in imported.json()] == [
        ["What do I drink?"],
        ["Hi", "And later?"],
    ]
    exported = api.get(f"/v1/evals/datasets/{dataset['id']}/export")
    rows = [json.loads(line) for line in exported.content.decode().splitlines()]
    assert [r["input"] for r in rows] == ["What do I drink?", ["Hi", "And later?"]]
    assert rows[1]["ground_truth"] == ["hello", "cocoa"]
    suite_text = api.get(f"/v1/evals/datasets/{dataset['id']}/suite").content.decode()
    assert "function: contains" in suite_text and f"agent_id: {agent.id}" in suite_text
    _script(fake_llm)
    started = api.post("/v1/evals/experiments", {"dataset_id": dataset["id"], "concurrency": 1})
    assert started.status_code == 200, started.content
    done = until(
        lambda: (e := api.get(f"/v1/evals/experiments/{started.json()['id']}").json())["status"] == "completed" and e
    )
    assert done["done"] == 2 and [r["passed"] for r in done["results"]] == [True, False]
    assert done["results"][0]["run_ids"] and done["aggregates"]["graders"]["answer"]["pass_rate"] == 0.5
    compared = api.get(f"/v1/evals/compare/{done['id']}/{done['id']}?only=same").json()
    assert len(compared["cases"]) == 2 and compared["counts"]["same"] == 2
    # bad input is a 4xx with its reason; another owner sees nothing
    for body, says in (
        ({"name": "x", "graders": [{"kind": "vibes"}]}, "a grader is an object with a kind"),
        ({"name": "x", "graders": [{"kind": "regex", "value": "("}]}, "bad regular expression"),
        ({"name": "x", "graders": [{"kind": "rubric", "prompt": "p"}]}, "judge's model handle"),
        ({"name": "x", "gate": {"op": "about", "value": 1}}, "gate.op"),
    ):
        r = api.post("/v1/evals/datasets", body)
        assert r.status_code in (400, 422) and says in r.content.decode(), (body, r.content)
    bad = api.post(f"/v1/evals/datasets/{dataset['id']}/import", {"jsonl": '{"input": "a"}\nnot json'})
    assert bad.status_code in (400, 422) and "Line 2 is not JSON" in bad.content.decode()
    listed = api.get(f"/v1/evals/datasets/{dataset['id']}/experiments").json()
    assert [e["id"] for e in listed] == [done["id"]] and "results" not in listed[0]
    other = ApiClient(other_account.token)
    assert other.get(f"/v1/evals/datasets/{dataset['id']}").status_code == 404
    assert other.get(f"/v1/evals/experiments/{done['id']}").status_code == 404
    assert api.delete(f"/v1/evals/datasets/{dataset['id']}").status_code == 200
    assert api.get(f"/v1/evals/experiments/{done['id']}").status_code == 404


def test_one_run_against_several_targets_side_by_side(api, account, fake_llm):
    agent = make_agent(account.org)
    dataset = api.post(
        "/v1/evals/datasets", {"name": "d", "graders": [{"name": "answer", "kind": "contains"}], "agent_id": agent.id}
    ).json()
    api.post(f"/v1/evals/datasets/{dataset['id']}/cases", [{"turns": ["What do I drink?"], "ground_truth": "tea"}])
    fake_llm.by_model = {"other": FakeLLM.tool("send_message", {"message": "Coffee."})}
    fake_llm.script(*(FakeLLM.tool("send_message", {"message": "Tea."}) for _ in range(2)))
    targets = [
        {"name": "as is"},
        {"model": "openai/other"},
        {"overrides": {"system": "Be brief.", "blocks": {"human": "Likes tea."}}},
    ]
    r = api.post(f"/v1/evals/datasets/{dataset['id']}/experiments", {"targets": targets, "concurrency": 1})
    assert r.status_code == 200, r.content
    started = r.json()
    assert [e["name"] for e in started] == [
        "as is",
        "d · openai/other",
        "d · openai/fake-model · prompt edited · human edited",
    ]
    done = [
        until(lambda i=e["id"]: (x := api.get(f"/v1/evals/experiments/{i}").json())["status"] == "completed" and x)
        for e in started
    ]
    assert [d["results"][0]["passed"] for d in done] == [True, False, True]
    compared = api.get(f"/v1/evals/compare/{done[0]['id']}/{done[1]['id']}").json()
    [case] = compared["cases"]
    assert case["verdict"] == "worse"
    assert case["changes"] == [{"grader": "answer", "a": 1.0, "b": 0.0, "reason": "output does not contain 'tea'"}]
    # all started or none: a bad target names itself and nothing is recorded
    before = len(api.get(f"/v1/evals/datasets/{dataset['id']}/experiments").json())
    bad = api.post(
        f"/v1/evals/datasets/{dataset['id']}/experiments",
        {"targets": [{}, {"agent_id": agent.id, "agent_version": 99}]},
    )
    assert bad.status_code == 404 and "99" in bad.content.decode()
    bad = api.post(f"/v1/evals/datasets/{dataset['id']}/experiments", {"targets": [{}, {"overrides": {"x": 1}}]})
    assert bad.status_code in (400, 422) and "Target 2" in bad.content.decode()
    assert api.post(f"/v1/evals/datasets/{dataset['id']}/experiments", {"targets": []}).status_code == 422
    assert len(api.get(f"/v1/evals/datasets/{dataset['id']}/experiments").json()) == before
