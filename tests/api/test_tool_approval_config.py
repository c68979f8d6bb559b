"""Which tools need a person's approval, configured on Letta's wire: a tool's `default_requires_approval` (create,
upsert, update, shown back), the requires_approval rule it gives agents made with it or attaching it, the per-agent
toggle `PATCH /v1/agents/{id}/tools/approval/{tool_name}` (body, deprecated query, 422s), agent files, the IDE's
"approval" box, and letta-client against the live server."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from letta_client import Letta

from core.agents import versions
from core.models import Agent
from tests.factories import ApiClient, make_agent
from tools import services as tool_services

SOURCE = '''def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path: The file to delete.
    """
    return f"deleted {path}"
'''
OTHER = '''def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: The file to read.
    """
    return path
'''
RULE = {"tool_name": "delete_file", "type": "requires_approval"}


def _approval_rules(agent: dict) -> list[dict]:
    return [r for r in agent["tool_rules"] if r["type"] == "requires_approval"]


def _tool(api, source: str = SOURCE, **fields) -> dict:
    r = api.post("/v1/tools/", {"source_code": source, **fields})
    assert r.status_code == 201, r.content
    return r.json()


def _agent(api, **fields) -> dict:
    body = {"name": "careful", "model": "openai/fake-model", "context_window_limit": 16000, **fields}
    r = api.post("/v1/agents/", body)
    assert r.status_code == 201, r.content
    return r.json()


def _approval(api, agent_id: str, tool_name: str, body=None, query: str = ""):
    """The toggle with a JSON body, or with none at all (the deprecated query form)."""
    path = f"/v1/agents/{agent_id}/tools/approval/{tool_name}{query}"
    return api.client.patch(path) if body is None else api.patch(path, body)


# --------------------------------------------------------------------------- the tool's default


@pytest.mark.django_db
def test_tool_default_requires_approval_on_create_upsert_update_and_read(api):
    plain = _tool(api, OTHER)
    assert plain["default_requires_approval"] is None  # Letta's default
    tool = _tool(api, default_requires_approval=True)
    assert tool["default_requires_approval"] is True
    assert api.get(f"/v1/tools/{tool['id']}").json()["default_requires_approval"] is True
    assert {t["name"]: t["default_requires_approval"] for t in api.get("/v1/tools/?name=delete_file").json()} == {
        "delete_file": True
    }

    r = api.patch(f"/v1/tools/{tool['id']}", {"default_requires_approval": False})
    assert r.status_code == 200 and r.json()["default_requires_approval"] is False
    r = api.patch(f"/v1/tools/{tool['id']}", {"description": "Removes a file."})  # unset: left as it is
    assert r.json()["default_requires_approval"] is False
    r = api.put("/v1/tools/", {"source_code": SOURCE, "default_requires_approval": True})  # upsert by name
    assert r.status_code == 200 and r.json()["id"] == tool["id"] and r.json()["default_requires_approval"] is True
    r = api.put("/v1/tools/", {"source_code": SOURCE})  # an upsert that does not say keeps it
    assert r.json()["default_requires_approval"] is True
    r = api.patch(f"/v1/tools/{tool['id']}", {"default_requires_approval": None})
    assert r.json()["default_requires_approval"] is None

    assert api.patch(f"/v1/tools/{tool['id']}", {"default_requires_approval": "sometimes"}).status_code == 422
    assert api.post("/v1/tools/", {"source_code": SOURCE, "default_requires_approval": []}).status_code == 422


@pytest.mark.django_db
def test_built_in_tools_report_no_default_and_stay_locked(api):
    api.post("/v1/tools/add-base-tools")
    memory = api.get("/v1/tools/?name=conversation_search").json()[0]
    assert memory["default_requires_approval"] is None
    assert api.patch(f"/v1/tools/{memory['id']}", {"default_requires_approval": True}).status_code == 403


# --------------------------------------------------------------------------- agents made with it, or attaching it


@pytest.mark.django_db
def test_an_agent_made_with_a_default_approval_tool_gets_its_rule(api):
    tool = _tool(api, default_requires_approval=True)
    _tool(api, OTHER)
    by_name = _agent(api, tools=["delete_file", "read_file"])
    assert _approval_rules(by_name) == [RULE]  # read_file has no default: no rule
    by_id = _agent(api, name="by-id", tool_ids=[tool["id"]])
    assert _approval_rules(by_id) == [RULE]
    # a rule already given is not repeated; the given rules come first
    given = [{"type": "exit_loop", "tool_name": "read_file"}, {**RULE, "prompt_template": "ask first"}]
    with_rule = _agent(api, name="given", tools=["delete_file", "read_file"], tool_rules=given)
    assert [r["type"] for r in with_rule["tool_rules"]] == ["exit_loop", "requires_approval"]
    assert _approval_rules(with_rule)[0]["prompt_template"] == "ask first"
    assert _approval_rules(_agent(api, name="without")) == []


@pytest.mark.django_db
def test_attaching_a_default_approval_tool_adds_its_rule_once(api):
    tool = _tool(api, default_requires_approval=True)
    plain = _tool(api, OTHER)
    agent = _agent(api)
    r = api.patch(f"/v1/agents/{agent['id']}/tools/attach/{plain['id']}")
    assert r.status_code == 200 and _approval_rules(r.json()) == []
    r = api.patch(f"/v1/agents/{agent['id']}/tools/attach/{tool['id']}")
    assert r.status_code == 200 and _approval_rules(r.json()) == [RULE]
    again = api.patch(f"/v1/agents/{agent['id']}/tools/attach/{tool['id']}").json()
    assert again["tool_rules"] == r.json()["tool_rules"]
    assert versions.versions_list(agent=Agent.objects.get(pk=agent["id"]))[0].definition["tool_rules"] == [RULE]


@pytest.mark.django_db
def test_a_default_changed_later_leaves_agents_that_have_the_tool_alone(api):
    tool = _tool(api)
    agent = _agent(api, tool_ids=[tool["id"]])
    api.patch(f"/v1/tools/{tool['id']}", {"default_requires_approval": True})
    assert _approval_rules(api.get(f"/v1/agents/{agent['id']}").json()) == []


@pytest.mark.django_db
def test_a_duplicate_keeps_its_originals_rules(account):
    tool = tool_services.tool_create(owner=account.org, source_code=SOURCE, default_requires_approval=True)
    original = make_agent(account.org, tool_ids=[tool.id])
    tool_services.agent_tool_approval_set(agent=original, tool_name="delete_file", requires_approval=False)
    from core.agents.services import agent_duplicate

    assert agent_duplicate(agent=original).tool_rules == []


# --------------------------------------------------------------------------- the per-agent toggle


@pytest.mark.django_db
def test_the_toggle_adds_and_removes_the_rule_from_the_body(api):
    _tool(api)
    agent = _agent(api, tools=["delete_file"], tool_rules=[{"type": "exit_loop", "tool_name": "delete_file"}])
    r = _approval(api, agent["id"], "delete_file", {"requires_approval": True})
    assert r.status_code == 200
    state = r.json()
    assert state["id"] == agent["id"] and "delete_file" in {t["name"] for t in state["tools"]}  # the AgentState
    assert state["tool_rules"] == [{"type": "exit_loop", "tool_name": "delete_file"}, RULE]
    assert (
        _approval(api, agent["id"], "delete_file", {"requires_approval": True}).json()["tool_rules"]
        == (state["tool_rules"])
    )
    assert Agent.objects.get(pk=agent["id"]).tool_rules == state["tool_rules"]
    r = _approval(api, agent["id"], "delete_file", {"requires_approval": False})
    assert r.status_code == 200 and r.json()["tool_rules"] == [{"type": "exit_loop", "tool_name": "delete_file"}]
    notes = [v.message for v in versions.versions_list(agent=Agent.objects.get(pk=agent["id"]))[:2]]
    assert notes == ["delete_file no longer needs approval", "delete_file needs approval"]


@pytest.mark.django_db
def test_the_toggle_takes_the_deprecated_query_and_any_tool_name(api):
    agent = _agent(api)
    r = _approval(api, agent["id"], "Bash", query="?requires_approval=true")  # not attached: not checked, as Letta
    assert r.status_code == 200 and _approval_rules(r.json()) == [{"tool_name": "Bash", "type": "requires_approval"}]
    r = _approval(api, agent["id"], "Bash", {"requires_approval": False}, query="?requires_approval=true")
    assert _approval_rules(r.json()) == []  # the body wins
    r = _approval(api, agent["id"], "Bash", query="?requires_approval=1")
    assert r.status_code == 200 and len(_approval_rules(r.json())) == 1  # added once
    r = _approval(api, agent["id"], "Bash", query="?requires_approval=false")
    assert _approval_rules(r.json()) == []


@pytest.mark.django_db
def test_the_toggle_refuses_what_letta_refuses(api, other_account):
    agent = _agent(api)
    r = _approval(api, agent["id"], "Bash")
    assert r.status_code == 422
    assert r.json()["detail"] == "requires_approval must be provided either in request body or as query parameter"
    assert _approval(api, agent["id"], "Bash", {}).status_code == 422  # a body without the field
    assert _approval(api, agent["id"], "Bash", {}, query="?requires_approval=true").status_code == 422
    extra = _approval(api, agent["id"], "Bash", {"requires_approval": True, "tool_name": "Bash"})
    assert extra.status_code == 422  # extra="forbid", as Letta's ModifyApprovalRequest
    assert _approval(api, agent["id"], "Bash", {"requires_approval": "maybe"}).status_code == 422
    assert _approval(api, agent["id"], "Bash", query="?requires_approval=maybe").status_code == 422
    assert Agent.objects.get(pk=agent["id"]).tool_rules == []
    other = ApiClient(other_account.token)
    assert _approval(other, agent["id"], "Bash", {"requires_approval": True}).status_code == 404
    assert _approval(api, "agent-nope", "Bash", {"requires_approval": True}).status_code == 404


@pytest.mark.django_db
def test_requires_approval_rules_are_accepted_on_agent_create_and_update(api):
    agent = _agent(api, tool_rules=[{"type": "requires_approval", "tool_name": "Bash"}])
    assert agent["tool_rules"] == [{"tool_name": "Bash", "type": "requires_approval"}]
    rules = [{"type": "requires_approval", "tool_name": "Read"}, {"type": "requires_approval", "tool_name": "Read"}]
    r = api.patch(f"/v1/agents/{agent['id']}", {"tool_rules": rules})
    assert r.status_code == 200 and r.json()["tool_rules"] == [{"tool_name": "Read", "type": "requires_approval"}]
    r = api.patch(f"/v1/agents/{agent['id']}", {"tool_rules": [{"type": "requires_approval"}]})
    assert r.status_code == 422


# --------------------------------------------------------------------------- agent files


@pytest.mark.django_db
def test_agent_file_round_trip_keeps_the_rule_and_the_default(api, other_account):
    tool = _tool(api, default_requires_approval=True)
    _tool(api, OTHER, default_requires_approval=False)
    agent = _agent(api, tool_ids=[tool["id"]], tools=["read_file"])
    _approval(api, agent["id"], "read_file", {"requires_approval": True})
    exported = api.get(f"/v1/agents/{agent['id']}/export").json()
    defaults = {t["name"]: t["default_requires_approval"] for t in exported["tools"]}
    assert defaults["delete_file"] is True and defaults["read_file"] is False
    assert _approval_rules(exported["agents"][0]) == [
        {**RULE, "prompt_template": None},
        {"tool_name": "read_file", "type": "requires_approval", "prompt_template": None},
    ]

    other = ApiClient(other_account.token)  # an account without the tools: the file's are made
    upload = SimpleUploadedFile("a.af", json.dumps(exported).encode())
    r = other.client.post("/v1/agents/import", {"file": upload})
    assert r.status_code == 200, r.content
    copy = Agent.objects.get(pk=r.json()["agent_ids"][0])
    assert [r for r in copy.tool_rules if r["type"] == "requires_approval"] == [
        RULE,
        {"tool_name": "read_file", "type": "requires_approval"},
    ]
    custom = copy.tools.filter(tool_type="custom")
    assert {t.name: t.default_requires_approval for t in custom} == {"delete_file": True, "read_file": False}
    assert not any("requires_approval" in w for w in r.json().get("warnings", []))


# --------------------------------------------------------------------------- the IDE


@pytest.mark.django_db
def test_the_workspace_approval_box_adds_and_removes_the_rule(web, account):
    tool = tool_services.tool_create(owner=account.org, source_code=SOURCE)
    agent = make_agent(account.org, name="<b>Ada</b>", tool_ids=[tool.id])
    page = web.get(f"/agents/{agent.id}/").content.decode()
    box = f'name="requires_approval" class="needs-approval" data-tool="delete_file" hx-post="/agents/{agent.id}/'
    assert box in page and "&lt;b&gt;Ada&lt;/b&gt;" in page and "<b>Ada</b>" not in page

    url = f"/agents/{agent.id}/tool-approval/{tool.id}/"
    r = web.post(url, {"requires_approval": "on", "version_message": "be careful"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    html = r.content.decode()
    assert 'data-tool="delete_file" checked' in html and 'id="rules" hx-swap-oob="true"' in html
    assert "&quot;requires_approval&quot;" in html  # the rules editor shows the new rule, escaped
    agent.refresh_from_db()
    assert agent.tool_rules == [RULE]
    assert versions.versions_list(agent=agent)[0].message == "be careful"

    r = web.post(url, {}, HTTP_HX_REQUEST="true")  # the box unticked sends nothing
    agent.refresh_from_db()
    assert agent.tool_rules == [] and 'data-tool="delete_file" checked' not in r.content.decode()
    assert web.get(f"/agents/{agent.id}/tool-approval/{tool.id}/").status_code == 405
    assert web.post(f"/agents/{agent.id}/tool-approval/tool-nope/").status_code == 404


@pytest.mark.django_db
def test_attaching_in_the_workspace_shows_the_rule_a_default_added(web, account):
    tool = tool_services.tool_create(owner=account.org, source_code=SOURCE, default_requires_approval=True)
    agent = make_agent(account.org)
    r = web.post(f"/agents/{agent.id}/tools/{tool.id}/attach/", HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert 'data-tool="delete_file" checked' in html and 'id="rules" hx-swap-oob="true"' in html
    r = web.post(f"/agents/{agent.id}/tools/{tool.id}/detach/", HTTP_HX_REQUEST="true")
    assert 'id="rules"' not in r.content.decode()  # the rules did not change: the editor is left as it is


@pytest.mark.django_db
def test_the_rules_editor_takes_requires_approval_for_any_tool(web, account):
    agent = make_agent(account.org)
    rules = json.dumps([{"type": "requires_approval", "tool_name": "Bash"}])
    r = web.post(f"/agents/{agent.id}/rules/", {"tool_rules": rules}, HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and "Saved." in r.content.decode()
    agent.refresh_from_db()
    assert agent.tool_rules == [{"tool_name": "Bash", "type": "requires_approval"}]
    bad = json.dumps([{"type": "exit_loop", "tool_name": "Bash"}])  # other rules still need the tool attached
    assert "does not have" in web.post(f"/agents/{agent.id}/rules/", {"tool_rules": bad}).content.decode()


@pytest.mark.django_db
def test_the_tools_page_sets_the_default(web, account):
    r = web.post("/tools/save/", {"source_code": SOURCE, "default_requires_approval": "on"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    tool = tool_services.Tool.objects.get(owner=account.org, name="delete_file")
    assert tool.default_requires_approval is True
    assert 'id="tool-default-approval" checked' in web.get(f"/tools/?tool={tool.id}").content.decode()
    web.post("/tools/save/", {"source_code": SOURCE, "tool_id": tool.id}, HTTP_HX_REQUEST="true")
    tool.refresh_from_db()
    assert tool.default_requires_approval is None


# --------------------------------------------------------------------------- letta-client


@pytest.mark.django_db(transaction=True)
def test_letta_client_configures_approvals(live_server, account):
    # closed at the end: a kept-alive connection would hold a server thread, and its database session, open
    with Letta(base_url=live_server.url, api_key=account.token, max_retries=0, timeout=60) as client:
        tool = client.tools.create(source_code=SOURCE, default_requires_approval=True)
        assert tool.default_requires_approval is True
        agent = client.agents.create(model="openai/fake-model", context_window_limit=16000, tool_ids=[tool.id])
        assert [(r.type, r.tool_name) for r in agent.tool_rules] == [("requires_approval", "delete_file")]

        state = client.agents.tools.update_approval("delete_file", agent_id=agent.id, body_requires_approval=False)
        assert state is not None and state.tool_rules == []
        state = client.agents.tools.update_approval("delete_file", agent_id=agent.id, body_requires_approval=True)
        assert [(r.type, r.tool_name) for r in state.tool_rules] == [("requires_approval", "delete_file")]

        assert client.tools.update(tool.id, default_requires_approval=False).default_requires_approval is False
        assert client.tools.retrieve(tool.id).default_requires_approval is False
        plain = client.agents.create(model="openai/fake-model", context_window_limit=16000, tool_ids=[tool.id])
        assert plain.tool_rules == []
