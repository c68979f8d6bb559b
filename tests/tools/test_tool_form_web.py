"""The typed tool form through Django's client: a Python tool run with the form as drawn gets its defaults (and not
its empty optional fields), a constraint error comes back beside its field with nothing run, what a tool prints is
readable while it runs (and over the output endpoint), a run without network says "network blocked by the
sandbox", built-in tools run as an agent and MCP tools get the same form on both pages."""

import re
import threading
import time

import pytest
from django.conf import settings

from memory.models import Block
from tests.factories import make_agent
from tests.tools.test_mcp import DEMO
from tools import mcp_services, services
from tools.mcp_client import manager
from tools.models import Tool, ToolRun
from tools.sandbox import live

PROBE = '''def probe(flag: bool = True, count: int = 3, label: str | None = None) -> str:
    """Say what arrived.

    Args:
        flag: A flag.
        count: How many.
        label: A label.
    """
    return f"flag={flag!r} count={count!r} label={label!r}"
'''

BOUNDED = '''def bounded(n: int) -> int:
    """Twice n.

    Args:
        n: A number.
    """
    return 2 * n
'''

CHATTY = '''def chatty(wait: float = 1.5) -> str:
    """Print, wait, print.

    Args:
        wait: Seconds between the lines.
    """
    import time
    print("first line")
    time.sleep(wait)
    print("second line")
    return "done"
'''

OFFLINE = '''def offline() -> str:
    """Fetch a page."""
    import urllib.request
    return urllib.request.urlopen("http://example.com", timeout=5).read(20).decode()
'''


def _page_form(html: str) -> dict:
    """What the browser submits from the drawn arguments form: inputs' values, ticked checkboxes, selected options."""
    form = {}
    for tag in re.findall(r"<input [^>]*>", html):
        name = re.search(r'name="(arg_[^"]*)"', tag)
        if not name:
            continue
        if 'type="checkbox"' in tag:
            if " checked" in tag:
                form[name.group(1)] = "on"
        else:
            form[name.group(1)] = re.search(r'value="([^"]*)"', tag).group(1)
    for name, options in re.findall(r'<select [^>]*name="(arg_[^"]*)"[^>]*>(.*?)</select>', html, re.S):
        chosen = re.search(r'<option value="([^"]*)" selected>', options) or re.search(r'value="([^"]*)"', options)
        form[name] = chosen.group(1)
    return form


def test_the_form_as_drawn_sends_the_defaults_and_no_empty_optional_field(web, account):
    drawn = web.post("/tools/schema/", {"source_code": PROBE}).content.decode()
    assert 'name="arg_flag" checked' in drawn and 'name="arg_count" value="3"' in drawn
    assert 'default <code class="arg-default">true</code>' in drawn
    form = _page_form(drawn)
    assert form == {"arg_flag": "on", "arg_count": "3", "arg_label": ""}
    out = web.post("/tools/run/", {"source_code": PROBE, "env_vars": "{}", **form}).content.decode()
    assert 'id="run-return">flag=True count=3 label=None<' in out
    assert ToolRun.objects.get(owner=account.org, tool_name="probe").args == {"flag": True, "count": 3}
    unticked = web.post("/tools/run/", {"source_code": PROBE, "env_vars": "{}", "arg_count": "3"}).content.decode()
    assert "flag=False count=3 label=None" in unticked


def test_a_constraint_error_comes_back_beside_its_field_and_nothing_runs(web, account):
    schema = services.tool_schema_resolve(source_code=BOUNDED, json_schema=None, name=None)
    assert schema["name"] == "bounded"
    out = web.post("/tools/run/", {"source_code": BOUNDED, "env_vars": "{}", "arg_n": "2.5"}).content.decode()
    assert 'id="wb-err-0" role="status" hx-swap-oob="true">&#x27;2.5&#x27; is not a whole number<' in out
    assert "Not run" in out and not ToolRun.objects.filter(owner=account.org).exists()
    ok = web.post("/tools/run/", {"source_code": BOUNDED, "env_vars": "{}", "arg_n": "4"}).content.decode()
    assert 'id="run-return">8<' in ok and 'id="wb-err-0" role="status" hx-swap-oob="true"><' in ok  # cleared


@pytest.mark.django_db(transaction=True)
def test_what_a_tool_prints_is_readable_while_it_runs(web, account):
    from tools import web_workbench

    key = f"{account.org.pk}:live-1"
    results = {}

    def run():
        from django.db import connection

        try:
            results["run"] = web_workbench.run(
                owner=account.org, source_code=CHATTY, args={"wait": 1.5}, env_vars={}, run_key="live-1"
            )
        finally:
            connection.close()

    worker = threading.Thread(target=run)
    worker.start()
    seen, since, deadline = [], 0, time.monotonic() + 30
    while not any("first line" in text for _, text in seen) and time.monotonic() < deadline:
        parts, since, done, _known = live.read(key, since)
        seen += parts
        time.sleep(0.02)
    assert ("stdout", "first line\n") in seen
    assert worker.is_alive() and not any("second" in text for _, text in seen)  # the first line came before the end
    worker.join()
    assert results["run"]["stdout"] == "first line\nsecond line\n"
    # the page's endpoint gives the whole output as server-sent events, then the end
    body = b"".join(web.get("/tools/run/output/", {"run_key": "live-1"})).decode()
    assert 'event: stdout\ndata: "first line\\n"' in body and 'data: "second line\\n"' in body
    assert body.endswith("event: end\ndata: {}\n\n")
    resumed = b"".join(web.get("/tools/run/output/", {"run_key": "live-1"}, HTTP_LAST_EVENT_ID="1")).decode()
    assert "first line" not in resumed and "second line" in resumed


def test_the_output_endpoint_is_scoped_to_the_owner(web, account, other_account, monkeypatch):
    monkeypatch.setattr("tools.web_workbench.UNSTARTED_WAIT_S", 0.5)
    with live.streaming(f"{other_account.org.pk}:theirs") as state:
        state.feed("stdout", b"secret\n")
    started = time.monotonic()
    body = b"".join(web.get("/tools/run/output/", {"run_key": "theirs"})).decode()
    assert "secret" not in body and body == "event: end\ndata: {}\n\n"
    assert time.monotonic() - started < 5  # no run of this owner started under the key: the stream ends


def test_a_run_without_network_says_the_sandbox_blocked_it(web):
    out = web.post("/tools/run/", {"source_code": OFFLINE, "env_vars": "{}"}).content.decode()
    assert 'id="run-return">network blocked by the sandbox: this run has no network' in out
    assert 'id="run-network">off<' in out


def test_a_builtin_tool_has_the_typed_form_and_runs_as_an_agent(web, account):
    agent = make_agent(account.org, name="Ada")
    web.get("/tools/")  # installs the built-in tools
    tool = Tool.objects.get(owner=account.org, name="memory_insert")
    services.tool_attach(agent=agent, tool=tool)
    workspace = web.get(f"/agents/{agent.id}/").content.decode()  # the agent's tools panel opens the tool as it
    assert f'href="/tools/?tool={tool.id}&amp;agent={agent.id}"' in workspace
    page = web.get(f"/tools/?tool={tool.id}&agent={agent.id}").content.decode()
    assert f'hx-post="/tools/{tool.id}/run/"' in page and 'id="source"' not in page
    assert 'name="arg_label"' in page and 'type="number" id="wb-arg-2" name="arg_insert_line"' in page
    assert f'<option value="{agent.id}" selected>Ada</option>' in page
    alone = web.post(f"/tools/{tool.id}/run/", {"arg_label": "human", "arg_new_string": "likes tea"}).content.decode()
    assert "pick the agent under “Run as agent”" in alone
    missing = web.post(f"/tools/{tool.id}/run/", {"arg_label": "human", "agent_id": agent.id}).content.decode()
    assert "new_string: required" in missing and 'id="wb-err-1" role="status" hx-swap-oob="true">required<' in missing
    out = web.post(
        f"/tools/{tool.id}/run/",
        {"arg_label": "human", "arg_new_string": "Likes tea.", "arg_insert_line": "-1", "agent_id": agent.id},
    ).content.decode()
    assert 'id="run-status">success<' in out and 'id="run-agent-name">Ada<' in out
    assert Block.objects.get(agents=agent, label="human").value.endswith("Likes tea.")


@pytest.fixture
def demo_server(account):
    server = mcp_services.mcp_server_create(
        owner=account.org,
        server_name="demo",
        config={"mcp_server_type": "stdio", "command": settings.MCP_DEMO_PYTHON, "args": [DEMO, "stdio"]},
    )
    yield server
    manager().close_all()


def test_an_mcp_tool_gets_the_typed_form_on_its_page_and_in_the_workbench(web, account, demo_server):
    add = Tool.objects.get(owner=account.org, mcp_server=demo_server, name="add")
    page = web.get("/mcp-servers/").content.decode()
    assert f'id="{add.id}-arg-0" name="arg_a"' in page and 'type="number"' in page
    wrong = web.post(f"/mcp-servers/{demo_server.id}/tools/{add.id}/run/", {"arg_a": "x", "arg_b": ""}).content
    wrong = wrong.decode()
    assert f'id="{add.id}-err-0" role="status" hx-swap-oob="true">&#x27;x&#x27; is not a whole number<' in wrong
    assert f'id="{add.id}-err-1" role="status" hx-swap-oob="true">required<' in wrong
    assert not ToolRun.objects.filter(tool=add).exists()
    ran = web.post(f"/mcp-servers/{demo_server.id}/tools/{add.id}/run/", {"arg_a": "2", "arg_b": "40"}).content
    assert b"<pre>42</pre>" in ran
    library = web.get("/tools/").content.decode()
    assert f'href="?tool={add.id}"' in library  # MCP tools open in the workbench too
    workbench = web.get(f"/tools/?tool={add.id}").content.decode()
    assert 'id="saved-tool-notice"' in workbench and 'name="arg_a" value="2"' in workbench  # the last run's
    out = web.post(f"/tools/{add.id}/run/", {"arg_a": "5", "arg_b": "6"}).content.decode()
    assert 'id="run-return">11<' in out and "MCP server demo" in out
