"""Ranked full-text search over a filtered queryset of messages or passages (both have a `text` column).

User and agent queries are never passed through as query syntax: words are extracted and OR-ed, so quotes,
colons, parentheses or a lone `*` cannot raise a syntax error (FTS5 and to_tsquery both have one).
PostgreSQL uses the GIN index on to_tsvector('english', text); SQLite its FTS5 table (see fts_schema.py).
"""

import re

from django.db import connections
from django.db.models import BooleanField, FloatField, QuerySet
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


def _sqlite_ranked_ids(connection, queryset, query, limit, offset, newest_first_by) -> list[str]:
    match = fts5_match(query)
    if not match:
        return []
    table = queryset.model._meta.db_table
    fts = _FTS_TABLE[table]
    column = queryset.model._meta.get_field(newest_first_by).column
    # The queryset's filters become a correlated EXISTS checked per FTS hit (a primary-key probe); an IN (subquery)
    # would materialize every row of the agent first (1.4 s instead of 16 ms at 100k passages). CROSS JOIN keeps
    # the FTS table as the outer loop.
    sub_sql, sub_params = queryset.order_by().filter(id=RawSQL("s.id", ())).values("id").query.sql_with_params()
    sql = (
        f"SELECT s.id FROM {fts} CROSS JOIN {fts}_map mp ON mp.fts_rowid = {fts}.rowid "
        f"CROSS JOIN {table} s ON s.id = mp.row_id "
        f"WHERE {fts} MATCH %s AND EXISTS ({sub_sql}) ORDER BY {fts}.rank, s.{column} DESC LIMIT %s OFFSET %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, (match, *sub_params, limit, offset))
        return [row[0] for row in cursor.fetchall()]


def fulltext_available(connection) -> bool:
    """Whether this database can run full-text search (PostgreSQL always; SQLite when built with FTS5)."""
    if connection.vendor == "postgresql":
        return True

    return sqlite_fts_installed(connection)
