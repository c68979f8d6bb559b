"""SQLite backend with a process-wide writer lock: concurrent writers of one process queue in Python.

SQLite admits one writer at a time. Without this, a thread that finds the write lock taken sleeps in
SQLite's busy handler, which backs off in steps up to 100 ms and never learns that the lock came free: with
a few dozen runs writing at once, most of their time went to those sleeps while the CPU sat idle. Here a
write transaction (Django begins them IMMEDIATE) and every autocommit write statement first take a
reentrant process-wide lock, so the next writer starts the moment the previous one commits. Other
processes on the same file (a management command, a worker) still meet SQLite's own busy timeout.
"""

import sqlite3
import threading

from django.db.backends.sqlite3 import base

_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLAC", "CREATE", "DROP T", "DROP I", "ALTER ")
_writer = threading.RLock()


def _take(timeout: float) -> None:
    if not _writer.acquire(timeout=timeout):
        raise sqlite3.OperationalError(f"database is locked (no write turn within {timeout:g} s)")


class LockingCursorWrapper(base.SQLiteCursorWrapper):
    lock_timeout = 30.0

    def execute(self, query, params=None):
        if query[:6].upper() not in _WRITES:
            return super().execute(query, params)
        _take(self.lock_timeout)
        try:
            return super().execute(query, params)
        finally:
            _writer.release()

    def executemany(self, query, param_list):
        _take(self.lock_timeout)
        try:
            return super().executemany(query, param_list)
        finally:
            _writer.release()


class DatabaseWrapper(base.DatabaseWrapper):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._holds_writer = False

    def create_cursor(self, name=None):
        return self.connection.cursor(factory=LockingCursorWrapper)

    def _start_transaction_under_autocommit(self):
        _take(float(self.settings_dict.get("OPTIONS", {}).get("timeout", 30)))
        self._holds_writer = True
        try:
            super()._start_transaction_under_autocommit()
        except BaseException:
            self._writer_give()
            raise

    def _writer_give(self) -> None:
        if self._holds_writer:
            self._holds_writer = False
            _writer.release()

    def _commit(self):
        try:
            super()._commit()
        finally:
            self._writer_give()

    def _rollback(self):
        try:
            super()._rollback()
        finally:
            self._writer_give()

    def _close(self):
        try:
            super()._close()
        finally:
            self._writer_give()
