"""Malformed input from the security audit never gets a 500: agent tests with wrong-typed expectations, JSON nested
deep enough to overflow a parser, an agent deleted while its tests are saved, deleted or started, stored tests of
another shape, an unreadable multipart body. Through the real API, pages and websocket, on either database."""

import json

import pytest
from django.test import Client

from core.agents import agent_tests
from core.agents.services import agent_delete
from core.models import Agent, Experiment
from core.text import MAX_JSON_DEPTH
from tests.core.agentfile_fixtures import multipart
from tests.core.engine.test_expectations_types import WRONG
from tests.factories import make_agent

DEEP = "[" * 100_000 + "]" * 100_000  # past Python's recursion limit: a RecursionError in json.loads
DEEPISH = "[" * (MAX_JSON_DEPTH + 50) + "]" * (MAX_JSON_DEPTH + 50)  # parses, but past the bound
TEST = {"name": "t", "turns": ["hi"], "expect": {"reply": {"contains": "hello"}}}


@pytest.fixture
def agent(account):
    return make_agent(account.org, name="Ada")


@pytest.fixture
def web(account):
    client = Client(raise_request_exception=False)
    client.force_login(account.user)
    return client


def _json_refusal(r, status: int) -> str:
    assert r.status_code == status, (r.status_code, r.content[:300])
    assert r["Content-Type"].startswith("application/json")
    return r.json()["detail"]


def _inline_error(r) -> str:
    """A refused test comes back in the editor (422, retargeted) with the reason."""
    assert r.status_code == 422 and r["HX-Retarget"] == "#test-editor", (r.status_code, r.content[:300])
    return r.content.decode()


# --- agent test expectations of the wrong type ---


@pytest.mark.parametrize("expect", WRONG, ids=[repr(e) for e in WRONG])
def test_api_wrong_typed_expectations_are_422(api, agent, expect):
    r = api.post(f"/v1/agents/{agent.id}/tests", {**TEST, "expect": expect})
    assert _json_refusal(r, 422).startswith("Expectations: ")
    assert agent_tests.tests_list(agent=Agent.objects.get(pk=agent.pk)) == []


@pytest.mark.parametrize("expect", [[{"reply": {"contains": "x"}}], "reply", 5])
def test_api_expectations_that_are_not_an_object_are_422(api, agent, expect):
    _json_refusal(api.post(f"/v1/agents/{agent.id}/tests", {**TEST, "expect": expect}), 422)


@pytest.mark.parametrize("expect", WRONG[::3] + ["[1]", '"x"', "5", "null"], ids=repr)
def test_ide_wrong_typed_expectations_are_an_inline_error(web, agent, expect):
    text = expect if isinstance(expect, str) else json.dumps(expect)
    form = {"name": "t", "turn": ["hi"], "editor": "json", "expect_json": text}
    page = _inline_error(web.post(f"/agents/{agent.id}/tests/save/", form, HTTP_HX_REQUEST="true"))
    assert "expectation" in page.lower()


def test_ide_form_limits_that_are_not_finite_numbers_are_an_inline_error(web, agent):
    form = {"name": "t", "turn": ["hi"], "editor": "form", "reply_text": "hi", "max_cost_usd": "nan"}
    assert "max_cost_usd is a number" in _inline_error(web.post(f"/agents/{agent.id}/tests/save/", form))


# --- JSON nested past the bound ---


@pytest.mark.parametrize("deep", [DEEP, DEEPISH], ids=["overflowing", "past-the-bound"])
def test_api_deeply_nested_bodies_are_422(api, agent, deep):
    for path, body in (
        (f"/v1/agents/{agent.id}/tests", '{"name": "t", "turns": ["hi"], "expect": {"reply": ' + deep + "}}"),
        (f"/v1/agents/{agent.id}", '{"metadata": {"x": ' + deep + "}}"),
        ("/v1/agents/", deep),
    ):
        method = api.client.patch if path.endswith(agent.id) else api.client.post
        detail = _json_refusal(method(path, data=body, content_type="application/json"), 422)
        assert f"nested deeper than {MAX_JSON_DEPTH} levels" in detail


@pytest.mark.parametrize("deep", [DEEP, DEEPISH], ids=["overflowing", "past-the-bound"])
def test_ide_deeply_nested_json_fields_are_refused_with_the_reason(web, agent, deep):
    reason = f"nested deeper than {MAX_JSON_DEPTH} levels"
    save = f"/agents/{agent.id}/tests/save/"
    page = _inline_error(web.post(save, {"name": "t", "turn": ["hi"], "editor": "json", "expect_json": deep}))
    assert reason in page
    form = {"name": "t", "turn": ["hi"], "editor": "form", "tool_name": ["search"], "tool_args": [deep]}
    assert reason in _inline_error(web.post(save, form))
    rules = web.post(f"/agents/{agent.id}/rules/", {"tool_rules": deep})
    assert rules.status_code == 200 and reason in rules.content.decode()
    assert Agent.objects.get(pk=agent.pk).tool_rules == agent.tool_rules
    source = 'def echo(x: dict) -> str:\n    """Echo.\n\n    Args:\n        x: anything.\n    """\n    return str(x)\n'
    run = web.post("/tools/run/", {"source_code": source, "arg_x": deep, "env_vars": "{}"})
    assert run.status_code == 200 and reason in run.content.decode()
    saved = web.post("/tools/save/", {"source_code": source, "env_vars": '{"K": ' + deep + "}"})
    assert saved.status_code == 200 and reason in saved.content.decode()
    assert web.post("/tools/schema/", {"source_code": source, "prefill": deep}).status_code == 200


def test_api_agent_import_with_deeply_nested_secrets_is_422(api):
    from django.core.files.uploadedfile import SimpleUploadedFile

    r = api.client.post("/v1/agents/import", {"file": SimpleUploadedFile("a.af", b"{}"), "secrets": DEEP})
    assert "secrets must be a JSON object" in _json_refusal(r, 422)


@pytest.mark.django_db(transaction=True)
async def test_a_deeply_nested_websocket_frame_is_an_error_message(account):
    from tests.core.test_websocket_security import _setup, _socket

    agent, _, key = await _setup(account)
    comm = _socket(agent.id, key)
    assert (await comm.connect())[0]
    await comm.send_to(text_data='{"type": "user_message", "text": ' + DEEP + "}")
    reply = await comm.receive_json_from(timeout=5)
    assert reply["message_type"] == "error_message"
    await comm.disconnect()


# --- the agent deleted between the lookup and the write ---


def _deleted_after_lookup(monkeypatch, module, name: str):
    """Make `module.name` (the endpoint's or view's agent lookup) delete the agent it just found."""
    found = getattr(module, name)

    def lookup(*args, **kwargs):
        agent = found(*args, **kwargs)
        agent_delete(agent=Agent.objects.get(pk=agent.pk))
        return agent

    monkeypatch.setattr(module, name, lookup)


def test_api_saving_deleting_or_running_a_deleted_agents_tests_is_404(api, account, monkeypatch):
    from core.api import agent_tests as endpoints

    saving, deleting, running = (make_agent(account.org, name=n) for n in ("Ada", "Bo", "Cy"))
    test_id = api.post(f"/v1/agents/{deleting.id}/tests", TEST).json()["id"]
    api.post(f"/v1/agents/{running.id}/tests", TEST)
    _deleted_after_lookup(monkeypatch, endpoints, "agent_get")
    assert "not found" in _json_refusal(api.post(f"/v1/agents/{saving.id}/tests", TEST), 404)
    assert "not found" in _json_refusal(api.delete(f"/v1/agents/{deleting.id}/tests/{test_id}"), 404)
    assert "not found" in _json_refusal(api.post(f"/v1/agents/{running.id}/tests/run", {}), 404)
    assert not Agent.objects.exists() and not Experiment.objects.exists()


def test_ide_saving_deleting_or_running_a_deleted_agents_tests_is_never_a_500(web, account, monkeypatch):
    from core.web import agent_tests as views

    saving, deleting, running = (make_agent(account.org, name=n) for n in ("Ada", "Bo", "Cy"))
    test_id = agent_tests.test_save(agent=deleting, test=TEST)["id"]
    agent_tests.test_save(agent=running, test=TEST)
    _deleted_after_lookup(monkeypatch, views, "agent_or_404")
    form = {"name": "t", "turn": ["hi"], "editor": "form", "reply_text": "hello"}
    assert web.post(f"/agents/{saving.id}/tests/save/", form).status_code == 404
    assert web.post(f"/agents/{deleting.id}/tests/delete/", {"test_id": test_id}).status_code == 404
    started = web.post(f"/agents/{running.id}/tests/run/", {"model": ""})  # a form: an empty multipart body is refused
    assert started.status_code == 200 and "not found" in started.content.decode()  # the tab's inline error
    assert not Agent.objects.exists() and not Experiment.objects.exists()


# --- tests brought by other writers (agent files, agent updates) in another shape ---


def test_tests_of_another_shape_in_an_agent_file_are_left_out_not_fatal(api, web, agent):
    good = {"id": "test-good", **TEST, "start": {"step_id": None, "before": False}}
    junk = [5, "x", {"id": 3}, {"id": "test-odd", "name": "odd", "turns": [1], "expect": {}, "start": {}}, None]
    data = api.get(f"/v1/agents/{agent.id}/export").json()
    data["agents"][0]["metadata"] = {"agent_tests": [*junk, good]}
    r = api.client.post("/v1/agents/import", multipart(json.dumps(data).encode()))
    assert r.status_code == 200, r.content
    imported = Agent.objects.get(pk=r.json()["agent_ids"][0])
    [test] = api.get(f"/v1/agents/{imported.id}/tests").json()
    assert test["name"] == "t" and test["id"] != "test-good"  # the file's test, under an id of this server
    assert web.get(f"/agents/{imported.id}/tests/").status_code == 200
    assert api.post(f"/v1/agents/{imported.id}/tests/run", {}).status_code == 200
    assert api.delete(f"/v1/agents/{imported.id}/tests/{test['id']}").status_code == 200
    assert "agent_tests" not in Agent.objects.get(pk=imported.pk).metadata


def test_an_agent_update_writing_agent_tests_metadata_makes_no_tests(api, agent):
    r = api.patch(f"/v1/agents/{agent.id}", {"metadata": {"agent_tests": "not a list"}})
    assert r.status_code == 200
    assert api.get(f"/v1/agents/{agent.id}/tests").json() == []
    assert api.post(f"/v1/agents/{agent.id}/tests", TEST).status_code == 200
    assert [t["name"] for t in api.get(f"/v1/agents/{agent.id}/tests").json()] == ["t"]


# --- an unreadable multipart body ---


def test_an_unreadable_multipart_body_is_a_json_400_on_the_api(api, web):
    r = api.client.post("/v1/agents/import", data=b"x", content_type="multipart/form-data")
    assert "multipart body cannot be read" in _json_refusal(r, 400)
    page = web.post("/agents/import/", data=b"x", content_type="multipart/form-data")
    assert page.status_code == 400 and page["Content-Type"].startswith("text/plain")
