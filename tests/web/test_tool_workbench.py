"""The tools page as a workbench: saving keeps the page, what the API edits (pip, env, sandbox, network,
delete), defaults, arguments from the last run, and what a run without an agent lacks."""

import threading

import pytest
from django.template import Context, Template

from tests.factories import make_agent
from tools import services
from tools.models import Tool, ToolRun

GREET = '''def greet(name: str, times: int = 2) -> str:
    """Greet someone.

    Args:
        name: Who to greet.
        times: How often.
    """
    return " ".join(["hi " + name] * times)
'''

WHO_AM_I = '''def who_am_i(agent_state: "AgentState") -> str:
    """Say which agent runs this tool and what it was given.

    """
    import os
    return "|".join([os.environ.get("AIDE_AGENT_ID", "-"), agent_state.name if agent_state else "-",
                     "token" if os.environ.get("AIDE_API_TOKEN") else "no-token", os.environ.get("GREETING", "-")])
'''


def test_saving_a_new_tool_keeps_the_page_and_gives_it_its_id(web, account):
    r = web.post(
        "/tools/save/",
        {"source_code": GREET, "env_vars": "{}", "sandbox": "", "allow_network": "", "pip_requirements": ""},
        HTTP_HX_REQUEST="true",
    )
    tool = Tool.objects.get(owner=account.org, name="greet")
    assert r.status_code == 200 and "HX-Redirect" not in r.headers
    assert r.headers["HX-Push-Url"] == f"/tools/?tool={tool.id}"
    body = r.content.decode()
    assert f'id="tool-id" value="{tool.id}" hx-swap-oob="true"' in body and "Saved" in body
    # saving again (now with the id) updates the same tool and pushes nothing
    again = web.post(
        "/tools/save/",
        {"source_code": GREET.replace("Greet someone", "Say hello"), "tool_id": tool.id, "env_vars": "{}"},
        HTTP_HX_REQUEST="true",
    )
    assert (
        again.status_code == 200 and "HX-Push-Url" not in again.headers and 'id="tool-id"' not in again.content.decode()
    )
    assert Tool.objects.filter(owner=account.org, name="greet").count() == 1


def test_tool_page_edits_pip_network_sandbox_and_write_only_secrets(web, account):
    tool = services.tool_create(owner=account.org, source_code=GREET, env_vars={"API_KEY": "s3cret-value"})
    r = web.post(
        "/tools/save/",
        {
            "source_code": GREET,
            "tool_id": tool.id,
            "sandbox": "local",
            "allow_network": "true",
            "pip_requirements": "requests==2.32.3\nrich>=13\n\n",
            "env_vars": '{"OTHER": "x"}',
        },
        HTTP_HX_REQUEST="true",
    )
    assert r.status_code == 200, r.content
    tool.refresh_from_db()
    assert tool.sandbox == "local" and tool.allow_network is True
    assert tool.pip_requirements == [{"name": "requests", "version": "2.32.3"}, {"name": "rich", "version": ">=13"}]
    assert tool.env_vars == {"API_KEY": "s3cret-value", "OTHER": "x"}  # merged: the stored secret is kept
    page = web.get(f"/tools/?tool={tool.id}").content.decode()
    assert "s3cret-value" not in page and "<code>API_KEY</code>" in page and "<code>OTHER</code>" in page
    assert "requests==2.32.3\nrich&gt;=13" in page
    assert '<option value="true" selected>allowed</option>' in page
    web.post(
        "/tools/save/",
        {"source_code": GREET, "tool_id": tool.id, "env_vars": '{"API_KEY": null}', "allow_network": "false"},
        HTTP_HX_REQUEST="true",
    )
    tool.refresh_from_db()
    assert tool.env_vars == {"OTHER": "x"} and tool.allow_network is False and tool.pip_requirements == []
    bad = web.post(
        "/tools/save/",
        {"source_code": GREET, "tool_id": tool.id, "pip_requirements": "--index-url=http://x"},
        HTTP_HX_REQUEST="true",
    ).content.decode()
    assert 'id="save-error"' in bad and "invalid package name" in bad
    bad = web.post(
        "/tools/save/", {"source_code": GREET, "tool_id": tool.id, "pip_requirements": "==1"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert 'id="save-error"' in bad and "invalid package name" in bad


def test_delete_lists_the_agents_using_the_tool_first(web, account):
    tool = services.tool_create(owner=account.org, source_code=GREET)
    ada = make_agent(account.org, name="Ada <b>")
    services.tool_attach(agent=ada, tool=tool)
    page = web.get(f"/tools/?tool={tool.id}").content.decode()
    assert "It is attached to: Ada &lt;b&gt; — they lose it." in page
    r = web.post(f"/tools/{tool.id}/delete/", HTTP_HX_REQUEST="true")
    assert r.headers["HX-Redirect"] == "/tools/" and not Tool.objects.filter(pk=tool.pk).exists()
    builtin = Tool.objects.filter(owner=account.org).exclude(tool_type="custom").first()
    refused = web.post(f"/tools/{builtin.id}/delete/", HTTP_HX_REQUEST="true").content.decode()
    assert "built-in" in refused and Tool.objects.filter(pk=builtin.pk).exists()


def test_schema_shows_defaults_and_arguments_come_back_from_the_last_run(web, account):
    tool = services.tool_create(owner=account.org, source_code=GREET)
    page = web.get(f"/tools/?tool={tool.id}").content.decode()
    assert 'default <code class="arg-default">2</code>' in page and 'id="prefill-note"' not in page
    run = web.post(
        "/tools/run/", {"source_code": GREET, "tool_id": tool.id, "arg_name": "Bob", "arg_times": "3", "env_vars": "{}"}
    ).content.decode()
    assert 'id="run-return">hi Bob hi Bob hi Bob<' in run
    page = web.get(f"/tools/?tool={tool.id}").content.decode()
    assert (
        'name="arg_name" value="Bob"' in page and 'name="arg_times" value="3"' in page and 'id="prefill-note"' in page
    )


def test_run_without_an_agent_says_what_it_lacks_and_as_an_agent_gets_it(web, account):
    agent = make_agent(account.org, name="Ada")
    agent.secrets = {"GREETING": "hello"}
    agent.save(update_fields=["secrets"])
    alone = web.post("/tools/run/", {"source_code": WHO_AM_I, "env_vars": "{}"}).content.decode()
    assert 'id="run-lacks"' in alone and "<code>AIDE_API_TOKEN</code>" in alone and "<code>agent_state</code>" in alone
    assert 'id="run-return">-|-|no-token|-<' in alone
    as_agent = web.post(
        "/tools/run/", {"source_code": WHO_AM_I, "env_vars": "{}", "agent_id": agent.id}
    ).content.decode()
    assert 'id="run-lacks"' not in as_agent and 'id="run-agent-name">Ada<' in as_agent
    assert f'id="run-return">{agent.id}|Ada|token|hello<' in as_agent
    assert ToolRun.objects.filter(owner=account.org, tool_name="who_am_i", agent_id=agent.id).exists()


@pytest.mark.django_db(transaction=True)
def test_cancel_stops_a_running_tool(web, account):
    sleeper = (
        'def nap() -> str:\n    """Sleep a long time."""\n    import time\n    time.sleep(300)\n    return "woke"\n'
    )
    results = {}

    def run():
        from django.db import connection

        from tools import web_workbench

        try:
            results["run"] = web_workbench.run(
                owner=account.org, source_code=sleeper, args={}, env_vars={}, run_key="k1"
            )
        finally:
            connection.close()

    worker = threading.Thread(target=run)
    worker.start()
    # the run's key exists once its request reached the server; cancelling asks until it does
    while worker.is_alive() and not web.post("/tools/run/cancel/", {"run_key": "k1"}).json()["cancelled"]:
        worker.join(0.05)
    worker.join()
    assert results["run"]["cancelled"] is True and results["run"]["status"] == "error"
    assert results["run"]["error_type"] == "Cancelled" and results["run"]["tool_return"].startswith("Cancelled")
    assert ToolRun.objects.get(pk=results["run"]["tool_run_id"]).tool_return.startswith("Cancelled")
    assert web.post("/tools/run/cancel/", {"run_key": "k1"}).json() == {"cancelled": False}


def test_cancel_is_scoped_to_the_owner(web, account, other_account):
    from tools.sandbox.cancel import cancellable

    with cancellable(f"{other_account.org.pk}:theirs") as state:
        assert web.post("/tools/run/cancel/", {"run_key": "theirs"}).json() == {"cancelled": False}
    assert state.cancelled is False


def test_the_library_wraps_long_names_at_their_underscores_and_escapes_them(web, account):
    services.tool_create(owner=account.org, source_code=GREET.replace("def greet(", "def greet_every_guest_by_name("))
    html = web.get("/tools/").content.decode()
    assert "<code>greet_<wbr>every_<wbr>guest_<wbr>by_<wbr>name</code>" in html
    rendered = Template("{% load ide %}{{ name|breakable }}").render(Context({"name": "<b>x_y</b>"}))
    assert rendered == "&lt;b&gt;x_<wbr>y&lt;/b&gt;"


def test_the_schema_preview_keeps_what_the_person_changed_and_redraws_what_the_form_drew(web):
    source = GREET.replace("times: int = 2", "times: int = 5")
    drawn = {"drawn:arg_name": "", "drawn:arg_times": "2"}
    page = web.post("/tools/schema/", {"source_code": source, "arg_name": "Bob", "arg_times": "2", **drawn})
    html = page.content.decode()
    assert 'name="arg_name" value="Bob"' in html  # typed: kept
    assert 'name="arg_times" value="5"' in html  # the old default, untouched: the new one
    html = web.post("/tools/schema/", {"source_code": source, "arg_times": "7", **drawn}).content.decode()
    assert 'name="arg_times" value="7"' in html and 'name="drawn:arg_times" value="5"' in html  # kept next time too
