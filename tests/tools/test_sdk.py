"""The official `letta-client` SDK against our tools API (in-process over httpx's WSGI transport)."""

import textwrap

import httpx
import letta_client
import pytest
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections

from tests.factories import make_agent

SOURCE = textwrap.dedent('''
    import os

    def greet(name: str) -> str:
        """Greet someone.

        Args:
            name: Who to greet.
        """
        print("greeting", name)
        return f"Hello, {name}! ({os.environ.get('GREETING_KEY')})"
''')


@pytest.fixture
def client(account):
    """An SDK client on Django's WSGI app; like the test client, requests must not close the test's DB connection."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    http = httpx.Client(transport=httpx.WSGITransport(app=get_wsgi_application()), base_url="http://testserver")
    try:
        yield letta_client.Letta(api_key=account.token, base_url="http://testserver", http_client=http)
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def test_sdk_tools_create_upsert_list_retrieve_update_delete(client):
    tool = client.tools.create(source_code=SOURCE, tags=["demo"], pip_requirements=[{"name": "requests"}])
    assert tool.name == "greet" and tool.tool_type == "custom" and tool.tags == ["demo"]
    assert tool.json_schema["parameters"]["required"] == ["name"]
    assert tool.pip_requirements[0].name == "requests"
    with pytest.raises(letta_client.ConflictError):
        client.tools.create(source_code=SOURCE)
    upserted = client.tools.upsert(source_code=SOURCE.replace("Greet someone.", "Say hello."))
    assert upserted.id == tool.id and upserted.description == "Say hello."
    assert tool.id in [t.id for t in client.tools.list()]
    assert client.tools.retrieve(tool.id).description == "Say hello."
    assert client.tools.update(tool.id, return_char_limit=500).return_char_limit == 500
    client.tools.delete(tool.id)
    with pytest.raises(letta_client.NotFoundError):
        client.tools.retrieve(tool.id)


def test_sdk_agent_tool_run_uses_the_agents_secrets(client, account):
    tool = client.tools.create(source_code=SOURCE)
    agent = make_agent(account.org, secrets={"GREETING_KEY": "k1"})
    client.agents.tools.attach(tool.id, agent_id=agent.id)
    result = client.agents.tools.run("greet", agent_id=agent.id, args={"name": "Ada"})
    assert result.status == "success" and result.func_return == "Hello, Ada! (k1)"
    assert result.stdout == ["greeting Ada\n"]


FAILING = textwrap.dedent('''
    def refuse(name: str) -> str:
        """Always fails.

        Args:
            name: Who asked.
        """
        raise PermissionError("not for " + name)
''')


def test_sdk_failed_agent_tool_run_has_no_func_return(client, account):
    tool = client.tools.create(source_code=FAILING)
    agent = make_agent(account.org)
    client.agents.tools.attach(tool.id, agent_id=agent.id)
    result = client.agents.tools.run("refuse", agent_id=agent.id, args={"name": "Ada"})
    assert result.status == "error" and result.func_return is None
    assert "PermissionError: not for Ada" in result.stderr[0]
    assert result.model_extra["error_message"] == "not for Ada"


HELPERS = textwrap.dedent('''
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


def test_sdk_json_schema_renames_and_picks_the_function(client, account):
    # Letta names a tool after its json_schema and runs the function of that name (tool_manager.py
    # create_or_update_tool_async, tool_sandbox/base.py invoke_function_call).
    params = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    tool = client.tools.create(source_code=HELPERS, json_schema={"name": "shout", "parameters": params})
    assert tool.name == "shout"
    agent = make_agent(account.org)
    client.agents.tools.attach(tool.id, agent_id=agent.id)
    assert client.agents.tools.run("shout", agent_id=agent.id, args={"text": "hi"}).func_return == "HI!"
    # Letta's test_tool_rename_with_json_schema_and_source_code: a schema alone renames the tool.
    renamed = client.tools.update(tool.id, json_schema={"name": "yell", "parameters": params})
    assert renamed.name == "yell" and renamed.json_schema["name"] == "yell"
    with pytest.raises(letta_client.BadRequestError):
        client.tools.update(tool.id, source_code=HELPERS, json_schema={"name": "holler", "parameters": params})
    failed = client.agents.tools.run("yell", agent_id=agent.id, args={"text": "hi"})
    assert failed.status == "error" and failed.func_return is None  # the source defines no `yell`
