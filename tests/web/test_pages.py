"""IDE pages render, forms validate inline, and reading never writes."""

import json

import pytest

from core.models import Agent, Message
from memory.models import Block
from tests.factories import make_agent
from tools.models import Tool


@pytest.fixture
def agent(account):
    return make_agent(account.org, name="Ada", tags=["demo"])


def _snapshot(agent_id):
    row = Agent.objects.filter(id=agent_id).values().get()
    return (
        row,
        Message.objects.filter(agent_id=agent_id).count(),
        list(Block.objects.values_list("id", "version", "value")),
    )


def test_reading_every_page_never_writes(web, agent):
    Tool.objects.all().count()
    web.get("/tools/")  # creates the owner's built-in tool rows once, not an agent change
    before = _snapshot(agent.id)
    block = Block.objects.filter(agentblock__agent=agent).first()
    for url in [
        "/",
        f"/agents/{agent.id}/",
        f"/agents/{agent.id}/context/",
        f"/agents/{agent.id}/blocks/",
        f"/agents/{agent.id}/archival/",
        f"/agents/{agent.id}/recall/?rq=x",
        f"/agents/{agent.id}/delete/",
        "/blocks/",
        f"/blocks/{block.id}/",
        "/tools/",
        "/settings/",
        "/?q=Ad",
        "/?tag=demo",
    ]:
        response = web.get(url)
        assert response.status_code == 200, url
    # previews are POSTs that store nothing
    assert web.post(f"/agents/{agent.id}/tokens/", {"system": "hello there"}).status_code == 200
    assert (
        web.post(
            "/tools/schema/",
            {
                "source_code": 'def f(x: int) -> int:\n    """Doc.\n\n    Args:\n        x: a number\n    """\n    return x\n'
            },
        ).status_code
        == 200
    )
    assert _snapshot(agent.id) == before


def test_agents_list_shows_agents_and_filters_by_tag(web, account, agent):
    make_agent(account.org, name="Babbage")
    page = web.get("/").content.decode()
    assert "Ada" in page and "Babbage" in page
    page = web.get("/?tag=demo").content.decode()
    assert "Ada" in page and "Babbage" not in page
    rows = web.get("/?q=Bab", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="agents-rows").content.decode()
    assert "Babbage" in rows and "Ada" not in rows and "<html" not in rows


def test_create_from_template_duplicate_and_delete(web, account):
    response = web.post("/agents/new/", {"name": "Chat", "template": "af:memgpt_chat", "model": "openai/gpt-4o-mini"})
    assert response.status_code == 302
    agent = Agent.objects.get(name="Chat")
    assert sorted(agent.blocks.values_list("label", flat=True)) == ["human", "persona"]
    assert web.post(f"/agents/{agent.id}/duplicate/").status_code == 302
    copy = Agent.objects.get(name="Chat (copy)")
    assert sorted(copy.blocks.values_list("label", flat=True)) == ["human", "persona"]
    assert set(copy.blocks.values_list("id", flat=True)).isdisjoint(agent.blocks.values_list("id", flat=True))
    assert web.post(f"/agents/{copy.id}/delete/").status_code == 302
    assert not Agent.objects.filter(id=copy.id).exists()


def test_create_form_errors_inline(web):
    response = web.post("/agents/new/", {"name": "", "template": "af:memgpt_chat", "model": "openai/x"})
    assert response.status_code == 400 and b"errorlist" in response.content or b"error" in response.content
    assert not Agent.objects.exists()


def test_settings_save_and_inline_errors(web, agent):
    data = {
        "name": "Ada 2",
        "model": agent.model,
        "system": "Be brief.",
        "temperature": "0.3",
        "max_steps": "7",
        "context_window_limit": "4096",
        "tags": "a, b",
    }
    response = web.post(f"/agents/{agent.id}/settings/", data, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and b"Saved." in response.content
    agent.refresh_from_db()
    assert (agent.name, agent.system, agent.max_steps, agent.context_window_limit) == ("Ada 2", "Be brief.", 7, 4096)
    assert agent.model_settings["temperature"] == 0.3
    bad = web.post(f"/agents/{agent.id}/settings/", {**data, "context_window_limit": "10"}, HTTP_HX_REQUEST="true")
    assert b"Ensure this value is greater than or equal to" in bad.content
    agent.refresh_from_db()
    assert agent.context_window_limit == 4096


def test_tool_rules_invalid_json_and_invalid_rule_shown_inline(web, agent):
    r = web.post(f"/agents/{agent.id}/rules/", {"tool_rules": "[{"})
    assert b"Not valid JSON" in r.content
    r = web.post(f"/agents/{agent.id}/rules/", {"tool_rules": json.dumps([{"type": "nope", "tool_name": "x"}])})
    assert b"tool_rules[0] is invalid" in r.content
    r = web.post(
        f"/agents/{agent.id}/rules/", {"tool_rules": json.dumps([{"type": "exit_loop", "tool_name": "send_message"}])}
    )
    assert b"Saved." in r.content
    agent.refresh_from_db()
    assert agent.tool_rules[0]["type"] == "exit_loop"


def test_block_edit_enforces_limit_inline(web, agent):
    block = Block.objects.get(agentblock__agent=agent, label="human")
    r = web.post(f"/agents/{agent.id}/blocks/{block.id}/save/", {"value": "x" * 50, "limit": "10"})
    assert b"over the block" in r.content
    block.refresh_from_db()
    assert block.value == "The user's name is Alice."
    r = web.post(f"/agents/{agent.id}/blocks/{block.id}/save/", {"value": "Name: Bob", "limit": "100"})
    assert r.status_code == 200 and "block-saved" in r.headers.get("HX-Trigger", "")
    block.refresh_from_db()
    assert (block.value, block.limit, block.version) == ("Name: Bob", 100, 2)
    page = web.get(f"/agents/{agent.id}/context/").content.decode()
    assert "Name: Bob" in page


def test_block_history_and_restore(web, agent):
    block = Block.objects.get(agentblock__agent=agent, label="persona")
    web.post(f"/blocks/{block.id}/", {"value": "new persona", "limit": "5000", "description": ""})
    page = web.get(f"/blocks/{block.id}/").content.decode()
    assert "v2" in page and "<ins>+new persona</ins>" in page
    assert web.post(f"/blocks/{block.id}/restore/1/").status_code == 302
    block.refresh_from_db()
    assert block.value == "I am a helpful test agent." and block.version == 3


def test_history_is_paginated_and_escaped(web, account, agent):
    from core.models import Message

    for i in range(1, 101):
        Message.objects.create(owner=account.org, agent=agent, seq=i, role="user", text=f"<b>msg {i}</b>")
    page = web.get(f"/agents/{agent.id}/").content.decode()
    assert "&lt;b&gt;msg 100&lt;/b&gt;" in page and "<b>msg 100</b>" not in page
    assert "msg 50<" not in page and "Load older messages" in page
    older = web.get(f"/agents/{agent.id}/history/?before=61").content.decode()
    assert "msg 60&lt;" in older and "msg 21&lt;" in older and "msg 61&lt;" not in older


def test_context_panel_shows_sections_tokenizer_and_payload(web, agent):
    page = web.get(f"/agents/{agent.id}/context/").content.decode()
    for label in ("System prompt", "Core memory", "Tool definitions", "Messages", "Counted with"):
        assert label in page
    assert "&quot;messages&quot;" in page and "The user&#x27;s name is Alice." in page


def test_tools_page_schema_preview_errors_and_run(web, account):
    src = 'def add(a: int, b: int) -> int:\n    """Add.\n\n    Args:\n        a: first\n        b: second\n    """\n    print(\'adding\')\n    return a + b\n'
    r = web.post("/tools/schema/", {"source_code": src}).content.decode()
    assert 'name="arg_a"' in r and "&quot;required&quot;" in r
    bad = web.post("/tools/schema/", {"source_code": "def add(a, b):\n    return a\n"}).content.decode()
    assert "Schema error" in bad and "a" in bad
    run = web.post("/tools/run/", {"source_code": src, "arg_a": "2", "arg_b": "3", "env_vars": "{}"}).content.decode()
    assert 'id="run-return">5<' in run and "adding" in run and "local" in run
    missing = web.post("/tools/run/", {"source_code": src, "arg_a": "2", "env_vars": "{}"}).content.decode()
    assert "b: required" in missing
    saved = web.post("/tools/save/", {"source_code": src, "env_vars": "{}", "sandbox": ""}, HTTP_HX_REQUEST="true")
    assert saved.status_code == 200 and Tool.objects.filter(owner=account.org, name="add").exists()


def test_other_owners_agent_is_404(web, other_account):
    theirs = make_agent(other_account.org, name="secret")
    for url in [f"/agents/{theirs.id}/", f"/agents/{theirs.id}/context/", f"/agents/{theirs.id}/blocks/"]:
        assert web.get(url).status_code == 404


def test_import_previews_before_creating_then_confirms(web, account, agent):
    from django.core.files.uploadedfile import SimpleUploadedFile

    exported = web.get(f"/agents/{agent.id}/export/")
    assert exported.status_code == 200 and "attachment" in exported["Content-Disposition"]
    upload = SimpleUploadedFile("ada.af", exported.content, content_type="application/json")
    n = Agent.objects.count()
    preview = web.post("/agents/import/", {"file": upload})
    assert preview.status_code == 200 and b"This will create" in preview.content and b"persona" in preview.content
    assert Agent.objects.count() == n  # the preview stores nothing
    again = SimpleUploadedFile("ada.af", exported.content, content_type="application/json")
    done = web.post("/agents/import/", {"file": again, "confirm": "1", "name": "Ada imported"})
    assert done.status_code == 302 and Agent.objects.filter(name="Ada imported").exists()
    bad = web.post(
        "/agents/import/", {"file": SimpleUploadedFile("x.af", b"{not json", content_type="application/json")}
    )
    assert bad.status_code == 400 and b"not valid JSON" in bad.content
