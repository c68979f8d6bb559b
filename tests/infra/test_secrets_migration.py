"""The migrations that encrypt stored secrets, run for real: rows written in plaintext before them (through the
historical models) are ciphertext after `migrate`, read back as written, and plaintext again when migrated back."""

import json

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from core import crypto

BEFORE = [("core", "0009_provider_base_url_2000"), ("tools", "0004_mcp_servers")]
AFTER = [("core", "0011_encrypt_existing_secrets"), ("tools", "0006_encrypt_existing_secrets")]


def _migrate(targets) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor


def _raw(table: str, column: str) -> str:
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {quote(column)} FROM {quote(table)}")
        value = cursor.fetchone()[0]
    return value if isinstance(value, str) else json.dumps(value)


@pytest.mark.django_db(transaction=True)
def test_the_migrations_encrypt_plaintext_rows_and_undo_it():
    executor = _migrate(BEFORE)
    try:
        old = executor.loader.project_state(BEFORE).apps
        org = old.get_model("core", "Organization").objects.create(id="org-legacy", name="legacy")
        old.get_model("core", "ProviderConfig").objects.create(
            owner=org, kind="openai", name="mine", api_key="sk-legacy-key"
        )
        old.get_model("core", "Agent").objects.create(owner=org, name="a", model="x/y", secrets={"TOKEN": "legacy-1"})
        old.get_model("tools", "Tool").objects.create(owner=org, name="t", env_vars={"TOKEN": "legacy-2"})
        old.get_model("tools", "McpServer").objects.create(
            owner=org, server_name="s", server_type="sse", auth_token="legacy-3", custom_headers={"X-Key": "legacy-4"}
        )
        assert "sk-legacy-key" in _raw("core_providerconfig", "api_key")

        new = _migrate(AFTER).loader.project_state(AFTER).apps  # the models as they were then: later fields absent
        raw = [
            _raw("core_providerconfig", "api_key"),
            _raw("core_agent", "secrets"),
            _raw("tools_tool", "env_vars"),
            _raw("tools_mcpserver", "auth_token"),
            _raw("tools_mcpserver", "custom_headers"),
        ]
        assert all(crypto.PREFIX in column for column in raw) and not any("legacy" in column for column in raw)
        assert new.get_model("core", "ProviderConfig").objects.get().api_key == "sk-legacy-key"
        assert new.get_model("core", "Agent").objects.get().secrets == {"TOKEN": "legacy-1"}
        assert new.get_model("tools", "Tool").objects.get().env_vars == {"TOKEN": "legacy-2"}
        server = new.get_model("tools", "McpServer").objects.get()
        assert (server.auth_token, server.custom_headers) == ("legacy-3", {"X-Key": "legacy-4"})

        _migrate(BEFORE)
        assert _raw("core_providerconfig", "api_key") == "sk-legacy-key"
        assert json.loads(_raw("tools_mcpserver", "custom_headers")) == {"X-Key": "legacy-4"}
    finally:
        _migrate(executor.loader.graph.leaf_nodes())
