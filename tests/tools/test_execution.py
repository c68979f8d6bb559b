"""Running tools: the workbench endpoint, an agent's attached tool, env layering, agent_state, the API token,
run history, and which sandbox runs a tool (explicit; an E2B key alone never switches it)."""

import json
import textwrap

import pytest

from core.errors import Invalid
from tests.factories import make_agent
from tools.models import ToolRun

ECHO = textwrap.dedent('''
    import sys

    def echo(text: str, times: int = 1) -> str:
        """Repeat text.

        Args:
            text: What to repeat.
            times: How often.
        """
        print("out:", text)
        print("err:", text, file=sys.stderr)
        return text * times
''')

BOOM = textwrap.dedent('''
    def boom(reason: str) -> str:
        """Always fails.

        Args:
            reason: Why.
        """
        raise ValueError("boom: " + reason)
''')

ENV = textwrap.dedent('''
    import os

    def env(names: list[str]) -> dict:
        """Read environment variables.

        Args:
            names: Variables to read.
        """
        return {n: os.environ.get(n) for n in names}
''')

STATE = textwrap.dedent('''
    import os

    def whoami(agent_state) -> dict:
        """Describe the calling agent."""
        return {"id": agent_state.id, "name": agent_state.name, "tags": agent_state.tags,
                "human": agent_state.memory.get_block("human").value,
                "labels": agent_state.memory.list_block_labels(), "secret": os.environ.get("WEATHER_KEY")}
''')


def run(api, source, args=None, **body):
    return api.post("/v1/tools/run", {"source_code": source, "args": args or {}, **body})


def test_success_reports_letta_shape_with_separate_streams_and_sandbox(api, account):
    r = run(api, ECHO, {"text": "hi", "times": 2}, env_vars={})
    assert r.status_code == 200, r.content
    out = r.json()
    assert out["message_type"] == "tool_return_message" and out["status"] == "success"
    assert out["tool_return"] == "hihi"
    assert out["stdout"] == ["out: hi\n"] and out["stderr"] == ["err: hi\n"]
    assert out["sandbox"] == "local" and out["duration_ms"] > 0 and out["network"] is False
    assert out["id"] and out["date"] and out["tool_call_id"]
    rec = ToolRun.objects.get(id=out["tool_run_id"])
    assert (rec.owner_id, rec.tool_name, rec.origin, rec.args, rec.status, rec.sandbox) == (
        account.org.id,
        "echo",
        "workbench",
        {"text": "hi", "times": 2},
        "success",
        "local",
    )
    assert rec.stdout == "out: hi\n" and rec.stderr == "err: hi\n"


def test_exception_is_an_error_with_type_message_and_traceback_in_stderr(api):
    out = run(api, BOOM, {"reason": "bad input"}).json()
    assert out["status"] == "error"
    assert out["tool_return"] == "ValueError: boom: bad input"
    assert out["error_type"] == "ValueError" and out["error_message"] == "boom: bad input"
    assert "Traceback" in out["stderr"][0] and 'raise ValueError("boom: " + reason)' in out["stderr"][0]
    assert ToolRun.objects.get(id=out["tool_run_id"]).status == "error"


def test_arguments_are_validated_before_running(api):
    r = run(api, ECHO, {"times": "two", "colour": "red"})
    assert r.status_code == 422
    errors = r.json()["errors"]
    assert errors["text"] == "required argument is missing"
    assert errors["times"].startswith("expected integer, got string")
    assert errors["colour"].startswith("unknown argument")
    assert not ToolRun.objects.exists()


def test_bad_source_and_unknown_sandbox_are_rejected(api):
    r = run(api, "def f(x):\n    return x\n")
    assert r.status_code == 422 and "no docstring" in r.json()["detail"]
    r = run(api, ECHO, {"text": "x"}, sandbox="docker")
    assert r.status_code == 422 and "unknown sandbox backend 'docker'" in r.json()["detail"]


def test_env_vars_reach_the_tool_but_the_servers_do_not(api, monkeypatch):
    monkeypatch.setenv("SERVER_ONLY_SECRET", "do-not-leak")
    out = run(
        api,
        ENV,
        {"names": ["MY_VAR", "SERVER_ONLY_SECRET", "DATABASE_URL", "AIDE_API_TOKEN"]},
        env_vars={"MY_VAR": "hello"},
    ).json()
    assert out["status"] == "success", out
    assert (
        out["tool_return"]
        == '{"MY_VAR": "hello", "SERVER_ONLY_SECRET": null, "DATABASE_URL": null, "AIDE_API_TOKEN": null}'
    )
    assert run(api, ENV, {"names": []}, env_vars={"1BAD": "x"}).status_code == 422


def test_agent_secrets_and_agent_state_with_an_agent(api, account):
    agent = make_agent(account.org, name="weatherbot", tags=["demo"], secrets={"WEATHER_KEY": "s3cret"})
    out = run(api, STATE, agent_id=agent.id).json()
    assert out["status"] == "success", out
    got = json.loads(out["tool_return"])
    assert got == {
        "id": agent.id,
        "name": "weatherbot",
        "tags": ["demo"],
        "human": "The user's name is Alice.",
        "labels": ["persona", "human"],
        "secret": "s3cret",
    }
    assert ToolRun.objects.get(id=out["tool_run_id"]).agent_id == agent.id


def test_env_layering_per_run_beats_secrets_and_aide_vars_are_given(api, account):
    agent = make_agent(account.org, secrets={"A": "secret", "B": "secret"})
    out = run(
        api, ENV, {"names": ["A", "B", "AIDE_AGENT_ID", "AIDE_BASE_URL"]}, env_vars={"B": "per-run"}, agent_id=agent.id
    ).json()
    env = json.loads(out["tool_return"])
    assert env["A"] == "secret" and env["B"] == "per-run"
    assert env["AIDE_AGENT_ID"] == agent.id and env["AIDE_BASE_URL"].startswith("http")


def test_tool_env_defaults_apply_to_workbench_runs_only(account):
    from tools.execution import tool_execute
    from tools.services import tool_create

    tool = tool_create(owner=account.org, source_code=ENV, env_vars={"DEFAULT_VAR": "workbench"})
    agent = make_agent(account.org, secrets={})
    wb = tool_execute(owner=account.org, source_code=ENV, args={"names": ["DEFAULT_VAR"]})
    assert wb.tool_return == '{"DEFAULT_VAR": "workbench"}' and wb.tool_id == tool.id
    ag = tool_execute(
        owner=account.org,
        source_code=tool.source_code,
        args={"names": ["DEFAULT_VAR"]},
        tool=tool,
        agent=agent,
        origin="agent",
        step_id="step-1",
    )
    assert ag.tool_return == '{"DEFAULT_VAR": null}'
    assert (ag.origin, ag.step_id, ag.agent_id) == ("agent", "step-1", agent.id)
    unsaved = tool_execute(owner=account.org, source_code=ENV, args={"names": []}, record=False)
    assert unsaved._state.adding and unsaved.result.status == "success"


def test_agent_token_is_scoped_to_the_owner_and_revoked_after_the_run(account, settings):
    from core.accounts import principal_from_token
    from core.models import ApiToken
    from tools.execution import tool_execute

    agent = make_agent(account.org)
    run_ = tool_execute(owner=account.org, source_code=ENV, args={"names": ["AIDE_API_TOKEN"]}, agent=agent)
    raw = json.loads(run_.tool_return)["AIDE_API_TOKEN"]
    token = ApiToken.objects.get(agent_id=agent.id)
    assert token.organization_id == account.org.id and raw.startswith(token.prefix)
    lifetime = (token.expires_at - token.created_at).total_seconds()
    assert settings.SANDBOX_TIMEOUT_S < lifetime <= settings.SANDBOX_TIMEOUT_S + 60  # the run's timeout + 60 s
    assert token.revoked_at is not None and principal_from_token(raw) is None


CALLBACK = textwrap.dedent('''
    import json, os, urllib.request

    def list_agents() -> list:
        """List the agents this tool's token can see."""
        req = urllib.request.Request(os.environ["AIDE_BASE_URL"] + "/v1/agents/",
                                     headers={"Authorization": "Bearer " + os.environ["AIDE_API_TOKEN"]})
        with urllib.request.urlopen(req, timeout=20) as resp:
            return sorted(a["id"] for a in json.load(resp))
''')


def test_tool_calls_our_api_with_its_token_and_sees_only_its_owners_agents(
    live_server, account, other_account, settings
):
    """A real callback: the sandboxed tool, allowed the network, makes an HTTP request to a live server of this
    test database."""
    from tools.execution import tool_execute
    from tools.services import tool_create

    settings.PUBLIC_BASE_URL = live_server.url.replace("localhost", "127.0.0.1")
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
    mine = [make_agent(account.org, name="one"), make_agent(account.org, name="two")]
    make_agent(other_account.org, name="theirs")
    tool = tool_create(owner=account.org, source_code=CALLBACK, allow_network=True)
    out = tool_execute(owner=account.org, source_code=CALLBACK, args={}, agent=mine[0], tool=tool)
    assert out.status == "success", out.stderr
    assert out.tool_return == repr_list(sorted(a.id for a in mine))
    assert out.network is True and ToolRun.objects.get(pk=out.pk).network is True


def test_without_network_a_tool_cannot_reach_the_server(live_server, account, settings):
    """The server's own port is out of reach by default, like every other local service."""
    from tools.execution import tool_execute

    settings.PUBLIC_BASE_URL = live_server.url.replace("localhost", "127.0.0.1")
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
    out = tool_execute(owner=account.org, source_code=CALLBACK, args={}, agent=make_agent(account.org))
    assert out.status == "error" and out.network is False
    assert out.result.error_type == "URLError" and "Connection refused" in out.result.error_message
    assert out.tool_return.startswith("network blocked by the sandbox: this run has no network")  # said plainly


def test_network_is_chosen_explicitly_and_shown_with_each_run(api, account, settings):
    from tools.execution import tool_network_allowed

    settings.SANDBOX_ALLOW_NETWORK = False
    out = run(api, ECHO, {"text": "x"}).json()
    assert out["network"] is False
    assert run(api, ECHO, {"text": "x"}, allow_network=True).json()["network"] is True  # a per-run override
    tool = api.post("/v1/tools/", {"source_code": ENV, "allow_network": True}).json()
    agent = make_agent(account.org)
    api.patch(f"/v1/agents/{agent.id}/tools/attach/{tool['id']}")
    assert api.post(f"/v1/agents/{agent.id}/tools/env/run", {"args": {"names": []}}).json()["network"] is True
    runs = api.get(f"/v1/tools/{tool['id']}/runs").json()
    assert [r["network"] for r in runs] == [True]
    assert api.patch(f"/v1/tools/{tool['id']}", {"allow_network": "maybe"}).status_code == 422
    assert api.patch(f"/v1/tools/{tool['id']}", {"allow_network": None}).status_code == 200
    from tools.models import Tool

    stored = Tool.objects.get(id=tool["id"])
    assert stored.allow_network is None  # back to the deployment default
    config = {"allow_network": False}
    assert tool_network_allowed(tool=stored, config=config) is False
    assert tool_network_allowed(tool=stored, config={"allow_network": True}) is True
    stored.allow_network = False  # a tool's own "no" beats a deployment that allows the network
    assert tool_network_allowed(tool=stored, config={"allow_network": True}) is False
    assert tool_network_allowed(tool=stored, override=True, config=config) is True


def repr_list(ids):
    return json.dumps(ids)


def test_run_attached_tool_with_the_agents_secrets(api, account):
    tool = api.post("/v1/tools/", {"source_code": ENV}).json()
    agent = make_agent(account.org, secrets={"WEATHER_KEY": "abc"})
    path = f"/v1/agents/{agent.id}/tools/env/run"
    assert api.post(path, {"args": {"names": ["WEATHER_KEY"]}}).status_code == 404  # not attached yet
    api.patch(f"/v1/agents/{agent.id}/tools/attach/{tool['id']}")
    r = api.post(path, {"args": {"names": ["WEATHER_KEY"]}})
    assert r.status_code == 200, r.content
    out = r.json()
    assert out["status"] == "success" and out["func_return"] == '{"WEATHER_KEY": "abc"}'
    assert out["stdout"] == [] and out["sandbox"] == "local"
    assert api.post(path, {"args": {"names": "WEATHER_KEY"}}).status_code == 422
    # Built-in tools run too, as in Letta (in-process, not in a sandbox).
    r = api.post(f"/v1/agents/{agent.id}/tools/send_message/run", {"args": {"message": "x"}})
    assert r.status_code == 200 and r.json()["status"] == "success" and r.json()["sandbox"] == "in-process"


def test_a_failed_agent_tool_run_has_no_func_return_and_says_why_in_its_own_fields(api, account):
    # Letta's run_tool_for_agent (routers/v1/agents.py) nulls func_return when the status is "error".
    tool = api.post("/v1/tools/", {"source_code": BOOM}).json()
    agent = make_agent(account.org)
    api.patch(f"/v1/agents/{agent.id}/tools/attach/{tool['id']}")
    out = api.post(f"/v1/agents/{agent.id}/tools/boom/run", {"args": {"reason": "bad input"}}).json()
    assert out["status"] == "error" and out["func_return"] is None
    assert out["error_type"] == "ValueError" and out["error_message"] == "boom: bad input"
    assert "Traceback" in out["stderr"][0] and out["agent_state"] is None
    # A built-in tool that fails, likewise (its error text is the message the model would read).
    out = api.post(
        f"/v1/agents/{agent.id}/tools/core_memory_replace/run",
        {"args": {"label": "human", "old_content": "not in the block", "new_content": "x"}},
    ).json()
    assert out["status"] == "error" and out["func_return"] is None and "not in the block" in out["error_message"]
    ok = api.post(f"/v1/agents/{agent.id}/tools/send_message/run", {"args": {"message": "x"}}).json()
    assert ok["status"] == "success" and ok["func_return"] is not None and ok.get("error_message") is None


def test_runs_are_listed_per_tool_newest_first(api, account):
    tool = api.post("/v1/tools/", {"source_code": ECHO}).json()
    agent = make_agent(account.org)
    api.patch(f"/v1/agents/{agent.id}/tools/attach/{tool['id']}")
    run(api, ECHO, {"text": "first"})
    api.post(f"/v1/agents/{agent.id}/tools/echo/run", {"args": {"text": "second"}})
    runs = api.get(f"/v1/tools/{tool['id']}/runs").json()
    assert [(r["args"]["text"], r["origin"], r["tool_id"]) for r in runs] == [
        ("second", "agent", tool["id"]),
        ("first", "workbench", tool["id"]),
    ]
    assert runs[0]["agent_id"] == agent.id and runs[1]["agent_id"] is None
    assert api.get("/v1/tools/tool-nope/runs").status_code == 404


def test_another_owners_agent_cannot_be_used(api, other_account):
    theirs = make_agent(other_account.org, secrets={"WEATHER_KEY": "theirs"})
    assert run(api, STATE, agent_id=theirs.id).status_code == 404
    assert api.post(f"/v1/agents/{theirs.id}/tools/echo/run", {"args": {}}).status_code == 404


# --- which sandbox runs a tool ---------------------------------------------------------------------


def _prefs(owner, **fields):
    from core.models import OwnerSettings

    OwnerSettings.objects.update_or_create(owner=owner, defaults=fields)


def test_backend_choice_is_explicit(account, settings):
    from tools.execution import tool_backend_name
    from tools.services import tool_create

    settings.SANDBOX_DEFAULT, settings.E2B_API_KEY = "local", "e2b_configured_key"
    tool = tool_create(owner=account.org, source_code=ECHO)
    # An E2B key being configured does not switch anything by itself.
    assert tool_backend_name(owner=account.org, tool=tool) == "local"
    settings.SANDBOX_DEFAULT = "e2b"
    assert tool_backend_name(owner=account.org, tool=tool) == "e2b"
    _prefs(account.org, sandbox_default="local")  # the owner's choice beats the deployment default
    assert tool_backend_name(owner=account.org, tool=tool) == "local"
    tool.sandbox = "e2b"  # a per-tool override beats the defaults
    assert tool_backend_name(owner=account.org, tool=tool) == "e2b"
    assert tool_backend_name(owner=account.org, tool=tool, override="local") == "local"
    with pytest.raises(Invalid):
        tool_backend_name(owner=account.org, override="docker")


def test_e2b_without_a_key_is_a_clear_error_not_a_fallback(api):
    out = run(api, ECHO, {"text": "x"}, sandbox="e2b").json()
    assert out["status"] == "error" and out["sandbox"] == "e2b"
    assert "no E2B API key is configured" in out["tool_return"]


@pytest.fixture
def fake_e2b(monkeypatch):
    """STUB of E2B's SDK boundary (its cloud is unreachable here): see tests/tools/test_sandbox_e2b.py."""
    from tests.tools.test_sandbox_e2b import FakeSandbox

    FakeSandbox.instances.clear()
    monkeypatch.setattr("tools.sandbox.e2b.default_sandbox_factory", lambda **kw: FakeSandbox(**kw))
    return FakeSandbox


def test_per_tool_e2b_override_runs_in_e2b_stub_with_owner_credentials(api, account, fake_e2b, settings):
    settings.SANDBOX_DEFAULT = "local"
    _prefs(account.org, e2b_api_key="owner_e2b_key", e2b_template="owner-template")
    tool = api.post(
        "/v1/tools/",
        {"source_code": ENV, "sandbox": "e2b", "pip_requirements": [{"name": "requests", "version": "2.32.3"}]},
    ).json()
    agent = make_agent(account.org, secrets={"WEATHER_KEY": "k"})
    api.patch(f"/v1/agents/{agent.id}/tools/attach/{tool['id']}")
    out = api.post(f"/v1/agents/{agent.id}/tools/env/run", {"args": {"names": ["WEATHER_KEY"]}}).json()
    assert out["status"] == "success", out
    assert out["sandbox"] == "e2b" and out["func_return"] == '{"WEATHER_KEY": "k"}'
    (sbx,) = fake_e2b.instances
    assert sbx.create_kwargs["api_key"] == "owner_e2b_key" and sbx.create_kwargs["template"] == "owner-template"
    pip, call = sbx.commands_run
    assert pip["cmd"].endswith("pip install --quiet --disable-pip-version-check requests==2.32.3")
    assert call["envs"]["WEATHER_KEY"] == "k" and call["envs"]["AIDE_AGENT_ID"] == agent.id
    assert ToolRun.objects.get(id=out["tool_run_id"]).sandbox == "e2b"
    # The same owner's tools without an override still run locally.
    assert run(api, ECHO, {"text": "x"}).json()["sandbox"] == "local"


def test_workbench_page_shows_whether_the_run_had_network(account):
    from django.test import Client

    web = Client()
    web.force_login(account.user)
    out = web.post("/tools/run/", {"source_code": ECHO, "arg_text": "hi", "env_vars": "{}"}).content.decode()
    assert 'id="run-return">hi<' in out
    assert 'network: <strong id="run-network">off</strong>' in out


def test_tools_page_says_when_local_runs_are_refused(account, monkeypatch):
    """Where bubblewrap cannot run (here: not installed), the IDE says so and why, and local runs are refused."""
    from django.test import Client

    from tools.execution import tool_execute

    web = Client()
    web.force_login(account.user)
    assert 'id="sandbox-notice"' not in web.get("/tools/").content.decode()  # namespaces work here
    monkeypatch.setattr("tools.sandbox.local.find_bwrap", lambda: "/nonexistent/bwrap")
    page = web.get("/tools/").content.decode()
    assert 'id="sandbox-notice">Local tool runs are refused: bubblewrap could not start' in page
    assert "SANDBOX_LOCAL_WEAK_ISOLATION=1" in page
    refused = tool_execute(owner=account.org, source_code=ECHO, args={"text": "x"})
    assert refused.status == "error" and refused.result.error_type == "SandboxError"


def test_the_owners_network_default_sits_between_the_tool_and_the_deployment(api, account, settings):
    from django.test import Client

    from core.models import OwnerSettings
    from tools.execution import sandbox_config_for, tool_network_allowed
    from tools.services import tool_create

    settings.SANDBOX_ALLOW_NETWORK = False
    web = Client()
    web.force_login(account.user)
    refuses = tool_create(
        owner=account.org, source_code=ECHO.replace("def echo(", "def echo_offline("), allow_network=False
    )
    form = {"sandbox_default": "", "embedding_model": "", "e2b_template": ""}

    assert run(api, ECHO, {"text": "x"}).json()["network"] is False
    assert web.post("/settings/owner/", {**form, "sandbox_allow_network": "on"}).status_code == 302
    assert OwnerSettings.objects.get(owner=account.org).sandbox_allow_network is True
    assert 'value="on" selected' in web.get("/settings/").content.decode()
    assert run(api, ECHO, {"text": "x"}).json()["network"] is True  # the owner allows what the deployment doesn't
    config = sandbox_config_for(owner=account.org)
    assert tool_network_allowed(tool=refuses, override=None, config=config) is False  # a tool's own choice wins
    assert tool_network_allowed(tool=refuses, override=True, config=config) is True  # and a run's override wins that
    web.post("/settings/owner/", {**form, "sandbox_allow_network": ""})
    settings.SANDBOX_ALLOW_NETWORK = True
    assert OwnerSettings.objects.get(owner=account.org).sandbox_allow_network is None
    assert run(api, ECHO, {"text": "x"}).json()["network"] is True  # back to the deployment's default


# A json_schema that renames the function, as Letta takes it: create_or_update_tool_async (services/tool_manager.py)
# names the tool after the schema without looking at the source, and a run calls the function of that name
# (services/tool_sandbox/base.py invoke_function_call); new source code on update must define it
# (update_tool_by_id_async).
TWO = textwrap.dedent('''
    def shout(text: str) -> str:
        """Shout.

        Args:
            text: What to shout.
        """
        return text.upper() + "!"

    def whisper(text: str) -> str:
        """Whisper.

        Args:
            text: What to whisper.
        """
        return text.lower() + "..."
''')


def _schema(name: str) -> dict:
    params = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    return {"name": name, "description": "Say it.", "parameters": params}


def test_a_json_schema_picks_the_function_a_tool_is_and_calls(api, account):
    # Derived from the source, the tool would be its last function (whisper); the schema names shout.
    tool = api.post("/v1/tools/", {"source_code": TWO, "json_schema": _schema("shout")}).json()
    assert tool["name"] == "shout" and tool["json_schema"] == _schema("shout")
    agent = make_agent(account.org)
    api.patch(f"/v1/agents/{agent.id}/tools/attach/{tool['id']}")
    out = api.post(f"/v1/agents/{agent.id}/tools/shout/run", {"args": {"text": "hi"}}).json()
    assert out["status"] == "success" and out["func_return"] == "HI!"
    assert run(api, TWO, {"text": "Hi"}, json_schema=_schema("shout")).json()["tool_return"] == "HI!"


def test_a_json_schema_naming_no_function_of_the_source_is_stored_and_fails_when_run(api, account):
    r = api.post("/v1/tools/", {"source_code": TWO, "json_schema": _schema("announce")})
    assert r.status_code == 201, r.content
    tool = r.json()
    assert tool["name"] == "announce" and tool["source_code"] == TWO
    agent = make_agent(account.org)
    api.patch(f"/v1/agents/{agent.id}/tools/attach/{tool['id']}")
    out = api.post(f"/v1/agents/{agent.id}/tools/announce/run", {"args": {"text": "hi"}}).json()
    assert out["status"] == "error" and out["func_return"] is None and out["error_type"] == "NameError"
    assert "announce" in out["error_message"]


def test_patching_a_json_schema_renames_the_tool_but_new_source_must_define_it(api):
    # Letta's tests/test_sdk_client.py test_tool_rename_with_json_schema_and_source_code.
    tool = api.post("/v1/tools/", {"source_code": TWO}).json()
    assert tool["name"] == "whisper"
    patch = {"source_code": TWO.replace("def shout", "def yell"), "json_schema": _schema("shout")}
    assert api.patch(f"/v1/tools/{tool['id']}", patch).status_code == 400
    renamed = api.patch(f"/v1/tools/{tool['id']}", {"json_schema": _schema("holler")}).json()
    assert renamed["name"] == "holler" and renamed["json_schema"] == _schema("holler")
    assert api.get("/v1/tools/?name=holler").json()[0]["id"] == tool["id"]
