"""A busy database is a 503 with Retry-After, never a 500 (agents_ide/busy.py): SQLite's "database is locked" and our
writer lock's "no write turn", PostgreSQL's lock timeout and "too many connections", whether the API or a page meets
it, and whether it is raised in a view or in the middleware around it (a session saved after the view)."""

import sqlite3
import threading

import pytest
from django.db import OperationalError, connection
from django.test import Client

from agents_ide.busy import RETRY_AFTER_S

BUSY = [
    OperationalError("database is locked"),
    OperationalError("database is locked (no write turn within 30 s)"),
    sqlite3.OperationalError("database is locked (no write turn within 30 s)"),  # raised as a transaction begins
    OperationalError("canceling statement due to lock timeout"),
    OperationalError("connection failed: FATAL:  sorry, too many clients already"),
]


def _busy_list(monkeypatch, exc):
    def refuse(**kwargs):
        raise exc

    monkeypatch.setattr("core.api.agents.selectors.agents_list", refuse)
    monkeypatch.setattr("core.web.agents.selectors.agents_list", refuse)


@pytest.mark.parametrize("exc", BUSY, ids=[str(e)[:30] for e in BUSY])
def test_the_api_answers_a_busy_database_with_503_and_retry_after(account, monkeypatch, exc):
    _busy_list(monkeypatch, exc)
    r = Client(HTTP_AUTHORIZATION=f"Bearer {account.token}", raise_request_exception=False).get("/v1/agents/")
    assert r.status_code == 503 and r["Retry-After"] == str(RETRY_AFTER_S)
    assert r["Content-Type"].startswith("application/json") and "busy" in r.json()["detail"]


@pytest.mark.parametrize("exc", BUSY[:1] + BUSY[2:4], ids=["sqlite", "begin", "postgres"])
def test_a_page_answers_a_busy_database_with_503_and_retry_after(account, monkeypatch, exc):
    _busy_list(monkeypatch, exc)
    web = Client(raise_request_exception=False)
    web.force_login(account.user)
    r = web.get("/")
    assert r.status_code == 503 and r["Retry-After"] == str(RETRY_AFTER_S)
    assert "The server is busy" in r.content.decode()


def test_any_other_error_is_still_the_500_page(account, monkeypatch):
    _busy_list(monkeypatch, RuntimeError("a bug"))
    web = Client(raise_request_exception=False)
    web.force_login(account.user)
    assert web.get("/").status_code == 500


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's writer lock")
@pytest.mark.django_db(transaction=True)  # no test transaction holding the writer lock on this thread
def test_a_write_that_gets_no_turn_is_a_503_on_sqlite(account, monkeypatch):
    """For real: another thread holds the process's SQLite writer lock past the wait for a turn."""
    from agents_ide.sqlite import base

    monkeypatch.setattr(base.LockingCursorWrapper, "lock_timeout", 0.2)
    monkeypatch.setitem(connection.settings_dict.setdefault("OPTIONS", {}), "timeout", 0.2)
    taken, release = threading.Event(), threading.Event()

    def hold():
        with base._writer:
            taken.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    assert taken.wait(5)
    try:
        api = Client(HTTP_AUTHORIZATION=f"Bearer {account.token}", raise_request_exception=False)
        r = api.post("/v1/agents/", '{"name": "locked out"}', content_type="application/json")
    finally:
        release.set()
        holder.join()
    assert r.status_code == 503 and r["Retry-After"] == str(RETRY_AFTER_S), r.content
