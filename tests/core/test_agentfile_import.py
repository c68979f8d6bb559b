"""Importing agent files: options, tool-name clashes, atomicity, the API endpoints, templates, and letta-client."""

import json

import pytest

from core.agents.agentfile.importer import ImportOptions, agentfile_import, agentfile_preview
from core.agents.agentfile.parse import parse_agent_file
from core.agents.agentfile.templates import template_load, templates_list
from core.errors import Invalid
from core.models import Agent, Message
from memory.models import Block
from memory.selectors import agent_blocks
from tests.core.agentfile_docs import TOOL_SOURCE, dumps, edited, v1_doc, v2_doc
from tests.core.agentfile_fixtures import multipart
from tools.models import Tool

pytestmark = pytest.mark.django_db


def _import(owner, raw: bytes, **options):
    result = agentfile_import(owner=owner, parsed=parse_agent_file(raw), options=ImportOptions(**options))
    return Agent.objects.get(id=result.agent_ids[0]), result


def _custom_tool(owner, source: str) -> Tool:
    agent, _ = _import(owner, edited(v2_doc(), lambda d: d["tools"][0].update(source_code=source)))
    return agent.tools.get(name="roll_dice")


def test_v1_file_imports_like_v2(account):
    agent, _ = _import(account.org, dumps(v1_doc()))
    assert [b.label for b in agent_blocks(agent=agent)] == ["persona", "rules"]
    assert {t.name for t in agent.tools.all()} == {"roll_dice", "send_message"}
    assert Message.objects.filter(agent=agent).count() == 6 and len(agent.message_ids) == 6


def test_existing_tool_is_reused_by_default_never_duplicated(account):
    mine = _custom_tool(account.org, TOOL_SOURCE + "\n# my version\n")
    agent, result = _import(account.org, dumps(v2_doc()))
    assert Tool.objects.filter(owner=account.org, name="roll_dice").count() == 1
    assert agent.tools.get(name="roll_dice").id == mine.id
    mine.refresh_from_db()
    assert mine.source_code.endswith("# my version\n")
    assert result.tools_reused == ["roll_dice"] and any("kept" in w for w in result.warnings)


def test_override_policy_replaces_the_existing_tool_in_place(account):
    mine = _custom_tool(account.org, TOOL_SOURCE + "\n# my version\n")
    agent, result = _import(account.org, dumps(v2_doc()), tool_policy="override")
    mine.refresh_from_db()
    assert mine.source_code == TOOL_SOURCE and agent.tools.get(name="roll_dice").id == mine.id
    assert result.tools_overridden == ["roll_dice"]
    assert Tool.objects.filter(owner=account.org, name="roll_dice").count() == 1


def test_a_custom_tool_named_like_a_builtin_maps_to_the_builtin(account):
    doc = edited(
        v2_doc(),
        lambda d: d["tools"][1].update(
            tool_type="custom", source_code="def send_message(message: str):\n    return 1\n"
        ),
    )
    agent, result = _import(account.org, doc)
    sent = agent.tools.get(name="send_message")
    assert sent.tool_type == "base" and sent.source_code == ""
    assert any("built-in" in w for w in result.warnings)


def test_a_failure_mid_import_leaves_nothing_behind(account):
    before = (Agent.objects.count(), Block.objects.count(), Tool.objects.count(), Message.objects.count())
    with pytest.raises(Invalid):
        _import(account.org, dumps(v2_doc()), name="   ")  # refused by agent_create after tools and blocks were made
    assert (Agent.objects.count(), Block.objects.count(), Tool.objects.count(), Message.objects.count()) == before


def test_options_override_name_model_and_strip_messages(account):
    agent, result = _import(
        account.org,
        dumps(v2_doc()),
        name="renamed",
        model="anthropic/claude-3-5-haiku-latest",
        strip_messages=True,
        append_copy_suffix=True,
    )
    assert agent.name == "renamed_copy" and agent.model == "anthropic/claude-3-5-haiku-latest"
    msgs = list(Message.objects.filter(agent=agent))
    assert [(m.role, m.text) for m in msgs] == [("system", "You roll dice for people.")] and agent.message_ids == [
        msgs[0].id
    ]
    assert any("anthropic/claude-3-5-haiku-latest" in w for w in result.warnings)


def test_configured_model_is_not_flagged(account, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    _, result = _import(account.org, dumps(v2_doc()))
    assert not any("not served" in w for w in result.warnings)


def test_a_block_shared_by_two_agents_stays_one_row(account):
    def two_agents(d):
        second = json.loads(json.dumps(d["agents"][0]))
        second.update(id="agent-1", name="second", block_ids=["block-1"], messages=[], in_context_message_ids=[])
        d["agents"].append(second)

    result = agentfile_import(owner=account.org, parsed=parse_agent_file(edited(v2_doc(), two_agents)))
    first, second = (Agent.objects.get(id=i) for i in result.agent_ids)
    shared = [b for b in agent_blocks(agent=first) if b.label == "rules"][0]
    assert [b.id for b in agent_blocks(agent=second)] == [shared.id]


def test_preview_reports_what_would_be_created(account):
    _custom_tool(account.org, TOOL_SOURCE + "\n# mine\n")
    view = agentfile_preview(
        owner=account.org, parsed=parse_agent_file(dumps(v2_doc())), options=ImportOptions(tool_policy="override")
    )
    a = view["agents"][0]
    assert a["name"] == "dice master" and a["model"] == "openai/gpt-4o-mini" and a["model_configured"] is False
    assert [b["label"] for b in a["blocks"]] == ["persona", "rules"]
    assert {t["name"]: t["status"] for t in a["tools"]} == {"roll_dice": "overridden", "send_message": "builtin"}
    assert a["message_count"] == 6 and a["in_context_count"] == 6


def test_templates_are_shipped_agent_files(account):
    names = {t["name"] for t in templates_list()}
    assert {"memgpt_chat", "blank"} <= names
    result = agentfile_import(owner=account.org, parsed=template_load("memgpt_chat"))
    agent = Agent.objects.get(id=result.agent_ids[0])
    assert [b.label for b in agent_blocks(agent=agent)] == ["persona", "human"]
    assert {t.tool_type for t in agent.tools.all()} == {"base"} and "send_message" in {
        t.name for t in agent.tools.all()
    }
    with pytest.raises(Exception, match="not found"):
        template_load("../../etc/passwd")


# --------------------------------------------------------------------------- HTTP


def test_api_import_with_letta_client_fields(api, account):
    resp = api.client.post(
        "/v1/agents/import",
        multipart(
            dumps(v2_doc()), override_name="from api", strip_messages="true", secrets=json.dumps({"DICE_API_KEY": "k"})
        ),
    )
    assert resp.status_code == 200, resp.content
    body = resp.json()
    agent = Agent.objects.get(id=body["agent_ids"][0], owner=account.org)
    assert agent.name == "from api" and agent.secrets == {"DICE_API_KEY": "k"} and len(agent.message_ids) == 1
    assert isinstance(body["warnings"], list)
    assert api.get(f"/v1/agents/{agent.id}").json()["name"] == "from api"


def test_api_refuses_a_malformed_file_with_the_path_and_creates_nothing(api):
    bad = edited(v2_doc(), lambda d: d["agents"][0]["block_ids"].append("block-404"))
    resp = api.client.post("/v1/agents/import", multipart(bad))
    assert resp.status_code == 422
    assert (
        "agents[0].block_ids[2]" in resp.json()["detail"] and resp.json()["errors"]["path"] == "agents[0].block_ids[2]"
    )
    assert Agent.objects.count() == 0 and Tool.objects.filter(tool_type="custom").count() == 0


def test_api_rejects_an_unknown_tool_policy(api):
    resp = api.client.post("/v1/agents/import", multipart(dumps(v2_doc()), tool_policy="duplicate"))
    assert resp.status_code == 422 and "tool_policy" in resp.json()["detail"]


def test_api_preview_and_export(api, account):
    preview = api.client.post("/v1/agents/import/preview", multipart(dumps(v2_doc())))
    assert preview.status_code == 200 and preview.json()["agents"][0]["name"] == "dice master"
    assert Agent.objects.count() == 0
    agent_id = api.client.post("/v1/agents/import", multipart(dumps(v2_doc()))).json()["agent_ids"][0]
    resp = api.get(f"/v1/agents/{agent_id}/export")
    assert resp.status_code == 200 and resp["Content-Disposition"] == 'attachment; filename="dice_master.af"'
    data = json.loads(resp.content)
    assert data["agents"][0]["name"] == "dice master" and len(data["agents"][0]["messages"]) == 6


def test_api_export_is_owner_scoped(api, other_account):
    agent, _ = _import(other_account.org, dumps(v2_doc()))
    assert api.get(f"/v1/agents/{agent.id}/export").status_code == 404


def test_letta_client_import_and_export(account):
    """The official SDK's multipart upload and export, through a WSGI transport (no sockets)."""
    import httpx
    from django.core.signals import request_finished, request_started
    from django.core.wsgi import get_wsgi_application
    from django.db import close_old_connections
    from letta_client import Letta

    http = httpx.Client(transport=httpx.WSGITransport(app=get_wsgi_application()), base_url="http://testserver")
    client = Letta(api_key=account.token, base_url="http://testserver", http_client=http)
    # As Django's test Client does: the request cycle must not close the test transaction's connection.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        result = client.agents.import_file(
            file=("dice.af", dumps(v2_doc()), "application/json"),
            override_name="sdk",
            override_existing_tools=False,
            strip_messages=False,
        )
        agent = Agent.objects.get(id=result.agent_ids[0])
        assert agent.name == "sdk" and len(agent.message_ids) == 6
        exported = json.loads(client.agents.export_file(agent.id))
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)
    assert exported["agents"][0]["name"] == "sdk"
