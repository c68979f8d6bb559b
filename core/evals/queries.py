"""The statements every eval case runs, in our own SQL through Django's public `Manager.raw()` and cursor.

A queryset compiles its SQL on every call (0.3-1.5 ms of CPU here, an update through a join the most), several times
a case; these are written once instead, as core.agents.queries does for a message's. `raw()` still maps the columns
to model fields and converts their values (JSON, SQLite's datetimes). The SQL is the same on SQLite and PostgreSQL.
"""

from functools import cache

from django.db import connection

from core.models import CaseResult, Experiment, Message, Step


def _table(model) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def _marks(values: list) -> str:
    return ", ".join(["%s"] * len(values))


@cache
def _claim_sql() -> str:
    return (
        f"UPDATE {_table(CaseResult)} SET status = %s, copy_agent_id = %s WHERE id = %s "
        f"AND NOT EXISTS (SELECT 1 FROM {_table(Experiment)} e WHERE e.id = %s AND e.status = %s)"
    )


def case_claim(*, result: CaseResult, copy_id: str) -> bool:
    """Mark the case running with the id its copy will have, unless its experiment was cancelled; whether it was."""
    with connection.cursor() as cursor:
        cursor.execute(_claim_sql(), ["running", copy_id, result.pk, result.experiment_id, "cancelled"])
        return cursor.rowcount > 0


@cache
def _done_sql() -> str:
    return f"UPDATE {_table(Experiment)} SET done = done + 1 WHERE id = %s"


def experiment_case_done(*, experiment_id: str) -> None:
    """Count one more case done (the experiment's progress)."""
    with connection.cursor() as cursor:
        cursor.execute(_done_sql(), [experiment_id])


def runs_messages(*, run_ids: list[str]) -> list[Message]:
    """The runs' messages in their order."""
    if not run_ids:
        return []
    sql = f"SELECT * FROM {_table(Message)} WHERE run_id IN ({_marks(run_ids)}) ORDER BY seq"
    return list(Message.objects.raw(sql, run_ids))


def runs_steps_usage(*, run_ids: list[str]) -> list[tuple[str, dict]]:
    """The runs' agent steps, oldest first, as (id, usage)."""
    if not run_ids:
        return []
    usage = connection.ops.quote_name("usage")
    sql = (
        f"SELECT id, {usage} FROM {_table(Step)} WHERE run_id IN ({_marks(run_ids)}) AND kind = %s ORDER BY created_at"
    )
    return [(s.id, s.usage or {}) for s in Step.objects.raw(sql, [*run_ids, "agent"])]
