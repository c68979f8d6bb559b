"""Agent regression tests through every route: the API (background run, results), the CLI (exit code and JUnit
XML) and agent files; tests run on throwaway copies and never touch their agent."""

import json
import xml.etree.ElementTree as ET

import pytest
from django.core.management import call_command
from django.test import Client

from core.agents import agent_tests
from core.agents.agentfile.exporter import agentfile_export
from core.agents.agentfile.importer import ImportOptions, agentfile_import
from core.agents.agentfile.parse import parse_agent_file
from core.models import Agent, Experiment, Message, Run
from memory.models import Block
from tests.factories import make_agent
from tests.fake_llm import FakeLLM
from tests.helpers import until

pytestmark = pytest.mark.django_db(transaction=True)

TESTS = [
    {
        "name": "searches and answers about tea",
        "turns": ["What do I like?"],
        "expect": {
            "tools": {
                "calls": [
                    {"name": "conversation_search", "args": {"query": {"regex": "^te"}}},
                    {"name": "send_message"},
                ],
                "order": "sequence",
            },
            "reply": {"contains": "tea"},
            "stop_reason": "end_turn",
            "max_steps": 2,
        },
    },
    {
        "name": "stores the fact in archival memory",
        "turns": ["Remember that I like tea."],
        "expect": {"tools": {"calls": [{"name": "archival_memory_insert"}], "order": "set"}},
    },
    {
        "name": "remembers the coffee preference",
        "turns": ["I like coffee now."],
        "expect": {"blocks": [{"label": "human", "contains": "coffee"}]},
    },
]


def _script(fake_llm):
    """One answer per test, in the order they run: the first passes, the second never inserts, the third
    writes tea where coffee is expected."""
    fake_llm.script(
        FakeLLM.tool("conversation_search", {"query": "tea"}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "You like tea."}),
        FakeLLM.tool("send_message", {"message": "Sure."}),
        FakeLLM.tool("core_memory_append", {"label": "human", "content": "Likes tea."}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "Noted."}),
    )


@pytest.fixture
def agent(api, account, fake_llm):
    agent = make_agent(account.org, name="tested")
    for test in TESTS:
        r = api.post(f"/v1/agents/{agent.id}/tests", test)
        assert r.status_code == 200, r.content
    return Agent.objects.get(pk=agent.pk)


def _state(agent: Agent):
    agent.refresh_from_db()
    return (
        list(agent.message_ids),
        list(Message.objects.filter(agent=agent).values_list("id", flat=True)),
        list(Block.objects.filter(agentblock__agent=agent).values_list("id", "value", "version")),
        Run.objects.filter(agent=agent).count(),
        agent.model,
    )


def _check(results: list[dict]) -> None:
    passed, tools, block = results
    assert passed["passed"] and passed["failures"] == [] and passed["error"] is None
    assert not tools["passed"] and [f["expectation"] for f in tools["failures"]] == ["tools (set)"]
    assert tools["failures"][0]["missing"] == {"name": "archival_memory_insert"}
    assert [c["name"] for c in tools["failures"][0]["actual"]] == ["send_message"]
    assert not block["passed"] and [f["expectation"] for f in block["failures"]] == ["block human contains"]
    failure = block["failures"][0]
    assert failure["expected"] == "coffee" and failure["actual"].endswith("Likes tea.") and failure["step_id"]


def test_tests_run_over_the_api_on_copies_and_leave_the_agent_alone(api, agent, fake_llm):
    assert [t["name"] for t in api.get(f"/v1/agents/{agent.id}/tests").json()] == [t["name"] for t in TESTS]
    before, agents_before = _state(agent), Agent.objects.count()
    _script(fake_llm)
    started = api.post(f"/v1/agents/{agent.id}/tests/run", {})
    assert started.status_code == 200, started.content
    run_id = started.json()["id"]
    done = until(
        lambda: (
            (r := api.get(f"/v1/agents/{agent.id}/tests/results/{run_id}").json())["status"] in ("passed", "failed")
            and r
        ),
        what="the test run",
    )
    assert done["status"] == "failed" and (done["passed"], done["failed"]) == (1, 2)
    _check(done["results"])
    assert _state(agent) == before  # nothing of the agent changed
    assert Agent.objects.count() == agents_before  # the copies are gone
    assert not Block.objects.filter(value__contains="Likes tea.").exists()
    run = Experiment.objects.get(pk=run_id, dataset__tests_of=agent)  # a test run is an experiment of the tests
    assert run.completed_at is not None and not run.keep_copies
    assert [(r.name, r.passed, r.copy_agent_id) for r in run.results.order_by("position")] == [
        (t["name"], r["passed"], "") for t, r in zip(TESTS, done["results"], strict=True)
    ]


def test_a_kept_copy_can_be_inspected_and_a_model_can_be_chosen(api, agent, fake_llm):
    fake_llm.by_model = {"other-model": FakeLLM.tool("send_message", {"message": "tea from the other model"})}
    only = api.get(f"/v1/agents/{agent.id}/tests").json()[1]["id"]
    run = api.post(
        f"/v1/agents/{agent.id}/tests/run", {"test_ids": [only], "model": "openai/other-model", "keep": True}
    ).json()
    done = until(
        lambda: (
            (r := api.get(f"/v1/agents/{agent.id}/tests/results/{run['id']}").json())["status"] in ("passed", "failed")
            and r
        )
    )
    [result] = done["results"]
    kept = Agent.objects.get(pk=result["copy_agent_id"])
    assert kept.model == "openai/other-model" and kept.metadata["agent_test_copy"]["agent_id"] == agent.id
    assert Message.objects.filter(agent=kept, text__contains="tea from the other model").exists()


def test_bad_tests_are_refused(api, agent, other_account):
    base = {"name": "x", "turns": ["hi"]}
    for body, says in (
        ({**base, "expect": {}}, "at least one expectation"),
        ({**base, "expect": {"reply": {"matches": "("}}}, "bad regular expression"),
        ({**base, "expect": {"tools": {"calls": []}}}, "non-empty list of calls"),
        ({**base, "expect": {"vibes": 1}}, "unknown expectation"),
        ({**base, "turns": ["  "], "expect": {"stop_reason": "end_turn"}}, "non-empty string"),
    ):
        r = api.post(f"/v1/agents/{agent.id}/tests", body)
        assert r.status_code == 422 and says in r.content.decode(), (body, r.content)
    assert len(api.get(f"/v1/agents/{agent.id}/tests").json()) == 3
    from tests.factories import ApiClient

    assert ApiClient(other_account.token).get(f"/v1/agents/{agent.id}/tests").status_code == 404


def test_the_cli_exits_non_zero_and_writes_junit(agent, fake_llm, tmp_path, capsys):
    _script(fake_llm)
    before = _state(agent)
    out = tmp_path / "agents.xml"
    with pytest.raises(SystemExit) as exit_:
        call_command("agent_test", agent.id, junit_xml=str(out))
    assert exit_.value.code == 1
    printed = capsys.readouterr().out
    assert "PASS tested :: searches and answers about tea" in printed and "1 passed, 2 failed" in printed
    suite = ET.parse(out).getroot().find("testsuite")
    assert suite.get("tests") == "3" and suite.get("failures") == "2"
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert cases["searches and answers about tea"].find("failure") is None
    assert "tools (set)" in cases["stores the fact in archival memory"].find("failure").get("message")
    assert "coffee" in cases["remembers the coffee preference"].find("failure").get("message")
    assert _state(agent) == before


def test_the_cli_records_its_run_as_the_ide_shows_it(agent, fake_llm, tmp_path):
    _script(fake_llm)
    with pytest.raises(SystemExit):
        call_command("agent_test", agent.id, junit_xml=str(tmp_path / "out.xml"))
    [run] = Experiment.objects.filter(dataset__tests_of=agent)
    out = agent_tests.test_run_out(run)
    assert (out["status"], out["passed"], out["failed"]) == ("failed", 1, 2)
    assert all(r["copy_agent_id"] is None for r in out["results"])  # not kept: the copies are gone


def test_a_test_run_is_an_experiment_of_the_tests_dataset(api, account, agent, fake_llm):
    """A run of the tests is listed with the dataset's experiments, one result a test; a test deleted before its
    turn comes is that test's error, its id kept."""
    from core.evals import agent_tests as test_runs

    _script(fake_llm)
    first, second, third = agent_tests.tests_list(agent=agent)
    run = test_runs.tests_start(owner=agent.owner, agent=agent, test_ids=[first["id"], third["id"]], queued=False)
    agent_tests.test_delete(agent=agent, test_id=third["id"])
    assert test_runs.tests_execute(test_run_id=run.id) == "failed"
    out = api.get(f"/v1/agents/{agent.id}/tests/results/{run.id}").json()
    assert out["test_ids"] == [first["id"], third["id"]]
    assert [(r["test_id"], r["passed"], r["error"]) for r in out["results"]] == [
        (first["id"], True, None),
        (third["id"], False, "the case was deleted"),
    ]
    dataset = agent.tests_dataset
    listed = api.get(f"/v1/evals/datasets/{dataset.id}/experiments").json()
    assert [(e["id"], e["status"], e["total"], e["done"]) for e in listed] == [(run.id, "completed", 2, 2)]
    assert listed[0]["gate_passed"] is False
    web = Client()
    web.force_login(account.user)
    page = web.get(f"/evals/experiments/{run.id}/")  # the Evals page shows it as any experiment
    assert page.status_code == 200 and first["name"] in page.content.decode()


def test_tests_travel_in_agent_files(agent):
    data = agentfile_export(agent=agent)
    result = agentfile_import(
        owner=agent.owner, parsed=parse_agent_file(json.dumps(data).encode()), options=ImportOptions()
    )
    imported = Agent.objects.get(id=result.agent_ids[0])
    assert [t["name"] for t in data["agents"][0]["metadata"]["agent_tests"]] == [t["name"] for t in TESTS]
    mine, theirs = agent_tests.tests_list(agent=agent), agent_tests.tests_list(agent=imported)
    assert [{**t, "id": None} for t in theirs] == [{**t, "id": None} for t in mine]  # the same tests, new ids
    assert not {t["id"] for t in theirs} & {t["id"] for t in mine} and "agent_tests" not in imported.metadata


def _results(api, agent, run_id):
    return until(
        lambda: (
            (r := api.get(f"/v1/agents/{agent.id}/tests/results/{run_id}").json())["status"] in ("passed", "failed")
            and r
        ),
        what="the test run",
    )


def test_a_test_pins_an_approval_flow_expecting_the_request_and_giving_the_answer(api, account, fake_llm):
    agent = make_agent(
        account.org, name="careful", tool_rules=[{"type": "requires_approval", "tool_name": "archival_memory_insert"}]
    )
    flows = [
        {
            "name": "asks before storing, stores when approved",
            "turns": ["Remember that I like tea.", "/approve"],
            "expect": {"approvals": {"tools": ["archival_memory_insert"]}, "archival": {"matches": "tea"}},
        },
        {
            "name": "denied, it says so",
            "turns": ["Remember that I like tea.", "/deny not today"],
            "expect": {"approvals": {"tools": ["archival_memory_insert"]}, "reply": {"contains": "won't"}},
        },
        {
            "name": "an answer with nothing waiting fails with its reason",
            "turns": ["hello", "/approve"],
            "expect": {"stop_reason": "end_turn"},
        },
    ]
    for test in flows:
        assert api.post(f"/v1/agents/{agent.id}/tests", test).status_code == 200
    bad = api.post(f"/v1/agents/{agent.id}/tests", {**flows[0], "expect": {"approvals": {"tools": "x"}}})
    assert bad.status_code == 422 and "approvals" in bad.json()["detail"]
    fake_llm.script(
        FakeLLM.tool("archival_memory_insert", {"content": "likes tea"}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "Stored."}),
        FakeLLM.tool("archival_memory_insert", {"content": "likes tea"}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "I won't store it then."}),
        FakeLLM.tool("send_message", {"message": "Hi."}),
    )
    run_id = api.post(f"/v1/agents/{agent.id}/tests/run", {}).json()["id"]
    approved, denied, stray = _results(api, agent, run_id)["results"]
    assert approved["passed"], approved
    assert denied["passed"], denied
    seen = [json.loads(m["content"]) for r in fake_llm.chat_requests for m in r["messages"] if m["role"] == "tool"]
    assert any(s["message"].endswith("User reason: not today") for s in seen)
    assert not stray["passed"] and "waits for none" in stray["error"]
