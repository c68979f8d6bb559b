"""Creates and repairs the search structures: GIN indexes on PostgreSQL; on SQLite, FTS5 tables and a per-agent
passage revision counter, all kept current by triggers.

Idempotent: the migration calls it, and so does post_migrate, because SQLite rebuilds a table (dropping its
triggers) whenever a later migration alters it in ways ALTER TABLE cannot express.
Each FTS5 row's rowid comes from a map table (source id -> FTS rowid) instead of the source table's implicit
rowid, which VACUUM may renumber on tables whose primary key is not an INTEGER.
"""

# (source table, FTS table)
TABLES = (("core_message", "memory_message_fts"), ("memory_passage", "memory_passage_fts"))


def _sqlite_statements(source: str, fts: str) -> list[str]:
    rowid = f"(SELECT fts_rowid FROM {fts}_map WHERE row_id = {{ref}}.id)"
    return [
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {fts} USING fts5(text, tokenize = 'porter unicode61 remove_diacritics 2')",
        f"CREATE TABLE IF NOT EXISTS {fts}_map (fts_rowid INTEGER PRIMARY KEY AUTOINCREMENT, row_id TEXT NOT NULL UNIQUE)",
        f"""CREATE TRIGGER IF NOT EXISTS {fts}_ai AFTER INSERT ON {source} BEGIN
              INSERT INTO {fts}_map(row_id) VALUES (new.id);
              INSERT INTO {fts}(rowid, text) VALUES ({rowid.format(ref="new")}, new.text);
            END""",
        f"""CREATE TRIGGER IF NOT EXISTS {fts}_ad AFTER DELETE ON {source} BEGIN
              DELETE FROM {fts} WHERE rowid = {rowid.format(ref="old")};
              DELETE FROM {fts}_map WHERE row_id = old.id;
            END""",
        f"""CREATE TRIGGER IF NOT EXISTS {fts}_au AFTER UPDATE OF text ON {source} BEGIN
              UPDATE {fts} SET text = new.text WHERE rowid = {rowid.format(ref="old")};
            END""",
        # Repair: rows written while the triggers were missing.
        f"DELETE FROM {fts} WHERE rowid IN (SELECT fts_rowid FROM {fts}_map WHERE row_id NOT IN (SELECT id FROM {source}))",
        f"DELETE FROM {fts}_map WHERE row_id NOT IN (SELECT id FROM {source})",
        f"INSERT INTO {fts}_map(row_id) SELECT id FROM {source} WHERE id NOT IN (SELECT row_id FROM {fts}_map)",
        f"INSERT INTO {fts}(rowid, text) SELECT m.fts_rowid, s.text FROM {fts}_map m JOIN {source} s ON s.id = m.row_id "
        f"WHERE m.fts_rowid NOT IN (SELECT rowid FROM {fts})",
    ]


def _sqlite_revision_statements() -> list[str]:
    """A per-agent revision number of its passages, bumped by triggers: the vector cache's cheap freshness check."""
    bump = (
        "INSERT INTO memory_passage_rev(agent_id, rev) VALUES ({ref}.agent_id, 1) "
        "ON CONFLICT(agent_id) DO UPDATE SET rev = rev + 1;"
    )
    return [
        "CREATE TABLE IF NOT EXISTS memory_passage_rev (agent_id TEXT PRIMARY KEY, rev INTEGER NOT NULL)",
        # A file's chunks have no agent (they are searched per folder): no revision row for them.
        "CREATE TRIGGER IF NOT EXISTS memory_passage_rev_ai AFTER INSERT ON memory_passage "
        f"WHEN new.agent_id IS NOT NULL BEGIN {bump.format(ref='new')} END",
        "CREATE TRIGGER IF NOT EXISTS memory_passage_rev_ad AFTER DELETE ON memory_passage "
        f"WHEN old.agent_id IS NOT NULL BEGIN {bump.format(ref='old')} END",
        "CREATE TRIGGER IF NOT EXISTS memory_passage_rev_au AFTER UPDATE OF embedding, embedding_model ON memory_passage "
        f"WHEN new.agent_id IS NOT NULL BEGIN {bump.format(ref='new')} END",
        # Anything written while the triggers were missing: force every cache to reload.
        "INSERT INTO memory_passage_rev(agent_id, rev) SELECT DISTINCT agent_id, 1 FROM memory_passage "
        "WHERE agent_id IS NOT NULL "
        "ON CONFLICT(agent_id) DO UPDATE SET rev = rev + 1",
    ]


def fts_ensure(connection) -> None:
    """Create missing full-text indexes/tables/triggers and backfill rows they missed (DDL; idempotent)."""
    with connection.cursor() as cursor:
        for source, fts in TABLES:
            if connection.vendor == "postgresql":
                cursor.execute(
                    f"CREATE INDEX IF NOT EXISTS {source}_text_fts ON {source} USING gin (to_tsvector('english', text))"
                )
            elif connection.vendor == "sqlite" and sqlite_has_fts5(connection):
                for statement in _sqlite_statements(source, fts):
                    cursor.execute(statement)
        if connection.vendor == "sqlite":
            for statement in _sqlite_revision_statements():
                cursor.execute(statement)


def fts_drop(connection) -> None:
    """Remove the full-text structures (migration rollback)."""
    with connection.cursor() as cursor:
        for source, fts in TABLES:
            if connection.vendor == "postgresql":
                cursor.execute(f"DROP INDEX IF EXISTS {source}_text_fts")
            elif connection.vendor == "sqlite":
                for suffix in ("ai", "ad", "au"):
                    cursor.execute(f"DROP TRIGGER IF EXISTS {fts}_{suffix}")
                cursor.execute(f"DROP TABLE IF EXISTS {fts}")
                cursor.execute(f"DROP TABLE IF EXISTS {fts}_map")
        if connection.vendor == "sqlite":
            for suffix in ("ai", "ad", "au"):
                cursor.execute(f"DROP TRIGGER IF EXISTS memory_passage_rev_{suffix}")
            cursor.execute("DROP TABLE IF EXISTS memory_passage_rev")


def sqlite_has_fts5(connection) -> bool:
    """Whether this SQLite build has FTS5 (it usually does; a build without it gets vector-only archival search)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT sqlite_compileoption_used('ENABLE_FTS5')")
        return bool(cursor.fetchone()[0])


def sqlite_fts_installed(connection) -> bool:
    """Whether the FTS5 tables exist in this SQLite database."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM sqlite_master WHERE name = 'memory_passage_fts'")
        return cursor.fetchone() is not None
