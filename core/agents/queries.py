"""The statements every message runs, in our own SQL through Django's public cursor.

A queryset compiles its SQL on every call: 0.5-1.5 ms of CPU for an agent read with its counts, 0.2-0.5 ms for a
one-row update, many times a message. These statements are written once here instead. `rows_read` maps the columns
to model fields and converts their values as a raw queryset does (JSON, encrypted secrets, SQLite's datetimes), so
the rows are ordinary model instances; `row_update` prepares each value through its field (`Field.get_db_prep_save`), as
`QuerySet.update()` does. The SQL is the same on SQLite and PostgreSQL, but for the row lock (`FOR UPDATE`,
PostgreSQL only: SQLite's write transactions begin IMMEDIATE).
"""

import weakref
from collections.abc import Sequence
from functools import cache

from django.db import DEFAULT_DB_ALIAS, connection, connections

from core.models import RUN_ACTIVE, Agent, AgentVersion, Message, Organization, Run, SleeptimeCompanion
from memory.models import Passage


def _table(model) -> str:
    return f'"{model._meta.db_table}"'


def _column(model, name: str) -> str:
    return f'"{model._meta.get_field(name).column}"'


# How each column of a statement's rows becomes a model's attribute, per connection (its backend's converters are its
# own) and per model and columns: the field it fills and the converters Django applies to it (the backend's, then the
# field's, as a queryset's compiler gathers them), or none for an annotation column (set on the instance as it is).
_plans: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _plan(db, model, columns: tuple[str, ...]):
    plans = _plans.get(db)
    if plans is None:
        plans = _plans[db] = {}
    plan = plans.get((model, columns))
    if plan is None:
        by_column = {f.column: f for f in model._meta.concrete_fields}
        fields = [by_column.get(c) for c in columns]
        converters = []
        for field in fields:
            col = field.get_col(model._meta.db_table) if field is not None else None
            found = db.ops.get_db_converters(col) + col.get_db_converters(db) if col is not None else []
            converters.append((found, col))
        init = [(f.attname, i) for f in model._meta.concrete_fields for i, c in enumerate(columns) if c == f.column]
        annotations = [(c, i) for i, (c, f) in enumerate(zip(columns, fields, strict=True)) if f is None]
        plan = plans[(model, columns)] = (converters, [n for n, _ in init], [i for _, i in init], annotations)
    return plan


def rows_read(model, sql: str, params: Sequence) -> list:
    """`list(model.objects.raw(sql, params))` without a RawQuerySet: the statement's rows as model instances
    (`Model.from_db`, each value through the converters a queryset applies), columns not of the model set on them as
    they are. Every message reads its agent so twice, where the raw queryset's set-up cost more than the statement."""
    db = connections[DEFAULT_DB_ALIAS]
    with db.cursor() as cursor:
        cursor.execute(sql, params)
        columns = tuple(d[0] for d in cursor.description)
        rows = cursor.fetchall()
    if not rows:
        return []
    converters, names, positions, annotations = _plan(db, model, columns)
    out = []
    for row in rows:
        values = list(row)
        for i, (found, col) in enumerate(converters):
            for convert in found:
                values[i] = convert(values[i], col, db)
        instance = model.from_db(DEFAULT_DB_ALIAS, names, [values[i] for i in positions])
        for name, i in annotations:
            setattr(instance, name, values[i])
        out.append(instance)
    return out


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
    agent = next(iter(rows_read(Agent, sql, params)), None)
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
    return rows_read(Run, sql, found)


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
    return next(iter(rows_read(Run, f"SELECT * FROM {_table(Run)} WHERE id = %s", [run_id])), None)


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
