"""The rule that keeps locks short: no network or sandbox call runs while a database transaction is open.

A provider call or a sandbox run takes seconds; inside a transaction it would hold the agent's row lock on
PostgreSQL, or SQLite's process-wide writer lock (agents_ide/sqlite), for all that time.
"""

from django.db import connection


class IOInTransaction(RuntimeError):
    """A slow call (embedder, model, sandbox) was made inside an open database transaction."""


def outside_transaction(what: str) -> None:
    """Raise IOInTransaction if a transaction is open on this thread (a test's own wrapping one aside)."""
    if any(not getattr(block, "_from_testcase", False) for block in connection.atomic_blocks):
        raise IOInTransaction(f"{what} must not run inside a database transaction: do it before the commit phase")
