"""Writing new passages: our own INSERT, shared by an agent's archival memory and a shared archive's."""

from functools import cache

from django.db import connections
from django.utils import timezone

from memory.models import Passage

INSERT_CHUNK = 500  # rows a statement: 14 parameters each, under SQLite's and PostgreSQL's limits


@cache
def _insert_parts() -> tuple[list, str, str]:
    fields = list(Passage._meta.concrete_fields)
    columns = ", ".join(f'"{f.column}"' for f in fields)
    head = f'INSERT INTO "{Passage._meta.db_table}" ({columns}) VALUES '
    return fields, head, "(" + ", ".join(["%s"] * len(fields)) + ")"


def passages_write(rows: list[Passage]) -> list[Passage]:
    """INSERT new passages, each with the `created_at` it holds (none: now), every value prepared by its field as
    the ORM's insert does: our statement, because compiling the ORM's cost more than the write (an archival insert
    a request). One statement per INSERT_CHUNK rows: more than that want the caller's transaction. Returns them
    as stored rows (Model.from_db: a later save() updates them), in order."""
    fields, head, row_sql = _insert_parts()
    db = connections[Passage.objects.db]
    now = timezone.now()
    with db.cursor() as cursor:
        for start in range(0, len(rows), INSERT_CHUNK):
            chunk = rows[start : start + INSERT_CHUNK]
            params = []
            for passage in chunk:
                if passage.created_at is None:
                    passage.created_at = now
                params.extend(f.get_db_prep_save(getattr(passage, f.attname), db) for f in fields)
            cursor.execute(head + ", ".join([row_sql] * len(chunk)), params)
    names = [f.attname for f in fields]
    return [Passage.from_db(db.alias, names, [getattr(p, n) for n in names]) for p in rows]
