"""Statements on the hot paths whose SQL is built once, then run with each call's values.

Building and compiling a queryset costs most of an ORM statement: about 1 ms of Python for an agent's row, against
0.1 ms for SQLite to answer it. A step reads the same few shapes every time (the agent with its memory counts, its
blocks, its tools), so `Prepared` keeps each shape's SQL and what Django's compiler worked out about its columns
(the fields' converters, annotations, select_related's populators); a call puts its values in the placeholders' places
and turns the rows into model instances as Django's ModelIterable does.

    _BLOCKS = Prepared(lambda p: Block.objects.filter(agentblock__agent_id=p.agent_id).order_by("label"))
    rows = _BLOCKS(agent_id=agent.id)

Placeholders stand for whole string values (ids, handles, hashes); select_related is followed, prefetch_related is
not. One compiled form per database alias (the SQL differs by vendor).

`update` is `Model.objects.filter(**where).update(**values)` for equality filters, its SQL built once per shape;
`insert` is `Model.objects.bulk_create(objs)` for rows whose primary key is set before they are written.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from django.db import connections
from django.db.models import Model, QuerySet
from django.db.models.query import get_related_populators

M = TypeVar("M", bound=Model)
_MARK = "\x00prepared:"


class _Placeholders:
    """`p.name` is the placeholder for the call's keyword argument `name`: a string no real value holds."""

    def __getattr__(self, name: str) -> str:
        return f"{_MARK}{name}\x00"


class _Compiled:
    __slots__ = ("annotations", "converters", "fields", "init_list", "model", "params", "related", "slots", "sql")

    def __init__(self, queryset: QuerySet, alias: str):
        query = queryset.query
        if queryset._prefetch_related_lookups:
            raise ValueError("Prepared reads take no prefetch_related")
        compiler = query.get_compiler(using=alias)
        sql, params = compiler.as_sql()
        self.sql, self.params = sql, list(params)
        self.slots = [(i, p[len(_MARK) : -1]) for i, p in enumerate(self.params) if _is_placeholder(p)]
        if any(isinstance(p, str) and _MARK in p and not _is_placeholder(p) for p in self.params):
            raise ValueError("a placeholder stands for a whole value, not part of one (no contains, no startswith)")
        # What ModelIterable and SQLCompiler.results_iter work out per query, worked out once.
        columns = [column[0] for column in compiler.select[: compiler.col_count]]
        self.converters = [
            (i, convs, expression) for i, (convs, expression) in compiler.get_converters(columns).items()
        ]
        klass_info = compiler.klass_info
        start, end = klass_info["select_fields"][0], klass_info["select_fields"][-1] + 1
        self.model = klass_info["model"]
        self.fields = (start, end)
        self.init_list = [column[0].target.attname for column in compiler.select[start:end]]
        self.annotations = list(compiler.annotation_col_map.items())
        self.related = get_related_populators(klass_info, compiler.select, alias)  # select_related's rows


def _is_placeholder(value) -> bool:
    return isinstance(value, str) and value.startswith(_MARK) and value.endswith("\x00") and value.count("\x00") == 2


class Prepared(Generic[M]):
    """A read built by `build(placeholders)`, compiled on its first call for each database alias."""

    def __init__(self, build: Callable[[_Placeholders], QuerySet[M]]):
        self.build = build
        self._compiled: dict[str, _Compiled] = {}
        self._lock = threading.Lock()

    def _for(self, alias: str) -> _Compiled:
        compiled = self._compiled.get(alias)
        if compiled is None:
            with self._lock:
                compiled = self._compiled.get(alias)
                if compiled is None:
                    compiled = self._compiled[alias] = _Compiled(self.build(_Placeholders()), alias)
        return compiled

    def __call__(self, *, using: str = "default", **values: str) -> list[M]:
        """The rows for these placeholder values, as model instances (annotations set as attributes)."""
        c = self._for(using)
        params = list(c.params)
        for index, name in c.slots:
            params[index] = values[name]
        connection = connections[using]
        with connection.cursor() as cursor:
            cursor.execute(c.sql, params)
            rows = cursor.fetchall()
        (start, end), out = c.fields, []
        for raw in rows:
            row = list(raw)
            for i, convs, expression in c.converters:
                value = row[i]
                for convert in convs:
                    value = convert(value, expression, connection)
                row[i] = value
            obj = c.model.from_db(using, c.init_list, row[start:end])
            for populator in c.related:
                populator.populate(row, obj)
            for name, position in c.annotations:
                setattr(obj, name, row[position])
            out.append(obj)
        return out

    def first(self, *, using: str = "default", **values: str) -> M | None:
        """The first row, or None; the queryset says the order (and should be limited to one row)."""
        rows = self(using=using, **values)
        return rows[0] if rows else None


_updates: dict[tuple, tuple[str, list, list]] = {}  # shape -> (SQL, set fields, filter fields)


def update(model: type[Model], where: dict[str, object], *, using: str = "default", **values) -> int:
    """`model.objects.filter(**where).update(**values)` where every filter is a concrete field's equality ("pk",
    a field's name or attname): the statement's SQL is built once per model, fields and database, and the values go
    through the fields' own preparation (JSON, datetimes), as QuerySet.update sends them. Returns the rows updated.
    No expressions (F, Case): use the ORM for those."""
    connection = connections[using]
    key = (model, tuple(where), tuple(values), using)
    shape = _updates.get(key)
    if shape is None:
        opts, quote = model._meta, connection.ops.quote_name
        set_fields = [opts.get_field(name) for name in values]
        where_fields = [opts.pk if name == "pk" else opts.get_field(name) for name in where]
        _plain_columns("update", model, set_fields + where_fields)
        sql = "UPDATE {} SET {} WHERE {}".format(
            quote(opts.db_table),
            ", ".join(f"{quote(f.column)} = %s" for f in set_fields),
            " AND ".join(f"{quote(f.column)} = %s" for f in where_fields),
        )
        shape = _updates[key] = (sql, set_fields, where_fields)
    sql, set_fields, where_fields = shape
    _plain_values("update", (*values.values(), *where.values()))
    params = [f.get_db_prep_save(value, connection) for f, value in zip(set_fields, values.values(), strict=True)]
    params += [
        f.get_db_prep_value(f.get_prep_value(value), connection, prepared=True)
        for f, value in zip(where_fields, where.values(), strict=True)
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


_insert_fields: dict[tuple, list] = {}  # (model, database) -> the columns written
_insert_sql: dict[tuple, str] = {}  # (model, rows, database) -> the statement


def insert(objs: Sequence[Model], *, using: str = "default") -> None:
    """`Model.objects.bulk_create(objs)` for new rows of one model whose primary key is set before the insert (a
    default id, not a sequence the database assigns): the statement's SQL is built once per model, row count and
    database (Django's compiler costs more than the statement on a step's hot path), and each value goes through
    its field's own preparation (pre_save: auto_now_add; JSON; datetimes), as bulk_create sends it. Every row is
    prepared before the first batch is sent, so a refused row writes nothing. Sends no signals (neither does
    bulk_create); the objects are marked saved."""
    if not objs:
        return
    model = type(objs[0])
    if any(type(obj) is not model or obj.pk is None for obj in objs):
        raise ValueError(f"insert() takes new {model.__name__} rows with their primary key set, one model at a time")
    connection = connections[using]
    fields = _insert_fields.get((model, using))
    if fields is None:
        fields = [f for f in model._meta.concrete_fields if not f.generated]
        _plain_columns("insert", model, fields)
        _insert_fields[(model, using)] = fields
    rows = []
    for obj in objs:
        obj._prepare_related_fields_for_save(operation_name="insert")  # a related object's id, as save() reads it
        values = [f.pre_save(obj, True) for f in fields]
        _plain_values("insert", values)
        rows.append([f.get_db_prep_save(value, connection) for f, value in zip(fields, values, strict=True)])
    batch = max(1, connection.ops.bulk_batch_size(fields, objs))
    for start in range(0, len(rows), batch):
        chunk = rows[start : start + batch]
        sql = _insert_sql.get((model, len(chunk), using))
        if sql is None:
            quote = connection.ops.quote_name
            row = "({})".format(", ".join(["%s"] * len(fields)))
            sql = _insert_sql[(model, len(chunk), using)] = "INSERT INTO {} ({}) VALUES {}".format(
                quote(model._meta.db_table), ", ".join(quote(f.column) for f in fields), ", ".join([row] * len(chunk))
            )
        with connection.cursor() as cursor:
            cursor.execute(sql, [value for row in chunk for value in row])
    for obj in objs:
        obj._state.adding, obj._state.db = False, using


def _plain_columns(verb: str, model: type[Model], fields: list) -> None:
    """The statements here bind every value as a plain %s parameter of a real column: no reverse relations or
    many-to-many, no field whose SQL wraps its parameter (a custom `get_placeholder`, as pgvector's fields have)."""
    if any(not f.concrete or f.many_to_many or hasattr(f, "get_placeholder") for f in fields):
        raise ValueError(f"{verb}() takes concrete fields of {model.__name__} bound as plain %s parameters only")


def _plain_values(verb: str, values) -> None:
    if any(hasattr(value, "resolve_expression") for value in values):
        raise ValueError(f"{verb}() takes plain values, not expressions (F, Case, functions): use the ORM for those")
