"""core.agents.queries.rows_read maps a statement's rows to model instances as a raw queryset does: every field's
value converted the same (JSON, encrypted secrets, datetimes, booleans), columns not of the model set as they are,
fields not selected deferred; on SQLite and PostgreSQL."""

import pytest

from core.agents import queries
from core.models import Agent
from tests.factories import make_account, make_agent

pytestmark = pytest.mark.django_db


def test_a_rows_fields_are_the_raw_querysets_and_annotations_are_kept():
    account = make_account("rows")
    agent = make_agent(account.org, tool_rules=[{"type": "exit_loop", "tool_name": "send_message"}])
    Agent.objects.filter(pk=agent.pk).update(secrets={"TOKEN": "s3cret"}, metadata={"k": [1, 2]})
    sql = 'SELECT a.*, 7 AS seven FROM "core_agent" a WHERE a.id = %s'
    (mine,) = queries.rows_read(Agent, sql, [agent.pk])
    (raw,) = list(Agent.objects.raw(sql, [agent.pk]))
    for field in Agent._meta.concrete_fields:
        assert getattr(mine, field.attname) == getattr(raw, field.attname), field.name
    assert mine.secrets == {"TOKEN": "s3cret"} and mine.metadata == {"k": [1, 2]}
    assert mine.created_at.tzinfo is not None and mine.seven == 7
    assert queries.rows_read(Agent, sql, ["agent-none"]) == []


def test_columns_not_selected_are_deferred_and_load_when_read():
    account = make_account("deferred")
    agent = make_agent(account.org)
    (mine,) = queries.rows_read(Agent, 'SELECT a."id", a."model" FROM "core_agent" a WHERE a.id = %s', [agent.pk])
    assert mine.get_deferred_fields() >= {"name", "system"}
    assert mine.name == agent.name  # read from the database when asked for
