"""The rule that keeps locks short: no network or sandbox call runs while a database transaction is open.

A provider call or a sandbox run takes seconds; inside a transaction it would hold the agent's row lock on
PostgreSQL, or SQLite's process-wide writer lock (agents_ide/sqlite), for all that time.
"""

from django.db import connection


class IOInTransaction(RuntimeError):
    """A slow call (embedder, model, sandbox) was made inside an open database transaction."""


def outside_transaction(what: str) -> None:
    """Raise IOInTransaction if a transaction is open on this thread (a test's own wrapping one aside); else,
    before the slow call, give a pooled connection back (`connection_lend`)."""
    if any(not getattr(block, "_from_testcase", False) for block in connection.atomic_blocks):
        raise IOInTransaction(f"{what} must not run inside a database transaction: do it before the commit phase")
    connection_lend()


def connection_lend() -> None:
    """Give this thread's connection back to the pool while it waits (a model, a sandbox, another run): the next
    query borrows one again. Only pooled connections outside any transaction; others stay (reopening a SQLite
    connection re-reads the schema)."""
    if connection.connection is not None and not connection.in_atomic_block and getattr(connection, "pool", None):
        connection.close()
