"""Run-pool threads keep their database connection from task to task, and Django's rules still retire a
connection a task left in a transaction; shutdown closes the kept ones."""

import threading

import pytest
from django.db import connection, connections

from core.models import Run
from core.runs import queue


@pytest.mark.django_db(transaction=True)
def test_a_pool_thread_keeps_a_healthy_connection_and_drops_one_left_in_a_transaction():
    seen = {}

    def task_thread():
        try:
            Run.objects.exists()  # a task used the database
            raw = connection.connection
            queue._connection_keep_or_drop()
            seen["kept"] = connection.connection is raw and raw in queue._pool_connections
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
    assert seen == {"kept": True, "reused": True, "dropped": True}


@pytest.mark.django_db(transaction=True)
def test_shutdown_closes_the_connections_pool_threads_kept():
    def task_thread():
        Run.objects.exists()
        queue._connection_keep_or_drop()

    t = threading.Thread(target=task_thread)
    t.start()
    t.join(30)
    kept = list(queue._pool_connections)
    assert kept
    queue._pool_connections_close()
    assert queue._pool_connections == set()
    for raw in kept:
        with pytest.raises(Exception):  # noqa: B017 - the driver's own "closed" error class
            raw.cursor().execute("SELECT 1")  # closed
