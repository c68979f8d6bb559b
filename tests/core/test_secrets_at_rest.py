"""Secrets at rest (core/crypto.py): every stored secret is ciphertext in its column, reads back as the plaintext,
survives a key rotation, and is written again under the new key by `rotate_secrets`; plaintext stored before
encryption came still reads and the data migrations encrypt it; an exported agent file holds no secret value.
Runs on both databases (the raw column is read with a cursor)."""

import importlib
import io
import json

import pytest
from cryptography.fernet import Fernet
from django.apps import apps as installed_apps
from django.core.exceptions import FieldError, ImproperlyConfigured
from django.core.management import call_command
from django.db import connection
from django.test import Client

from core import crypto, providers
from core.agents.agentfile.exporter import agentfile_export, legacy_from_v2
from core.models import Agent, OwnerSettings, ProviderConfig
from tests.factories import make_agent
from tools import mcp_services
from tools.models import McpServer, Tool
from tools.services import tool_attach, tool_create

PROVIDER_KEY = "sk-provider-plaintext-1111"
E2B_KEY = "e2b-plaintext-2222"
AGENT_SECRET = "agent-secret-plaintext-3333"
TOOL_SECRET = "tool-secret-plaintext-4444"
MCP_TOKEN = "mcp-token-plaintext-5555"
MCP_HEADER = "mcp-header-plaintext-6666"
MCP_ENV = "mcp-env-plaintext-7777"
ALL = (PROVIDER_KEY, E2B_KEY, AGENT_SECRET, TOOL_SECRET, MCP_TOKEN, MCP_HEADER, MCP_ENV)

TOOL_SOURCE = '''
def weather(city: str) -> str:
    """Say the weather.

    Args:
        city: Where.
    """
    return "sunny"
'''


@pytest.fixture(autouse=True)
def _one_key(settings, monkeypatch):
    settings.SECRETS_KEYS = [Fernet.generate_key().decode()]
    settings.EGRESS_ALLOW = ["127.0.0.1", "::1"]
    settings.MCP_STDIO = "all"
    monkeypatch.setattr(mcp_services, "_refresh_quietly", lambda server: None)  # no server to reach: storage only


def _secrets_stored(account) -> Agent:
    """Every kind of secret, written as the IDE and the API write them."""
    web = Client()
    web.force_login(account.user)
    provider = {"kind": "openai_compatible", "name": "mine", "base_url": "http://127.0.0.1:9/v1", "model_names": "m"}
    provider["save_anyway"] = "on"  # nothing listens on port 9: saved all the same
    assert web.post("/settings/providers/", {**provider, "api_key": PROVIDER_KEY}).status_code == 302
    assert web.post("/settings/owner/", {"e2b_api_key": E2B_KEY}).status_code == 302
    agent = make_agent(account.org, secrets={"AGENT_TOKEN": AGENT_SECRET})
    tool = tool_create(owner=account.org, source_code=TOOL_SOURCE, env_vars={"TOOL_TOKEN": TOOL_SECRET})
    tool_attach(agent=agent, tool=tool)
    mcp_services.mcp_server_create(
        owner=account.org,
        server_name="remote",
        config={
            "mcp_server_type": "streamable_http",
            "server_url": "http://127.0.0.1:9/mcp",
            "auth_token": MCP_TOKEN,
            "custom_headers": {"X-Api-Key": MCP_HEADER},
        },
    )
    mcp_services.mcp_server_create(
        owner=account.org,
        server_name="local",
        config={"mcp_server_type": "stdio", "command": "/usr/bin/true", "env": {"MCP_TOKEN": MCP_ENV}},
    )
    return agent


def _raw(model, field: str, pk) -> str:
    """The column as the database holds it."""
    table, column = model._meta.db_table, model._meta.get_field(field).column
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {quote(column)} FROM {quote(table)} WHERE {quote(model._meta.pk.column)} = %s", [pk])
        value = cursor.fetchone()[0]
    return value if isinstance(value, str) else json.dumps(value)


def _columns(account) -> list[str]:
    """Every secret column of the account's rows, raw."""
    org = account.org
    server_remote = McpServer.objects.get(owner=org, server_name="remote").pk
    server_local = McpServer.objects.get(owner=org, server_name="local").pk
    return [
        _raw(ProviderConfig, "api_key", ProviderConfig.objects.get(owner=org).pk),
        _raw(OwnerSettings, "e2b_api_key", org.pk),
        _raw(Agent, "secrets", Agent.objects.get(owner=org).pk),
        _raw(Tool, "env_vars", Tool.objects.get(owner=org, name="weather").pk),
        _raw(McpServer, "auth_token", server_remote),
        _raw(McpServer, "custom_headers", server_remote),
        _raw(McpServer, "env", server_local),
    ]


def _read_back(account) -> dict:
    org = account.org
    return {
        "provider": ProviderConfig.objects.get(owner=org).api_key,
        "e2b": OwnerSettings.objects.get(owner=org).e2b_api_key,
        "agent": Agent.objects.get(owner=org).secrets,
        "tool": Tool.objects.get(owner=org, name="weather").env_vars,
        "token": McpServer.objects.get(owner=org, server_name="remote").auth_token,
        "headers": McpServer.objects.get(owner=org, server_name="remote").custom_headers,
        "env": McpServer.objects.get(owner=org, server_name="local").env,
    }


EXPECTED = {
    "provider": PROVIDER_KEY,
    "e2b": E2B_KEY,
    "agent": {"AGENT_TOKEN": AGENT_SECRET},
    "tool": {"TOOL_TOKEN": TOOL_SECRET},
    "token": MCP_TOKEN,
    "headers": {"X-Api-Key": MCP_HEADER},
    "env": {"MCP_TOKEN": MCP_ENV},
}


def test_every_secret_is_ciphertext_in_its_column_and_reads_back_as_written(account):
    _secrets_stored(account)
    columns = _columns(account)
    assert not [secret for secret in ALL for column in columns if secret in column]
    assert all(crypto.PREFIX in column for column in columns)
    assert "AGENT_TOKEN" in columns[2] and "X-Api-Key" in columns[5]  # names stay readable: the API shows them
    assert _read_back(account) == EXPECTED


def test_model_reads_and_values_reads_see_secrets_decrypted(account):
    _secrets_stored(account)
    mine = next(p for p in providers.providers_list(owner=account.org) if p.name == "mine")  # model instances
    assert mine.api_key == PROVIDER_KEY
    assert list(ProviderConfig.objects.values_list("api_key", flat=True)) == [PROVIDER_KEY]
    assert list(Agent.objects.filter(owner=account.org).values("secrets")) == [
        {"secrets": {"AGENT_TOKEN": AGENT_SECRET}}
    ]


def test_a_secret_is_no_filter_value(db):
    with pytest.raises(FieldError):
        list(ProviderConfig.objects.filter(api_key=PROVIDER_KEY))
    with pytest.raises(FieldError):
        list(Agent.objects.filter(secrets__AGENT_TOKEN=AGENT_SECRET))
    assert not ProviderConfig.objects.filter(api_key__isnull=True).exists()


def test_old_keys_still_read_and_rotate_secrets_rewrites_under_the_new_key(account, settings):
    old = settings.SECRETS_KEYS[0]
    _secrets_stored(account)
    new = Fernet.generate_key().decode()
    settings.SECRETS_KEYS = [new, old]
    assert _read_back(account) == EXPECTED  # written under the old key, read with it while it is listed
    out = io.StringIO()
    call_command("rotate_secrets", stdout=out)
    assert "core.ProviderConfig: 1 row(s) re-encrypted" in out.getvalue()
    settings.SECRETS_KEYS = [new]
    assert _read_back(account) == EXPECTED
    token = _raw(ProviderConfig, "api_key", ProviderConfig.objects.get(owner=account.org).pk)
    assert Fernet(new).decrypt(token.removeprefix(crypto.PREFIX).encode()).decode() == PROVIDER_KEY


def test_a_secret_under_a_key_no_longer_listed_is_refused_not_guessed(account, settings):
    _secrets_stored(account)
    settings.SECRETS_KEYS = [Fernet.generate_key().decode()]
    with pytest.raises(crypto.SecretUnreadable, match="SECRETS_KEYS"):
        ProviderConfig.objects.get(owner=account.org)


def test_without_secrets_keys_the_key_is_derived_from_secret_key(account, settings, capsys):
    settings.SECRETS_KEYS = []
    _secrets_stored(account)
    token = _raw(ProviderConfig, "api_key", ProviderConfig.objects.get(owner=account.org).pk)
    derived = crypto.derived_key(settings.SECRET_KEY)
    assert Fernet(derived).decrypt(token.removeprefix(crypto.PREFIX).encode()).decode() == PROVIDER_KEY
    call_command("rotate_secrets", "--derived-key")
    assert capsys.readouterr().out.strip() == derived
    settings.SECRETS_KEYS = ["not a key"]
    with pytest.raises(ImproperlyConfigured, match="Fernet"):
        crypto.encrypt("x")


def _plaintext_written(model, field: str, pk, value) -> None:
    """Store a value as rows stored before encryption came held it."""
    table, column = model._meta.db_table, model._meta.get_field(field).column
    quote = connection.ops.quote_name
    raw = value if isinstance(value, str) else json.dumps(value)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {quote(table)} SET {quote(column)} = %s WHERE {quote(model._meta.pk.column)} = %s", [raw, pk]
        )


def _legacy(account) -> None:
    org = account.org
    remote = McpServer.objects.get(owner=org, server_name="remote").pk
    _plaintext_written(ProviderConfig, "api_key", ProviderConfig.objects.get(owner=org).pk, PROVIDER_KEY)
    _plaintext_written(OwnerSettings, "e2b_api_key", org.pk, E2B_KEY)
    _plaintext_written(Agent, "secrets", Agent.objects.get(owner=org).pk, {"AGENT_TOKEN": AGENT_SECRET})
    _plaintext_written(Tool, "env_vars", Tool.objects.get(owner=org, name="weather").pk, {"TOOL_TOKEN": TOOL_SECRET})
    _plaintext_written(McpServer, "auth_token", remote, MCP_TOKEN)
    _plaintext_written(McpServer, "custom_headers", remote, {"X-Api-Key": MCP_HEADER})
    _plaintext_written(
        McpServer, "env", McpServer.objects.get(owner=org, server_name="local").pk, {"MCP_TOKEN": MCP_ENV}
    )


def test_legacy_plaintext_reads_and_the_data_migrations_encrypt_it(account):
    _secrets_stored(account)
    _legacy(account)
    assert sum(secret in column for secret in ALL for column in _columns(account)) == len(ALL)
    assert _read_back(account) == EXPECTED  # plaintext from before encryption reads as it is

    for module in ("core.migrations.0011_encrypt_existing_secrets", "tools.migrations.0006_encrypt_existing_secrets"):
        importlib.import_module(module).encrypt_existing(installed_apps, None)
    assert not [secret for secret in ALL for column in _columns(account) if secret in column]
    assert _read_back(account) == EXPECTED

    for module in ("core.migrations.0011_encrypt_existing_secrets", "tools.migrations.0006_encrypt_existing_secrets"):
        importlib.import_module(module).decrypt_existing(installed_apps, None)  # the migrations' undo
    assert sum(secret in column for secret in ALL for column in _columns(account)) == len(ALL)


def test_an_exported_agent_file_holds_names_but_no_secret_value(account, api):
    agent = _secrets_stored(account)
    Agent.objects.filter(pk=agent.pk).update(metadata={"note": "kept"})
    data = agentfile_export(agent=Agent.objects.get(pk=agent.pk), include_history=True)
    text = json.dumps(data) + json.dumps(legacy_from_v2(data))
    assert not [secret for secret in ALL if secret in text]
    [exported] = data["agents"]
    assert exported["secrets"] == {"AGENT_TOKEN": ""} == exported["tool_exec_environment_variables"]
    over_api = api.get(f"/v1/agents/{agent.id}/export").content.decode()
    shown = api.get(f"/v1/agents/{agent.id}").content.decode()
    assert not [secret for secret in ALL if secret in over_api + shown]
