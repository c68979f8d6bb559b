"""Ranked full-text search over a filtered queryset of messages or passages (both have a `text` column).

User and agent queries are never passed through as query syntax: words are extracted and OR-ed, so quotes,
colons, parentheses or a lone `*` cannot raise a syntax error (FTS5 and to_tsquery both have one).
PostgreSQL uses the GIN index on to_tsvector('english', text); SQLite its FTS5 table (see fts_schema.py).
"""

import json
import re
import weakref

from django.db import connections
from django.db.models import BooleanField, FloatField, QuerySet, TextField
from django.db.models.expressions import RawSQL

from memory.search.fts_schema import TABLES, sqlite_fts_installed

MAX_TERMS = 32
_WORD = re.compile(r"\w+", re.UNICODE)
_FTS_TABLE = dict(TABLES)


def query_terms(query: str) -> list[str]:
    """The searchable words of a free-text query, lower-cased, de-duplicated, in order."""
    return list(dict.fromkeys(w.lower() for w in _WORD.findall(query or "")))[:MAX_TERMS]


def fts5_match(query: str) -> str:
    """An FTS5 MATCH expression: each word as a quoted string, OR-ed ("" when there is nothing to search)."""
    return " OR ".join(f'"{t}"' for t in query_terms(query))


def pg_tsquery(query: str) -> str:
    """A to_tsquery('english', …) argument: words OR-ed (words hold no tsquery operators)."""
    return " | ".join(query_terms(query))


def ranked_ids(
    *, queryset: QuerySet, query: str, limit: int, offset: int = 0, newest_first_by: str = "created_at"
) -> list[str]:
    """Ids of rows in `queryset` matching `query`, best match first (ties: newest first)."""
    connection = connections[queryset.db]
    if connection.vendor == "postgresql":
        return _pg_ranked_ids(queryset, query, limit, offset, newest_first_by)
    return _sqlite_ranked_ids(connection, queryset, query, limit, offset, newest_first_by)


def _pg_ranked_ids(queryset, query, limit, offset, newest_first_by) -> list[str]:
    tsquery = pg_tsquery(query)
    if not tsquery:
        return []
    table = queryset.model._meta.db_table
    vector = f'to_tsvector(\'english\', "{table}"."text")'
    qs = (
        queryset.filter(RawSQL(f"{vector} @@ to_tsquery('english', %s)", (tsquery,), output_field=BooleanField()))
        .annotate(
            _rank=RawSQL(f"ts_rank_cd({vector}, to_tsquery('english', %s))", (tsquery,), output_field=FloatField())
        )
        .order_by("-_rank", f"-{newest_first_by}")
    )
    return list(qs.values_list("id", flat=True)[offset : offset + limit])


_FIRST_BATCH, _MAX_BATCH = 256, 8192


def _sqlite_ranked_ids(connection, queryset, query, limit, offset, newest_first_by) -> list[str]:
    match = fts5_match(query)
    if not match:
        return []
    table = queryset.model._meta.db_table
    fts = _FTS_TABLE[table]
    need = offset + limit
    # A batch's ids reach the queryset as one JSON parameter: an `id__in` of hundreds of ids costs more to build and
    # compile, value by value, than the search itself.
    in_batch = f'"{table}"."id" IN (SELECT value FROM json_each(%s))'
    # The tie-break column as stored (ISO text for a datetime, which sorts as the time does; an integer for a
    # sequence): read through the field, each row's datetime would be parsed and made aware only to be compared.
    column = queryset.model._meta.get_field(newest_first_by).column
    newest = RawSQL(f'"{table}"."{column}"', (), output_field=TextField())
    # The FTS table is the outer loop: its hits best first, checked against the queryset a batch at a time (an
    # indexed IN by primary key). Asking the FTS table per row of the queryset instead runs the MATCH once per row
    # (minutes at 100k passages), and an IN over the queryset's rows materializes every row of the agent first.
    kept: list[tuple[float, object, str]] = []
    batch = _FIRST_BATCH
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT mp.row_id, {fts}.rank FROM {fts} CROSS JOIN {fts}_map mp ON mp.fts_rowid = {fts}.rowid "
            f"WHERE {fts} MATCH %s ORDER BY {fts}.rank",
            (match,),
        )
        while True:
            hits = cursor.fetchmany(batch)
            if not hits:
                break
            rank = dict(hits)
            batch_filter = RawSQL(in_batch, (json.dumps(list(rank)),), output_field=BooleanField())
            rows = queryset.order_by().filter(batch_filter).values_list("id", newest)
            kept.extend((rank[row_id], newest, row_id) for row_id, newest in rows)
            # Done once `need` rows are kept and no later hit can tie with the last of them (ties: newest first).
            if len(kept) >= need and hits[-1][1] > sorted(r for r, _, _ in kept)[need - 1]:
                break
            batch = min(batch * 2, _MAX_BATCH)
    kept.sort(key=lambda r: r[1], reverse=True)
    kept.sort(key=lambda r: r[0])
    return [row_id for _, _, row_id in kept[offset:need]]


def ranked_ids_where(
    *,
    using: str,
    table: str,
    where: str,
    params: list,
    query: str,
    limit: int,
    offset: int = 0,
    newest_first_by: str = "created_at",
) -> list[str]:
    """As `ranked_ids`, over the rows of `table` (aliased `s`) that pass `where`, raw SQL with its `params`: one
    statement, for the searches run on every request (a queryset is compiled anew for each, and on SQLite for each
    batch of hits, which cost more than the search). `newest_first_by` is a column name."""
    connection = connections[using]
    if connection.vendor == "postgresql":
        tsquery = pg_tsquery(query)
        if not tsquery:
            return []
        vector = "to_tsvector('english', s.\"text\")"
        sql = (
            f"SELECT s.id FROM \"{table}\" s WHERE ({where}) AND {vector} @@ to_tsquery('english', %s) "
            f"ORDER BY ts_rank_cd({vector}, to_tsquery('english', %s)) DESC, s.\"{newest_first_by}\" DESC "
            "LIMIT %s OFFSET %s"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, [*params, tsquery, tsquery, limit, offset])
            return [row[0] for row in cursor.fetchall()]
    match = fts5_match(query)
    if not match:
        return []
    fts = _FTS_TABLE[table]
    need = offset + limit
    # The FTS table is the outer loop (CROSS JOIN keeps SQLite's join order), its hits best first, each row found by
    # primary key and checked against `where`. The tie-break column is read as stored: `+` makes it an expression, so
    # the driver's converter for its declared type (a datetime parsed for every hit) does not run.
    sql = (
        f'SELECT mp.row_id, {fts}.rank, +s."{newest_first_by}" FROM {fts} '
        f'CROSS JOIN {fts}_map mp ON mp.fts_rowid = {fts}.rowid CROSS JOIN "{table}" s ON s.id = mp.row_id '
        f"WHERE {fts} MATCH %s AND ({where}) ORDER BY {fts}.rank"
    )
    kept: list[tuple[float, object, str]] = []
    with connection.cursor() as cursor:
        cursor.execute(sql, [match, *params])
        while rows := cursor.fetchmany(_FIRST_BATCH):
            for row_id, rank, newest in rows:
                # Done once `need` rows are kept and no later hit can tie with the last of them (ties: newest first).
                if len(kept) >= need and rank > kept[need - 1][0]:
                    break
                kept.append((rank, newest, row_id))
            else:
                continue
            break
    kept.sort(key=lambda r: r[1], reverse=True)
    kept.sort(key=lambda r: r[0])
    return [row_id for _, _, row_id in kept[offset:need]]


# The SQLite connections (Django's wrapper, the driver's connection it held) whose database was seen to hold the FTS5
# tables: they are made by a migration and dropped only by undoing it, so a search asks once per connection.
_fts_seen: "weakref.WeakKeyDictionary[object, object]" = weakref.WeakKeyDictionary()


def fulltext_available(connection) -> bool:
    """Whether this database can run full-text search (PostgreSQL always; SQLite when built with FTS5 and its
    tables are installed, asked once per connection)."""
    if connection.vendor == "postgresql":
        return True
    connection.ensure_connection()
    if _fts_seen.get(connection) is connection.connection:
        return True
    installed = sqlite_fts_installed(connection)
    if installed:
        _fts_seen[connection] = connection.connection
    return installed
