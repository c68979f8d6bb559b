"""Agent versions: every kind of definition change makes one (with its author), no-op saves make none; diff,
restore (block values untouched unless asked), runs recorded against their version, history through agent files."""

import json

import pytest
from django.test import Client

from core.accounts import api_token_create
from core.agents import agent_tests
from core.agents.agentfile.exporter import agentfile_export
from core.agents.agentfile.importer import agentfile_import
from core.agents.agentfile.parse import parse_agent_file
from core.agents.services import agent_update
from core.models import Agent, AgentVersion, Experiment, Run, ToolVersion
from memory.models import Block
from tests.factories import ApiClient, make_agent
from tests.fake_llm import FakeLLM
from tests.helpers import until
from tools import services as tool_services
from tools.models import Tool

pytestmark = pytest.mark.django_db

SOURCE_V1 = 'def shout(text: str) -> str:\n    """Shout it.\n\n    Args:\n        text: what to shout\n    """\n    return text.upper()\n'
SOURCE_V2 = SOURCE_V1.replace("text.upper()", "text.upper() + '!'")


@pytest.fixture
def agent(account):
    return make_agent(account.org, name="Ada")


def _versions(agent):
    return list(AgentVersion.objects.filter(agent=agent).order_by("number"))


def _latest(agent):
    return AgentVersion.objects.filter(agent=agent).order_by("-number").first()


def test_create_makes_version_one_and_a_noop_save_makes_none(api, agent):
    [v1] = _versions(agent)
    assert (v1.number, v1.author_kind, v1.message) == (1, "system", "created")
    assert v1.definition["name"] == "Ada" and "send_message" in [t["name"] for t in v1.definition["tools"]]
    assert [b["label"] for b in v1.blocks] == ["persona", "human"]
    assert "secrets" not in v1.definition
    r = api.patch(f"/v1/agents/{agent.id}", {"name": "Ada", "system": agent.system})
    assert r.status_code == 200, r.content
    assert len(_versions(agent)) == 1


def test_api_change_is_authored_by_the_token_with_its_message(api, account, agent):
    r = api.patch(f"/v1/agents/{agent.id}", {"system": "Be terse.", "version_message": "shorter answers"})
    assert r.status_code == 200, r.content
    v2 = _latest(agent)
    assert (v2.number, v2.author_kind, v2.author, v2.message) == (2, "token", "test", "shorter answers")
    assert v2.definition["system"] == "Be terse."
    created = api.post("/v1/agents/", {"name": "Bo", "model": "openai/fake-model", "memory_blocks": []})
    assert created.status_code in (200, 201), created.content
    [first] = _versions(Agent.objects.get(id=created.json()["id"]))
    assert (first.author_kind, first.author) == ("token", "test")


def test_ide_settings_save_is_authored_by_the_signed_in_person(account, agent):
    web = Client()
    web.force_login(account.user)
    data = {
        "name": "Ada",
        "model": agent.model,
        "system": "From the IDE.",
        "temperature": "0.5",
        "max_steps": "9",
        "context_window_limit": "8000",
        "tags": "x",
    }
    r = web.post(f"/agents/{agent.id}/settings/", data, HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and b"Saved." in r.content
    v2 = _latest(agent)
    assert (v2.number, v2.author_kind, v2.author) == (2, "user", "alice")
    assert v2.definition["tags"] == ["x"] and v2.definition["max_steps"] == 9
    assert v2.definition["model_settings"]["temperature"] == 0.5


def test_an_agents_own_tool_token_is_authored_as_the_agent(account, agent):
    _, raw = api_token_create(user=account.user, org=account.org, name=f"tool run for {agent.id}", agent_id=agent.id)
    r = ApiClient(raw).patch(f"/v1/agents/{agent.id}", {"tags": ["self-tagged"]})
    assert r.status_code == 200, r.content
    v2 = _latest(agent)
    assert (v2.author_kind, v2.author, v2.definition["tags"]) == ("agent", f"tool run for {agent.id}", ["self-tagged"])


def test_tool_attach_source_update_and_detach_each_make_a_version(api, account, agent):
    tool = tool_services.tool_create(owner=account.org, source_code=SOURCE_V1)
    assert api.patch(f"/v1/agents/{agent.id}/tools/attach/{tool.id}").status_code == 200
    attached = _latest(agent)
    entry = next(t for t in attached.definition["tools"] if t["name"] == "shout")
    assert (attached.number, attached.message, entry["tool_version"]) == (2, "attached shout", 1)
    assert entry["source_code"] == SOURCE_V1
    r = api.patch(f"/v1/tools/{tool.id}", {"source_code": SOURCE_V2})
    assert r.status_code == 200, r.content
    assert list(ToolVersion.objects.filter(tool=tool).values_list("number", flat=True).order_by("number")) == [1, 2]
    changed = _latest(agent)
    assert changed.number == 3 and changed.author_kind == "token"
    assert next(t for t in changed.definition["tools"] if t["name"] == "shout")["tool_version"] == 2
    diff = api.get(f"/v1/agents/{agent.id}/versions/3/diff").json()
    [change] = diff["changes"]
    assert change["field"] == "tools.shout" and change["change"] == "code" and "source_code" in change["fields"]
    assert "-    return text.upper()" in change["diff"] and "+    return text.upper() + '!'" in change["diff"]
    assert api.patch(f"/v1/agents/{agent.id}/tools/detach/{tool.id}").status_code == 200
    assert _latest(agent).number == 4 and "shout" not in [t["name"] for t in _latest(agent).definition["tools"]]


def test_deleting_a_tool_versions_the_agents_that_had_it(account, agent):
    tool = tool_services.tool_create(owner=account.org, source_code=SOURCE_V1)
    tool_services.tool_attach(agent=agent, tool=tool)
    tool_services.tool_delete(tool=tool)
    latest = _latest(agent)
    assert latest.number == 3 and latest.message == "tool shout deleted"
    assert "shout" not in [t["name"] for t in latest.definition["tools"]]


def test_list_get_and_diff_through_the_api(api, agent):
    api.patch(f"/v1/agents/{agent.id}", {"system": "Line one.\nLine two.", "model": "openai/other", "tags": ["t"]})
    listed = api.get(f"/v1/agents/{agent.id}/versions").json()
    assert [v["number"] for v in listed] == [2, 1]
    one = api.get(f"/v1/agents/{agent.id}/versions/1").json()
    assert one["definition"]["model"] == "openai/fake-model" and one["message"] == "created"
    diff = api.get(f"/v1/agents/{agent.id}/versions/2/diff?against=1").json()
    by_field = {c["field"]: c for c in diff["changes"]}
    assert set(by_field) == {"system", "model", "tags"}
    assert by_field["model"]["before"] == "openai/fake-model" and by_field["model"]["after"] == "openai/other"
    assert "+Line one." in by_field["system"]["diff"] and by_field["system"]["diff"][0].startswith("--- system@v1")
    backwards = api.get(f"/v1/agents/{agent.id}/versions/1/diff?against=2").json()
    assert {c["field"]: c["after"] for c in backwards["changes"]}["model"] == "openai/fake-model"


def test_unknown_version_and_bad_against_are_clear_errors(api, other_account, agent):
    r = api.get(f"/v1/agents/{agent.id}/versions/9")
    assert r.status_code == 404 and "no version 9" in r.json()["detail"]
    r = api.get(f"/v1/agents/{agent.id}/versions/1/diff?against=-1")
    assert r.status_code == 422 and "against" in r.json()["detail"]
    assert api.post(f"/v1/agents/{agent.id}/versions/7/restore", {}).status_code == 404
    assert len(_versions(agent)) == 1
    assert ApiClient(other_account.token).get(f"/v1/agents/{agent.id}/versions").status_code == 404


def test_restore_makes_a_new_equal_version_and_leaves_block_values_alone(api, account, agent):
    tool = tool_services.tool_create(owner=account.org, source_code=SOURCE_V1)
    tool_services.tool_attach(agent=agent, tool=tool)  # v2: the version to go back to
    other = make_agent(account.org, name="Bo", tool_ids=[tool.id])
    api.patch(f"/v1/agents/{agent.id}", {"system": "Changed.", "tags": ["new"]})  # v3
    tool_services.tool_update(tool=tool, changes={"source_code": SOURCE_V2})  # v4
    block = Block.objects.get(agentblock__agent=agent, label="human")
    assert api.patch(f"/v1/blocks/{block.id}", {"value": "The user's name is Bob."}).status_code == 200
    r = api.post(f"/v1/agents/{agent.id}/versions/2/restore", {"message": "back to Tuesday"})
    assert r.status_code == 200, r.content
    body = r.json()
    assert (body["number"], body["restored_from"], body["message"]) == (5, 2, "back to Tuesday")
    v2, v5 = AgentVersion.objects.get(agent=agent, number=2), AgentVersion.objects.get(agent=agent, number=5)
    assert v5.content_hash == v2.content_hash
    agent.refresh_from_db()
    tool.refresh_from_db()
    assert agent.system == v2.definition["system"] and tool.source_code == SOURCE_V1
    assert Block.objects.get(pk=block.pk).value == "The user's name is Bob."
    assert api.get(f"/v1/agents/{agent.id}/versions/5/diff?against=2").json()["changes"] == []
    assert [v.message for v in _versions(other)] == [
        "created",
        "tool shout changed",
        "tool shout restored with agent Ada v2",
    ]
    assert _latest(other).definition["tools"][-1]["tool_version"] == 3  # v1's code, as a new tool version


def test_restore_sets_block_values_back_when_asked(api, agent):
    block = Block.objects.get(agentblock__agent=agent, label="human")
    api.patch(f"/v1/blocks/{block.id}", {"value": "Changed."})
    api.patch(f"/v1/agents/{agent.id}", {"system": "Other."})
    r = api.post(f"/v1/agents/{agent.id}/versions/1/restore", {"restore_blocks": True})
    assert r.status_code == 200, r.content
    assert Block.objects.get(pk=block.pk).value == "The user's name is Alice."


def test_restore_keeps_the_agents_tests(api, agent):
    test = {"name": "greets", "turns": ["hi"], "expect": {"reply": {"contains": "hi"}}}
    assert api.post(f"/v1/agents/{agent.id}/tests", test).status_code == 200
    assert len(_versions(agent)) == 1  # a test is the agent's data, not its definition
    api.patch(f"/v1/agents/{agent.id}", {"system": "Other."})
    api.post(f"/v1/agents/{agent.id}/versions/1/restore", {})
    assert [t["name"] for t in api.get(f"/v1/agents/{agent.id}/tests").json()] == ["greets"]


@pytest.mark.django_db(transaction=True)
def test_a_run_is_recorded_against_the_version_it_ran_on(api, agent, fake_llm):
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Hello!"}))
    r = api.post(f"/v1/agents/{agent.id}/messages", {"messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 200, r.content
    api.patch(f"/v1/agents/{agent.id}", {"system": "Changed."})
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Again!"}))
    api.post(f"/v1/agents/{agent.id}/messages", {"messages": [{"role": "user", "content": "again"}]})
    runs = list(Run.objects.filter(agent=agent).order_by("created_at").select_related("agent_version"))
    assert [run.agent_version.number for run in runs] == [1, 2]
    web = Client()
    web.force_login(Agent.objects.get(pk=agent.pk).owner.members.get())
    html = web.get(f"/agents/{agent.id}/runs/").content.decode()
    assert [
        html.split(f'data-run="{run.id}"')[1].split("</tbody>")[0].count(f">v{n}</span>")
        for run, n in zip(runs, (1, 2), strict=False)
    ] == [1, 1]


@pytest.mark.django_db(transaction=True)
def test_a_test_run_is_recorded_against_the_version(api, agent, fake_llm):
    test = {"name": "greets", "turns": ["hi"], "expect": {"reply": {"contains": "hi"}}}
    api.post(f"/v1/agents/{agent.id}/tests", test)
    api.patch(f"/v1/agents/{agent.id}", {"system": "Changed."})
    fake_llm.script(FakeLLM.tool("send_message", {"message": "hi there"}))
    r = api.post(f"/v1/agents/{agent.id}/tests/run", {})
    assert r.status_code == 200, r.content
    assert Experiment.objects.get(agent=agent).version_at_start == 2
    until(
        lambda: agent_tests.test_run_out(Experiment.objects.get(agent=agent))["status"] == "passed",
        what="the test run to pass",
    )


def test_history_round_trips_through_an_agent_file(api, account, agent):
    # The settings an agent file spells out for a model (llm_config), so the imported agent is the same definition.
    agent_update(agent=agent, changes={"model_settings": {"temperature": 0.7, "put_inner_thoughts": True}})
    tool = tool_services.tool_create(owner=account.org, source_code=SOURCE_V1)
    tool_services.tool_attach(agent=agent, tool=tool)
    api.patch(f"/v1/agents/{agent.id}", {"system": "Second.", "version_message": "why not"})
    exported = json.loads(api.get(f"/v1/agents/{agent.id}/export?include_history=true").content)
    plain = agentfile_export(agent=agent)
    assert "agents_ide_version_history" not in (plain["agents"][0]["metadata"] or {})
    Tool.objects.filter(pk=tool.pk).delete()
    result = agentfile_import(owner=account.org, parsed=parse_agent_file(json.dumps(exported).encode()))
    copy = Agent.objects.get(id=result.agent_ids[0])
    assert "agents_ide_version_history" not in copy.metadata
    original, imported = _versions(agent), _versions(copy)
    assert [(v.number, v.message, v.author_kind, v.content_hash) for v in imported] == [
        (v.number, v.message, v.author_kind, v.content_hash) for v in original
    ]
    assert imported[-1].definition["system"] == "Second."
    r = api.get(f"/v1/agents/{copy.id}/versions/4/diff?against=2").json()
    assert {c["field"] for c in r["changes"]} == {"system", "tools.shout"}
    api.patch(f"/v1/agents/{copy.id}", {"name": "Copy"})
    assert _latest(copy).number == 5


def test_a_malformed_history_in_a_file_is_refused_whole(account, agent):
    data = agentfile_export(agent=agent, include_history=True)
    data["agents"][0]["metadata"]["agents_ide_version_history"] = [{"number": 1, "definition": "nope"}]
    before = Agent.objects.count()
    with pytest.raises(Exception, match="definition"):
        agentfile_import(owner=account.org, parsed=parse_agent_file(json.dumps(data).encode()))
    assert Agent.objects.count() == before


def test_history_tab_lists_diffs_and_restores_escaping_what_it_shows(api, account, agent):
    web = Client()
    web.force_login(account.user)
    api.patch(f"/v1/agents/{agent.id}", {"system": "<script>alert(1)</script>", "version_message": "<b>bold</b>"})
    panel = web.get(f"/agents/{agent.id}/versions/", HTTP_HX_REQUEST="true")
    assert panel.status_code == 200
    html = panel.content.decode()
    assert 'data-version="2"' in html and 'data-version="1"' in html and "&lt;b&gt;bold&lt;/b&gt;" in html
    diff = web.get(f"/agents/{agent.id}/versions/diff/?number=2&against=1", HTTP_HX_REQUEST="true").content.decode()
    assert (
        'data-field="system"' in diff
        and "+&lt;script&gt;alert(1)&lt;/script&gt;" in diff
        and "<script>alert" not in diff
    )
    bad = web.get(f"/agents/{agent.id}/versions/diff/?number=9", HTTP_HX_REQUEST="true")
    assert bad.status_code == 200 and b"no version 9" in bad.content  # inline, in the diff's place
    r = web.post(f"/agents/{agent.id}/versions/1/restore/", {"message": "undo"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and b"Restored as version 3" in r.content
    v3 = _latest(agent)
    assert (v3.author_kind, v3.author, v3.message, v3.restored_from) == ("user", "alice", "undo", 1)
    assert (
        web.post(f"/agents/{agent.id}/versions/8/restore/", {}, HTTP_HX_REQUEST="true").content.count(b"no version 8")
        == 1
    )
    assert _latest(agent).number == 3


def test_history_tab_shows_the_test_results_recorded_against_each_version(api, account, agent):
    from core.evals import agent_tests as test_runs
    from core.evals import experiments

    web = Client()
    web.force_login(account.user)
    api.patch(f"/v1/agents/{agent.id}", {"system": "Broken."})
    api.post(
        f"/v1/agents/{agent.id}/tests",
        {"name": "greets politely", "turns": ["hi"], "expect": {"reply": {"contains": "hi"}}},
    )
    run = test_runs.tests_start(owner=account.org, agent=agent, queued=False)  # recorded against v2, run by hand:
    run.results.update(status="done", passed=False)  # the test failed
    experiments.experiment_finish(experiment=run)
    html = web.get(f"/agents/{agent.id}/versions/").content.decode()
    row = html.split('data-version="2"')[1].split('data-version="1"')[0]
    assert "tests failed" in row and "greets politely" in row
    assert "tests" not in html.split('data-version="1"')[1].split("</li>")[0]


def test_ide_export_carries_the_history_when_asked(api, account, agent):
    web = Client()
    web.force_login(account.user)
    api.patch(f"/v1/agents/{agent.id}", {"system": "Two."})
    with_history = json.loads(web.get(f"/agents/{agent.id}/export/?history=1").content)
    assert [v["number"] for v in with_history["agents"][0]["metadata"]["agents_ide_version_history"]] == [1, 2]
    without = json.loads(web.get(f"/agents/{agent.id}/export/").content)
    assert "agents_ide_version_history" not in (without["agents"][0]["metadata"] or {})


def test_a_noop_save_costs_the_same_queries_however_many_tools_and_versions(api, account, agent):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def noop_queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert api.patch(f"/v1/agents/{agent.id}", {"name": "Ada"}).status_code == 200
        return len(ctx.captured_queries)

    noop_queries()  # the token's first use records last_used_at
    before = noop_queries()
    for i in range(3):
        tool = tool_services.tool_create(owner=account.org, source_code=SOURCE_V1.replace("shout", f"shout{i}"))
        tool_services.tool_attach(agent=agent, tool=tool)
        tool_services.tool_update(tool=tool, changes={"source_code": SOURCE_V2.replace("shout", f"shout{i}")})
    assert len(_versions(agent)) == 7
    assert noop_queries() == before
