"""The statements every message runs, in our own SQL through Django's public `Manager.raw()` and cursor.

A queryset compiles its SQL on every call: 0.5-1.5 ms of CPU for an agent read with its counts, 0.2-0.5 ms for a
one-row update, many times a message. These statements are written once here instead. `raw()` still maps the
columns to model fields and converts their values (JSON, encrypted secrets, SQLite's datetimes), so the rows are
ordinary model instances; `row_update` prepares each value through its field (`Field.get_db_prep_save`), as
`QuerySet.update()` does. The SQL is the same on SQLite and PostgreSQL, but for the row lock (`FOR UPDATE`,
PostgreSQL only: SQLite's write transactions begin IMMEDIATE).
"""

from collections.abc import Sequence
from functools import cache

from django.db import connection

from core.models import RUN_ACTIVE, Agent, AgentVersion, Message, Organization, Run, SleeptimeCompanion
from memory.models import Passage


def _table(model) -> str:
    return f'"{model._meta.db_table}"'


def _column(model, name: str) -> str:
    return f'"{model._meta.get_field(name).column}"'


# The columns a step's commit writes from (`persistence.agent_lock`): whose rows, for which model, the window. The
# rest of the row (its settings, rules, secrets: JSON to decode) the commit does not read.
LOCK_COLUMNS = ("id", "owner_id", "model", "message_ids")


@cache
def _agent_sql(
    *,
    counts: bool,
    max_seq: bool,
    version: bool,
    cancelled: bool,
    owned: bool,
    lock: bool,
    columns: tuple | None,
    companion: bool = False,
) -> str:
    a, m, p, v, r = _table(Agent), _table(Message), _table(Passage), _table(AgentVersion), _table(Run)
    extra = [", ".join(f'a."{name}"' for name in columns)] if columns else ["a.*"]
    if max_seq:  # the highest message seq
        extra.append(f"(SELECT m.seq FROM {m} m WHERE m.agent_id = a.id ORDER BY m.seq DESC LIMIT 1) AS max_seq")
    if counts:  # what the agent's snapshot shows: its highest message seq and its archival passages
        extra.append(
            f"(SELECT m.seq FROM {m} m WHERE m.agent_id = a.id ORDER BY m.seq DESC LIMIT 1) AS snapshot_max_seq"
        )
        extra.append(f"(SELECT COUNT(*) FROM {p} p WHERE p.agent_id = a.id) AS snapshot_archival")
    if version:  # its latest version: a run's claim records it
        extra.append(
            f"(SELECT v.id FROM {v} v WHERE v.agent_id = a.id ORDER BY v.number DESC LIMIT 1) AS current_version_id"
        )
    if companion:  # whether it has an enabled sleep-time companion (the end of its run counts a turn of it)
        s, agent_column, enabled = _table(SleeptimeCompanion), *_companion_columns()
        extra.append(f"EXISTS (SELECT 1 FROM {s} s WHERE s.{agent_column} = a.id AND s.{enabled}) AS companion_enabled")
    if cancelled:
        extra.append(f"EXISTS (SELECT 1 FROM {r} r WHERE r.id = %s AND r.cancel_requested) AS cancelled")
    where = "a.id = %s" + (" AND a.owner_id = %s" if owned else "")
    return f"SELECT {', '.join(extra)} FROM {a} a WHERE {where}" + (" FOR UPDATE" if lock else "")


def agent_read(
    *,
    agent_id: str,
    owner_id: str | None = None,
    counts: bool = False,
    max_seq: bool = False,
    version: bool = False,
    cancelled_run_id: str | None = None,
    lock: bool = False,
    columns: tuple[str, ...] | None = None,
    companion: bool = False,
) -> Agent | None:
    """The agent's row (only if `owner_id` owns it, when given), or None. `counts`: annotated with
    `snapshot_max_seq` and `snapshot_archival` (what its snapshot needs); `max_seq`: with `max_seq`, its highest
    message seq; `version`: with `current_version_id`;
    `cancelled_run_id`: with `cancelled`, whether that run was asked to stop; `companion`: with
    `companion_enabled`, whether it has an enabled sleep-time companion; `lock`: its row locked for the
    transaction on PostgreSQL (a caller that needs the counts as of after a lock wait reads them in a second
    statement: a locking read evaluates subqueries in its snapshot from before the wait); `columns`: only these
    columns of the row (the others are Django's deferred fields, read if ever asked for)."""
    sql = _agent_sql(
        counts=counts,
        max_seq=max_seq,
        version=version,
        cancelled=cancelled_run_id is not None,
        owned=owner_id is not None,
        lock=lock and connection.vendor == "postgresql",
        columns=columns,
        companion=companion,
    )
    params = [
        *([cancelled_run_id] if cancelled_run_id is not None else []),
        agent_id,
        *([owner_id] if owner_id is not None else []),
    ]
    agent = next(iter(Agent.objects.raw(sql, params)), None)
    if agent is not None and cancelled_run_id is not None:
        agent.cancelled = bool(agent.cancelled)
    if agent is not None and companion:
        agent.companion_enabled = bool(agent.companion_enabled)
    return agent


@cache
def _runs_open_sql(*, own: bool, columns: str) -> str:
    thread = "conversation_id IS NULL" if own else "conversation_id = %s"
    return (
        f"SELECT {columns} FROM {_table(Run)} WHERE agent_id = %s AND {thread} "
        "AND (status IN (%s, %s) OR waiting_until IS NOT NULL) ORDER BY created_at LIMIT 50"
    )


def thread_runs_open(*, agent_id: str, conversation_id: str | None) -> list[Run]:
    """One thread's run in progress and its run that waits for an answer (the agent's own thread when
    `conversation_id` is None), oldest first. Mostly there is none: their ids are read first, their rows only if
    there are some (mapping columns to a model costs more than the statement)."""
    thread = [] if conversation_id is None else [conversation_id]
    with connection.cursor() as cursor:
        cursor.execute(_runs_open_sql(own=conversation_id is None, columns="id"), [agent_id, *thread, *RUN_ACTIVE])
        found = [row[0] for row in cursor.fetchall()]
    if not found:
        return []
    sql = f"SELECT * FROM {_table(Run)} WHERE id IN ({', '.join(['%s'] * len(found))}) ORDER BY created_at"
    return list(Run.objects.raw(sql, found))


@cache
def _max_seq_sql() -> str:
    return f"SELECT seq FROM {_table(Message)} WHERE agent_id = %s ORDER BY seq DESC LIMIT 1"


def message_max_seq(*, agent_id: str) -> int:
    """The agent's highest message seq (0 before its first message), read in a statement of its own: on PostgreSQL
    it then sees every row committed before it began, such as those of a lock holder it waited for."""
    with connection.cursor() as cursor:
        cursor.execute(_max_seq_sql(), [agent_id])
        found = cursor.fetchone()
    return found[0] if found else 0


def run_read(*, run_id: str) -> Run | None:
    """A run's row, or None."""
    return next(iter(Run.objects.raw(f"SELECT * FROM {_table(Run)} WHERE id = %s", [run_id])), None)


def _companion_columns() -> tuple[str, str]:
    return _column(SleeptimeCompanion, "agent"), _column(SleeptimeCompanion, "enabled")


def companion_enabled(*, agent_id: str) -> bool:
    """Whether the agent has an enabled sleep-time companion (asked at the end of a run whose start did not read it
    with the agent: `agent_read(companion=True)`)."""
    agent_column, enabled = _companion_columns()
    sql = f"SELECT 1 FROM {_table(SleeptimeCompanion)} WHERE {agent_column} = %s AND {enabled} LIMIT 1"
    with connection.cursor() as cursor:
        cursor.execute(sql, [agent_id])
        return cursor.fetchone() is not None


def organization_ref(*, org_id: str) -> Organization:
    """A run's owner by its id, without reading its row (`Model.from_db` with the id alone: any other field is
    loaded from the database if read). Enough to filter by it, which is all a run does with its owner."""
    return Organization.from_db(Organization.objects.db, ["id"], [org_id])


@cache
def _update_sql(model, fields: tuple[str, ...], where: tuple[tuple[str, int], ...]) -> str:
    sets = ", ".join(f"{_column(model, name)} = %s" for name in fields)
    conditions = " AND ".join(
        f"{_column(model, name)} = %s" if n < 0 else f"{_column(model, name)} IN ({', '.join(['%s'] * n)})"
        for name, n in where
    )
    return f"UPDATE {_table(model)} SET {sets} WHERE {conditions}"


def row_update(model, *, where: dict, **fields) -> int:
    """`model.objects.filter(**where).update(**fields)` for plain field values and conditions (equality, or a list
    or tuple for IN), without compiling a query; returns the number of rows updated."""
    if any(isinstance(v, list | tuple) and not v for v in where.values()):
        return 0
    names = tuple(fields)
    shape = tuple((k, len(v) if isinstance(v, list | tuple) else -1) for k, v in where.items())
    params = [model._meta.get_field(k).get_db_prep_save(v, connection) for k, v in fields.items()]
    for k, v in where.items():
        field = model._meta.get_field(k)
        values: Sequence = v if isinstance(v, list | tuple) else (v,)
        params.extend(field.get_db_prep_value(x, connection) for x in values)
    with connection.cursor() as cursor:
        cursor.execute(_update_sql(model, names, shape), params)
        return cursor.rowcount
