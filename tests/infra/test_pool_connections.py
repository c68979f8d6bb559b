"""Run-pool threads keep their database connection from task to task, and Django's rules still retire a
connection a task left in a transaction; shutdown closes the kept ones. With PostgreSQL's connection pool, a
thread gives its connection back to the pool instead, after each task and after each piece of work outside a
request."""

import threading

import pytest
from django.db import connection, connections

from core.models import Run
from core.runs import queue
from tests.conftest import pool_in_use, postgres_required
from tests.helpers import until


def _pooled() -> bool:
    return getattr(connection, "pool", None) is not None


@pytest.mark.django_db(transaction=True)
def test_a_pool_thread_keeps_a_healthy_connection_and_drops_one_left_in_a_transaction():
    seen = {}

    def task_thread():
        try:
            Run.objects.exists()  # a task used the database
            raw = connection.connection
            queue._connection_keep_or_drop()
            seen["kept"] = connection.connection is raw and raw in queue._pool_connections
            seen["given back"] = connection.connection is None and raw not in queue._pool_connections
            Run.objects.exists()
            seen["reused"] = connection.connection is raw
            connection.set_autocommit(False)  # the next task left a transaction open
            queue._connection_keep_or_drop()
            seen["dropped"] = connection.connection is None and raw not in queue._pool_connections
        finally:
            connections.close_all()

    t = threading.Thread(target=task_thread)
    t.start()
    t.join(30)
    if _pooled():  # the pool lends a connection per task: no thread keeps one between tasks
        assert {k: seen[k] for k in ("kept", "given back", "dropped")} == {
            "kept": False,
            "given back": True,
            "dropped": True,
        }
    else:
        assert seen == {"kept": True, "given back": False, "reused": True, "dropped": True}


@pytest.mark.django_db(transaction=True)
def test_shutdown_closes_the_connections_pool_threads_kept():
    def task_thread():
        Run.objects.exists()
        queue._connection_keep_or_drop()

    before = _in_use() if _pooled() else 0  # this test's own connection, and any an earlier test's thread kept
    t = threading.Thread(target=task_thread)
    t.start()
    t.join(30)
    kept = list(queue._pool_connections)
    if _pooled():  # given back at the task's end: nothing left for shutdown to close
        assert kept == [] and _in_use() <= max(before, 1)
        return
    assert kept
    queue._pool_connections_close()
    assert queue._pool_connections == set()
    for raw in kept:
        with pytest.raises(Exception):  # noqa: B017 - the driver's own "closed" error class
            raw.cursor().execute("SELECT 1")  # closed


def _in_use() -> int:
    return pool_in_use(connection.pool)


@pytest.mark.django_db(transaction=True)
def test_threads_outside_the_request_give_their_pooled_connections_back(account, api, fake_llm):
    """PostgreSQL's pool holds DB_POOL_MAX connections; a thread Django does not tidy (asgiref's, a replay's, the
    run pool's) that kept its connection would take one for good, and the process would stall once all were
    taken. Each kind of work runs more times than the pool has connections; none stays taken after."""
    postgres_required()
    from django.conf import settings

    from core.models import Run, Step
    from tests.factories import make_agent
    from tests.fake_llm import FakeLLM

    agent = make_agent(account.org)
    fake_llm.script(*[FakeLLM.tool("send_message", {"message": "hi"})] * 200)
    connections.close_all()
    base = _in_use()
    rounds = settings.DB_POOL_MAX + 2

    for _ in range(rounds):  # an async view's thread; the run itself on the run pool's
        r = api.post(f"/v1/agents/{agent.id}/messages/async", {"input": "hello"})
        assert r.status_code == 200, r.content
        until(lambda rid=r.json()["id"]: Run.objects.get(id=rid).status == "completed", what="the queued run")
    for _ in range(rounds):  # a stream's replay reads on asgiref's threads
        raw = b"".join(
            api.client.post(f"/v1/agents/{agent.id}/messages/stream", {"input": "hi"}, content_type="application/json")
        )
        assert b"[DONE]" in raw or b"stop_reason" in raw
    step = Step.objects.filter(agent=agent).first()
    for _ in range(rounds // 2):  # replay on two models: a thread each
        r = api.post(f"/v1/steps/{step.id}/replay", {"models": ["openai/model-a", "openai/model-b"]})
        assert r.status_code == 200, r.content
    connections.close_all()
    until(lambda: _in_use() <= base, timeout=10, what=f"pooled connections back (in use {_in_use()}, was {base})")
