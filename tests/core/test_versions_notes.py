"""Agent versions, continued: the optional note a person gives with a save (IDE and API), versions made by an agent
step's own tool naming that step, and how the History tab presents a diff."""

import json
import textwrap

import pytest

from core.models import AgentVersion
from core.runs.runner import run_agent
from tests.factories import make_agent
from tests.fake_llm import FakeLLM
from tools import services as tool_services

pytestmark = pytest.mark.django_db

SOURCE = 'def shout(text: str) -> str:\n    """Shout it.\n\n    Args:\n        text: what to shout\n    """\n    return text.upper()\n'


@pytest.fixture
def agent(account):
    return make_agent(account.org, name="Ada")


def _latest(agent):
    return AgentVersion.objects.filter(agent=agent).order_by("-number").first()


def _note_value(html: str, note_id: str) -> str:
    tag = html.split(f'id="{note_id}"')[0].rsplit("<input", 1)[1] + html.split(f'id="{note_id}"')[1].split(">", 1)[0]
    return tag.split('value="', 1)[1].split('"', 1)[0]


def _settings(agent, **extra) -> dict:
    return {
        "name": agent.name,
        "model": agent.model,
        "system": agent.system,
        "temperature": "0.7",
        "max_steps": str(agent.max_steps),
        "context_window_limit": str(agent.context_window_limit),
        "tags": "",
        **extra,
    }


def test_settings_save_keeps_the_note_with_its_version_and_clears_the_field(web, agent):
    r = web.post(
        f"/agents/{agent.id}/settings/",
        _settings(agent, system="Be brief.", version_message="  users found it <b>wordy</b>  "),
        HTTP_HX_REQUEST="true",
    )
    assert r.status_code == 200 and b"Saved." in r.content
    v2 = _latest(agent)
    assert (v2.number, v2.author_kind, v2.message) == (2, "user", "users found it <b>wordy</b>")
    assert _note_value(r.content.decode(), "settings-version-note") == ""
    web.post(f"/agents/{agent.id}/settings/", _settings(agent, system="Be brief. Really."), HTTP_HX_REQUEST="true")
    assert _latest(agent).number == 3 and _latest(agent).message == ""  # no note: none kept


def test_a_refused_settings_save_keeps_the_note_typed(web, agent):
    r = web.post(
        f"/agents/{agent.id}/settings/",
        _settings(agent, max_steps="0", version_message="try fewer steps"),
        HTTP_HX_REQUEST="true",
    )
    assert r.status_code == 200 and b"Saved." not in r.content
    assert _note_value(r.content.decode(), "settings-version-note") == "try fewer steps"
    assert _latest(agent).number == 1


def test_rules_save_keeps_the_note_and_clears_it_only_when_saved(web, agent):
    rules = json.dumps([{"type": "exit_loop", "tool_name": "send_message"}])
    bad = web.post(f"/agents/{agent.id}/rules/", {"tool_rules": "[", "version_message": "stop early"})
    assert b"Not valid JSON" in bad.content and _note_value(bad.content.decode(), "rules-version-note") == "stop early"
    r = web.post(f"/agents/{agent.id}/rules/", {"tool_rules": rules, "version_message": "stop early"})
    assert r.status_code == 200 and b"Saved." in r.content
    assert _note_value(r.content.decode(), "rules-version-note") == ""
    v2 = _latest(agent)
    assert (v2.number, v2.message, v2.definition["tool_rules"][0]["type"]) == (2, "stop early", "exit_loop")


def test_attach_and_detach_in_the_workspace_take_a_note_or_describe_themselves(web, account, agent):
    tool = tool_services.tool_create(owner=account.org, source_code=SOURCE)
    r = web.post(f"/agents/{agent.id}/tools/{tool.id}/attach/", {"version_message": "needs to shout"})
    assert r.status_code == 200 and _note_value(r.content.decode(), "tools-version-note") == ""
    assert (_latest(agent).number, _latest(agent).message) == (2, "needs to shout")
    web.post(f"/agents/{agent.id}/tools/{tool.id}/detach/", {"version_message": ""})
    assert (_latest(agent).number, _latest(agent).message) == (3, "detached shout")


def test_tool_source_save_on_the_tools_page_notes_every_agent_using_it(web, account, agent):
    tool = tool_services.tool_create(owner=account.org, source_code=SOURCE)
    tool_services.tool_attach(agent=agent, tool=tool)
    other = make_agent(account.org, name="Bo", tools=["shout"])
    page = web.get(f"/tools/?tool={tool.id}").content.decode()
    assert 'id="tool-version-note"' in page
    r = web.post(
        "/tools/save/",
        {"source_code": SOURCE.replace("upper()", "upper() + '!'"), "tool_id": tool.id, "version_message": "louder"},
        HTTP_HX_REQUEST="true",
    )
    assert b'id="save-ok"' in r.content, r.content
    cleared = r.content.decode()
    assert 'hx-swap-oob="true"' in cleared.split('id="tool-version-note"')[1].split(">")[0]
    assert _note_value(cleared, "tool-version-note") == ""
    for a in (agent, other):
        latest = _latest(a)
        assert (latest.author_kind, latest.author, latest.message) == ("user", "alice", "louder")


def test_the_api_takes_a_version_message_on_agent_and_tool_updates(api, account, agent):
    tool = tool_services.tool_create(owner=account.org, source_code=SOURCE)
    tool_services.tool_attach(agent=agent, tool=tool)
    r = api.patch(
        f"/v1/tools/{tool.id}", {"source_code": SOURCE.replace("upper()", "upper() * 2"), "version_message": "twice"}
    )
    assert r.status_code == 200, r.content
    assert (_latest(agent).author_kind, _latest(agent).message) == ("token", "twice")
    r = api.patch(f"/v1/tools/{tool.id}", {"source_code": SOURCE})
    assert _latest(agent).message == "tool shout changed"  # no note: the change describes itself
    too_long = api.patch(f"/v1/tools/{tool.id}", {"description": "x", "version_message": "x" * 501})
    assert too_long.status_code == 422
    spec = api.get("/v1/openapi.json").json()["components"]["schemas"]
    assert "version_message" in spec["ToolUpdateIn"]["properties"]
    assert "version_message" in spec["AgentUpdateIn"]["properties"]


SELF_TAGGING = textwrap.dedent('''
    import json, os, urllib.request

    def tag_myself(tag: str) -> str:
        """Add a tag to the agent running this tool, through the API.

        Args:
            tag: The tag to add.
        """
        url = os.environ["AIDE_BASE_URL"] + "/v1/agents/" + os.environ["AIDE_AGENT_ID"]
        req = urllib.request.Request(url, data=json.dumps({"tags": [tag]}).encode(), method="PATCH",
                                     headers={"Authorization": "Bearer " + os.environ["AIDE_API_TOKEN"],
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=20) as resp:
            return ",".join(json.load(resp)["tags"])
''')


@pytest.mark.django_db(transaction=True)
def test_a_tool_that_changes_its_agent_in_a_step_names_the_step(live_server, account, fake_llm, settings):
    """A real callback: the sandboxed tool, allowed the network, PATCHes its own agent on a live server."""
    settings.PUBLIC_BASE_URL = live_server.url.replace("localhost", "127.0.0.1")
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
    agent = make_agent(account.org, name="self-tagger")
    tool = tool_services.tool_create(owner=account.org, source_code=SELF_TAGGING, allow_network=True)
    tool_services.tool_attach(agent=agent, tool=tool)
    before = _latest(agent).number
    fake_llm.script(
        FakeLLM.tool("tag_myself", {"tag": "curious"}, heartbeat=True), FakeLLM.tool("send_message", {"message": "ok"})
    )
    result = run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "go"}])
    ret = next(m for m in result.messages if m["message_type"] == "tool_return_message")
    assert ret["status"] == "success", ret
    made = _latest(agent)
    assert made.number == before + 1 and made.definition["tags"] == ["curious"]
    assert (made.author_kind, made.author) == ("agent", ret["step_id"])


def test_the_history_tab_names_a_step_author_and_links_to_its_step(web, account, agent):
    from core.agents import versions

    with versions.authored_by(versions.Author("agent", "step-0123-abcdef01")):
        tool_services.tool_attach(agent=agent, tool=tool_services.tool_create(owner=account.org, source_code=SOURCE))
    html = web.get(f"/agents/{agent.id}/versions/").content.decode()
    row = html.split('data-version="2"')[1].split("</li>")[0]
    assert 'class="step-chip" data-step="step-0123-abcdef01"' in row and "step abcdef01" in row


def test_the_diff_labels_fields_and_shows_structured_values_as_json(api, web, agent):
    api.patch(
        f"/v1/agents/{agent.id}",
        {
            "system": "New prompt.",
            "tool_rules": [{"type": "exit_loop", "tool_name": "send_message"}],
            "context_window_limit": 9000,
            "tags": ["a", "b"],
        },
    )
    html = web.get(f"/agents/{agent.id}/versions/diff/?number=2&against=1", HTTP_HX_REQUEST="true").content.decode()
    fields = {part.split('"', 1)[0]: part.split("</div>\n  </div>")[0] for part in html.split('data-field="')[1:]}
    assert set(fields) == {"system", "tool_rules", "context_window_limit", "tags"}
    assert "System prompt" in fields["system"] and '<span class="add">+New prompt.</span>' in fields["system"]
    assert '<span class="hunk">--- system@v1</span>' in fields["system"]
    assert '<span class="add">+    &quot;tool_name&quot;: &quot;send_message&quot;,</span>' in fields["tool_rules"]
    assert "@@" not in fields["tool_rules"]  # a value set from nothing: one hunk, no marker
    assert '<span class="del">16000</span>' in fields["context_window_limit"]
    assert '<span class="add">9000</span>' in fields["context_window_limit"]
    assert '<span class="del">—</span>' in fields["tags"] and '<span class="add">a, b</span>' in fields["tags"]


def test_restore_in_the_ide_sends_the_restored_settings_tools_and_rules_along(api, account, web, agent):
    tool = tool_services.tool_create(owner=account.org, source_code=SOURCE)
    api.patch(f"/v1/agents/{agent.id}", {"system": "Later prompt.", "tags": ["later"], "tool_rules": []})
    tool_services.tool_attach(agent=agent, tool=tool)
    r = web.post(f"/agents/{agent.id}/versions/1/restore/", {}, HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert "Restored as version 4" in html
    settings, rest = html.split('<section id="settings-form" hx-swap-oob="true">')[1].split("</section>", 1)
    assert agent.system in settings and "Later prompt." not in settings and 'value="later"' not in settings
    tools = rest.split('<section id="tools-attached" hx-swap-oob="true">')[1].split("</section>")[0]
    assert ">shout</option>" in tools and "Detach shout" not in tools  # detached again, attachable
    assert '<section id="rules" hx-swap-oob="true">' in rest


def test_a_change_made_in_process_during_a_step_names_the_step(account, agent, fake_llm, monkeypatch):
    """Built-in tools run in the runner's own thread: a definition they changed would name the step too."""
    from core.agents.services import agent_update
    from core.runs import tool_exec

    builtin = tool_exec._builtin

    def tagging_search(call, snap, step_id):
        if call.name == "conversation_search":
            agent_update(agent=snap.agent, changes={"tags": ["searched"]})
        return builtin(call, snap, step_id)

    monkeypatch.setattr(tool_exec, "_builtin", tagging_search)
    fake_llm.script(
        FakeLLM.tool("conversation_search", {"query": "x"}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "ok"}),
    )
    result = run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "go"}])
    ret = next(m for m in result.messages if m["message_type"] == "tool_return_message")
    made = _latest(agent)
    assert made.definition["tags"] == ["searched"]
    assert (made.author_kind, made.author) == ("agent", ret["step_id"])
