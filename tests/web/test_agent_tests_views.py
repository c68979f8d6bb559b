"""The Tests tab's views: write, edit, draft from a conversation, run and read results; inline validation errors,
escaping, and another owner's agent is a 404 everywhere."""

import json

import pytest
from django.test import Client

from core.agents import agent_tests
from core.evals import agent_tests as test_runs
from core.models import Agent, Experiment
from core.runs.runner import run_agent
from tests.factories import make_agent
from tests.fake_llm import FakeLLM
from tests.helpers import until

pytestmark = pytest.mark.django_db(transaction=True)


def _client(account) -> Client:
    client = Client()
    client.force_login(account.user)
    return client


@pytest.fixture
def web(account):
    return _client(account)


@pytest.fixture
def agent(account):
    return make_agent(account.org, name="Ada")


FORM = {
    "name": "answers <b>tea</b>",
    "turn": ["What do I like?", ""],
    "editor": "form",
    "tool_name": ["conversation_search", "send_message", ""],
    "tool_args": ['{"query": {"regex": "^te"}}', "", ""],
    "tools_order": "sequence",
    "reply_kind": "contains",
    "reply_text": "tea",
    "block_label": ["human", ""],
    "block_kind": ["contains", "contains"],
    "block_text": ["Alice", ""],
    "stop_reason": "end_turn",
    "max_steps": "3",
    "max_prompt_tokens_per_step": "",
    "max_cost_usd": "0.5",
    "archival_matches": "",
    "expect_json": "{}",
}


def test_a_test_written_in_the_form_is_saved_listed_edited_and_deleted(web, agent):
    r = web.post(f"/agents/{agent.id}/tests/save/", FORM, HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and "tests-changed" in r.headers["HX-Trigger"]
    [test] = agent_tests.tests_list(agent=Agent.objects.get(pk=agent.pk))
    assert test["turns"] == ["What do I like?"]
    assert test["expect"] == {
        "tools": {
            "calls": [{"name": "conversation_search", "args": {"query": {"regex": "^te"}}}, {"name": "send_message"}],
            "order": "sequence",
        },
        "reply": {"contains": "tea"},
        "blocks": [{"label": "human", "contains": "Alice"}],
        "stop_reason": "end_turn",
        "max_steps": 3,
        "max_cost_usd": 0.5,
    }
    listed = web.get(f"/agents/{agent.id}/tests/").content.decode()
    assert "answers &lt;b&gt;tea&lt;/b&gt;" in listed and "<b>tea" not in listed
    edit = web.get(f"/agents/{agent.id}/tests/form/?test={test['id']}").content.decode()
    assert (
        'value="conversation_search"' in edit
        and 'value="{&quot;query&quot;: {&quot;regex&quot;: &quot;^te&quot;}}"' in edit
    )
    assert 'name="editor" value="form" checked' in edit  # the form holds all of it
    # the raw JSON editor replaces the whole expectation object, under the same id
    raw = {**FORM, "id": test["id"], "editor": "json", "expect_json": json.dumps({"archival": {"matches": "tea"}})}
    assert web.post(f"/agents/{agent.id}/tests/save/", raw).status_code == 200
    [edited] = agent_tests.tests_list(agent=Agent.objects.get(pk=agent.pk))
    assert edited["id"] == test["id"] and edited["expect"] == {"archival": {"matches": "tea"}}
    r = web.post(f"/agents/{agent.id}/tests/delete/", {"test_id": test["id"]})
    assert r.status_code == 200 and "No tests yet" in r.content.decode()
    assert agent_tests.tests_list(agent=Agent.objects.get(pk=agent.pk)) == []


def test_invalid_tests_come_back_in_the_editor_with_the_reason(web, agent):
    for changes, says in (
        ({"name": ""}, "A test needs a name."),
        ({"reply_kind": "matches", "reply_text": "("}, "bad regular expression"),
        ({"tool_args": ["not json", "", ""]}, "argument matchers of conversation_search is not valid JSON"),
        ({"editor": "json", "expect_json": "[1]"}, "must be an object"),
        ({"editor": "json", "expect_json": '{"vibes": 1}'}, "unknown expectation"),
    ):
        r = web.post(f"/agents/{agent.id}/tests/save/", {**FORM, **changes}, HTTP_HX_REQUEST="true")
        body = r.content.decode()
        assert r.status_code == 422 and r.headers["HX-Retarget"] == "#test-editor", changes
        assert 'id="test-error"' in body and says in body, (changes, body[:400])
    assert "vibes" in body  # the JSON as typed is kept for fixing
    assert agent_tests.tests_list(agent=Agent.objects.get(pk=agent.pk)) == []


def test_save_as_test_drafts_turns_tools_reply_and_stop_reason(web, account, agent, fake_llm):
    fake_llm.script(
        FakeLLM.tool("conversation_search", {"query": "tea"}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "You like <i>tea</i>."}),
        FakeLLM.tool("send_message", {"message": "Noted."}),
    )
    first = run_agent(
        agent_id=agent.id, owner=account.org, input_messages=[{"role": "user", "content": "What do I like?"}]
    )
    run_agent(agent_id=agent.id, owner=account.org, input_messages=[{"role": "user", "content": "Thanks & bye"}])
    agent.refresh_from_db()
    draft = agent_tests.test_propose(agent=agent)
    assert draft["turns"] == ["What do I like?", "Thanks & bye"]
    assert draft["expect"] == {
        "tools": {
            "calls": [{"name": "conversation_search"}, {"name": "send_message"}, {"name": "send_message"}],
            "order": "sequence",
        },
        "reply": {"contains": "Noted."},
        "stop_reason": "end_turn",
    }
    page = web.get(f"/agents/{agent.id}/tests/form/?from=conversation").content.decode()
    assert ">What do I like?</textarea>" in page and ">Thanks &amp; bye</textarea>" in page
    assert 'value="Noted."' in page and 'value="end_turn"' in page
    one = agent_tests.test_propose(agent=agent, run_id=first.run_id)
    assert one["turns"] == ["What do I like?"] and one["expect"]["reply"] == {"contains": "You like <i>tea</i>."}
    page = web.get(f"/agents/{agent.id}/tests/form/?draft_run={first.run_id}&from=conversation").content.decode()
    assert "You like &lt;i&gt;tea&lt;/i&gt;." in page and "<i>tea" not in page
    assert web.get(f"/agents/{agent.id}/tests/form/?run=run-nope").status_code == 404


def test_runs_start_from_the_tab_and_results_show_expected_against_actual(web, agent, fake_llm):
    agent_tests.test_save(
        agent=agent,
        test={
            "name": "stores <it>",
            "turns": ["Remember tea."],
            "expect": {"tools": {"calls": [{"name": "archival_memory_insert"}], "order": "set"}},
        },
    )
    refused = web.post(f"/agents/{agent.id}/tests/run/", {"model": "nobody/nothing"}).content.decode()
    assert 'role="alert"' in refused and "nobody" in refused and not Experiment.objects.exists()
    fake_llm.by_model = {"other-model": FakeLLM.tool("send_message", {"message": "from the other model"})}
    other = web.post(f"/agents/{agent.id}/tests/run/", {"model": "openai/other-model"}).content.decode()
    assert 'class="tag" title="run on this model">openai/other-model<' in other
    first = Experiment.objects.get()
    until(
        lambda: agent_tests.run_status(agent_tests.test_run_get(agent=agent, run_id=first.id)) == "failed",
        what="the other model's run",
    )
    assert first.model == "openai/other-model"
    fake_llm.by_model = {}
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Sure."}))
    r = web.post(f"/agents/{agent.id}/tests/run/", {"keep": "on"})
    assert r.status_code == 200
    run_id = r.content.decode().split('data-test-run="')[1].split('"')[0]
    page = until(
        lambda: (
            (b := web.get(f"/agents/{agent.id}/tests/results/{run_id}/").content.decode())
            and 'data-status="failed"' in b
            and b
        ),
        what="the test run",
    )
    assert "stores &lt;it&gt;" in page and "tools (set)" in page and "0 passed, 1 failed" in page
    assert "archival_memory_insert" in page.split('class="expected"')[1].split("</pre>")[0]
    assert "send_message" in page.split('class="actual"')[1].split("</pre>")[0]
    [result] = agent_tests.test_run_out(agent_tests.test_run_get(agent=agent, run_id=run_id))["results"]
    step = result["failures"][0]["step_id"]
    assert f'href="/agents/{result["copy_agent_id"]}/?step={step}"' in page
    assert f'href="/agents/{result["copy_agent_id"]}/"' in page  # the kept copy


def test_another_owners_agent_is_a_404_everywhere(agent, other_account):
    test = agent_tests.test_save(
        agent=agent, test={"name": "t", "turns": ["hi"], "expect": {"stop_reason": "end_turn"}}
    )
    run = test_runs.tests_start(owner=agent.owner, agent=agent, test_ids=[test["id"]], queued=False)
    mallory = _client(other_account)
    base = f"/agents/{agent.id}/tests"
    for url in (
        f"{base}/",
        f"{base}/form/",
        f"{base}/form/?test={test['id']}",
        f"{base}/form/?from=conversation",
        f"{base}/results/{run.id}/",
    ):
        assert mallory.get(url).status_code == 404, url
    for url in (f"{base}/save/", f"{base}/run/", f"{base}/delete/"):
        assert mallory.post(url, {**FORM, "test_id": test["id"]}).status_code == 404, url
    assert [t["id"] for t in agent_tests.tests_list(agent=Agent.objects.get(pk=agent.pk))] == [test["id"]]
    assert Experiment.objects.count() == 1


def test_a_test_id_from_an_imported_file_with_odd_characters_still_lists_runs_and_deletes(web, agent):
    odd = "a/b'\"<x>"
    agent_tests.test_save(
        agent=agent, test={"id": odd, "name": "odd", "turns": ["hi"], "expect": {"stop_reason": "end_turn"}}
    )
    page = web.get(f"/agents/{agent.id}/tests/").content.decode()
    assert "<x>" not in page and "odd" in page
    assert web.get(f"/agents/{agent.id}/tests/form/", {"test": odd}).status_code == 200
    assert web.post(f"/agents/{agent.id}/tests/delete/", {"test_id": odd}).status_code == 200
    assert agent_tests.tests_list(agent=Agent.objects.get(pk=agent.pk)) == []


def test_reading_the_tests_tab_never_writes(web, agent):
    test = agent_tests.test_save(
        agent=agent, test={"name": "t", "turns": ["hi"], "expect": {"stop_reason": "end_turn"}}
    )
    before = Agent.objects.filter(pk=agent.pk).values().get()
    for url in (
        f"/agents/{agent.id}/tests/",
        f"/agents/{agent.id}/tests/form/",
        f"/agents/{agent.id}/tests/form/?test={test['id']}",
        f"/agents/{agent.id}/tests/form/?from=conversation",
        f"/agents/{agent.id}/",
    ):
        assert web.get(url).status_code == 200, url
    assert Agent.objects.filter(pk=agent.pk).values().get() == before
    assert not Experiment.objects.exists()


def test_the_editor_adds_a_row_from_the_server_with_the_button_for_the_next(web, agent):
    html = web.get(f"/agents/{agent.id}/tests/row/?kind=call&n=3").content.decode()
    assert 'name="tool_name" value="" placeholder="tool name" aria-label="Tool 3" autofocus' in html
    assert "?kind=call&amp;n=4" in html and "+ call" in html
    assert web.get(f"/agents/{agent.id}/tests/row/?kind=script").status_code == 404
