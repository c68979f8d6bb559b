"""The SQLite backend's process-wide writer lock: writers of one process take turns in Python (no sleeping
in SQLite's busy handler), every exit from a transaction hands the turn on, and nothing is lost.

These use a throwaway SQLite file through our backend, so they run whatever the suite's database is."""

import threading
import uuid

import pytest
from django.db import OperationalError, connections, transaction

from agents_ide.sqlite import base as backend


@pytest.fixture
def alias(tmp_path, django_db_blocker):
    with django_db_blocker.unblock():
        yield from _alias(tmp_path)


def _alias(tmp_path):
    name = f"writer_{uuid.uuid4().hex[:8]}"
    connections.settings[name] = connections.configure_settings(
        {
            "default": connections.settings["default"],
            name: {
                "ENGINE": "agents_ide.sqlite",
                "NAME": str(tmp_path / "w.sqlite3"),
                "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 5, "init_command": "PRAGMA journal_mode=WAL"},
            },
        }
    )[name]
    opened = []

    def conn():
        c = connections[name]
        opened.append(c)
        return c

    c = conn()
    with c.cursor() as cur:
        cur.execute("CREATE TABLE counter (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)")
        cur.execute("INSERT INTO counter (id, n) VALUES (1, 0)")
    yield name, conn
    for c in opened:
        c.close()
    del connections[name]
    del connections.settings[name]


def _in_thread(fn):
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - reported to the test thread
            box["error"] = exc
        finally:
            connections.close_all()

    t = threading.Thread(target=run)
    t.start()
    t.join(30)
    assert not t.is_alive()
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _read(conn):
    with conn().cursor() as cur:
        cur.execute("SELECT n FROM counter WHERE id = 1")
        return cur.fetchone()[0]


def test_concurrent_read_modify_write_transactions_lose_nothing(alias):
    name, conn = alias
    errors = []

    def worker():
        try:
            for _ in range(25):
                with transaction.atomic(using=name):
                    with connections[name].cursor() as cur:
                        cur.execute("SELECT n FROM counter WHERE id = 1")
                        n = cur.fetchone()[0]
                        cur.execute("UPDATE counter SET n = %s WHERE id = 1", [n + 1])
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connections[name].close()

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert _read(conn) == 200


def test_a_writer_waits_for_the_turn_held_by_an_open_transaction(alias, monkeypatch):
    name, conn = alias
    monkeypatch.setattr(backend.LockingCursorWrapper, "lock_timeout", 0.2)

    def write_elsewhere():
        with connections[name].cursor() as cur:
            cur.execute("UPDATE counter SET n = n + 10 WHERE id = 1")

    with transaction.atomic(using=name):
        with conn().cursor() as cur:
            cur.execute("UPDATE counter SET n = n + 1 WHERE id = 1")  # reentrant: the transaction holds the turn
        with pytest.raises(OperationalError, match="no write turn"):
            _in_thread(write_elsewhere)
    _in_thread(write_elsewhere)  # the commit handed the turn on
    assert _read(conn) == 11


def test_a_rolled_back_transaction_hands_the_turn_on(alias, monkeypatch):
    name, conn = alias
    monkeypatch.setattr(backend.LockingCursorWrapper, "lock_timeout", 0.2)
    with pytest.raises(ZeroDivisionError):
        with transaction.atomic(using=name):
            with conn().cursor() as cur:
                cur.execute("UPDATE counter SET n = 99 WHERE id = 1")
            raise ZeroDivisionError  # the transaction fails after its write

    def write_elsewhere():
        with connections[name].cursor() as cur:
            cur.execute("UPDATE counter SET n = n + 1 WHERE id = 1")

    _in_thread(write_elsewhere)
    assert _read(conn) == 1
