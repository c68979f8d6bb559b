"""The run queue's executor: a pool of threads claiming queued tasks, plus run leases.

Tasks are enqueued through django-tasks' API and stored by our backend (core/runs/task_backend.py) in our own table,
core.models.QueuedTask, which this module claims and ends with its own statements; the queue lives in the same
database as everything else: SQLite on the embedded default, PostgreSQL when scaled out. One process runs
one pool: the daphne process itself on the embedded default (started on the first enqueue), or each
`manage.py run_worker` process when RUNS_IN_WORKER is set. A pool executes up to RUN_WORKER_THREADS tasks
at once (`db_worker` runs one at a time, and runs spend their time waiting on the LLM, not the CPU).

Leases: a process renews `Run.heartbeat_at` of the runs it executes every RUN_LEASE_S/3 seconds; any
process's reaper marks runs whose lease lapsed as failed (their steps committed atomically, so the state
they leave is consistent) and fails their task rows.
"""

import logging
import threading
import traceback
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import timedelta
from functools import cache
from typing import Any

from django.conf import settings
from django.db import OperationalError, close_old_connections, connection, transaction
from django.dispatch import Signal
from django.utils import timezone
from django.utils.module_loading import import_string

from core import events
from core.agents import queries
from core.models import RUN_ACTIVE, QueuedTask, Run, RunStatus
from core.runs import liveness, waits
from core.telemetry import hooks as telemetry
from core.transactions import connection_lend
from memory.files import recovery

log = logging.getLogger(__name__)
WORKER_ID = liveness.IDENTITY
LOST = "worker lost: the process executing this run stopped (lease expired)"
GONE = "worker lost: the process executing this run died (it no longer exists)"
RUNS_CHANNEL = "agents_ide_runs"  # PostgreSQL NOTIFY channel: a task is ready for the workers
LISTENED_POLL_S = 1.0  # a listening worker's poll, for what no NOTIFY announces (tasks due later, lost notifies)

_leased: set[str] = set()
_leased_lock = threading.Lock()
_pool = None
_pool_lock = threading.Lock()
_lease_thread: threading.Thread | None = None
_lease_stop = threading.Event()
# Sent on every lease sweep (at start, then every RUN_LEASE_S/3); the layers above connect their periodic jobs to it
# in CoreConfig.ready (scheduled messages), so this module imports none of them.
swept = Signal()


# --------------------------------------------------------------------------- leases


@contextmanager
def lease(run_id: str, **fields):
    """Hold the lease of a queued run while this block executes it (renewed by this process's lease thread);
    `fields` are written in the same statement that takes the lease. Yields False (and holds nothing) if the
    run is no longer waiting to start: cancelled, reaped or taken by another process."""

    lease_thread_ensure()
    taken = queries.row_update(
        Run, where={"id": run_id, "status": RunStatus.CREATED}, worker=WORKER_ID, heartbeat_at=timezone.now(), **fields
    )
    if not taken:
        yield False
        return
    with lease_held(run_id):
        yield True


@contextmanager
def lease_held(run_id: str):
    """Renew the lease of a run this process already leased (its row names WORKER_ID) while the block runs."""
    lease_thread_ensure()
    with _leased_lock:
        _leased.add(run_id)
    try:
        yield
    finally:
        with _leased_lock:
            _leased.discard(run_id)


def leases_renew() -> int:
    """Push the heartbeat of every run this process executes; returns how many."""

    with _leased_lock:
        ids = list(_leased)
    if ids:
        Run.objects.filter(pk__in=ids, status__in=RUN_ACTIVE).update(heartbeat_at=timezone.now())
    return len(ids)


def lease_lapsed(run) -> bool:
    """Whether a leased run's process stopped renewing it (died or hung) for longer than RUN_LEASE_S."""
    return (
        bool(run.worker)
        and run.heartbeat_at is not None
        and (timezone.now() - run.heartbeat_at).total_seconds() > settings.RUN_LEASE_S
    )


def run_lost(run) -> str:
    """Why a leased run's process no longer executes it (the error to fail it with), or "" while it may: its process
    is known dead (core.runs.liveness: same machine and pid namespace), or its lease lapsed."""
    if run.worker and liveness.process_gone(run.worker):
        return GONE
    return LOST if lease_lapsed(run) else ""


def runs_reap(*, lease_s: float | None = None) -> list[str]:
    """Mark runs whose lease lapsed as failed (and queued runs whose task was lost: a process died between
    claiming the task and leasing the run), fail their task rows, and tell open tabs; returns their ids."""
    limit = timezone.now() - timedelta(seconds=lease_s if lease_s is not None else settings.RUN_LEASE_S)
    stale = list(
        Run.objects.filter(status__in=RUN_ACTIVE, heartbeat_at__lt=limit)
        .exclude(worker="")
        .values_list("id", "agent_id")
    )
    reaped = [
        (run_id, agent_id, LOST)
        for run_id, agent_id in stale
        if Run.objects.filter(pk=run_id, status__in=RUN_ACTIVE, heartbeat_at__lt=limit).update(
            status=RunStatus.FAILED, stop_reason="error", error=LOST, completed_at=timezone.now()
        )
    ]
    reaped += _dead_owners_reap()
    orphans = _orphaned_queued_runs(limit)
    reaped += [
        (run_id, agent_id, LOST)
        for run_id, agent_id in orphans
        if Run.objects.filter(pk=run_id, status=RunStatus.CREATED, worker="").update(
            status=RunStatus.FAILED, stop_reason="error", error=LOST, completed_at=timezone.now()
        )
    ]
    if not reaped:
        return []
    _tasks_fail([run_id for run_id, _, _ in reaped])
    log.warning("reaped runs whose process was lost: %s", [run_id for run_id, _, _ in reaped])
    for run_id, agent_id, error in reaped:
        try:
            events.send_event(
                events.agent_group(agent_id),
                {
                    "message_type": "run_status",
                    "run_id": run_id,
                    "status": "failed",
                    "stop_reason": "error",
                    "error": error,
                },
            )
        except Exception:  # noqa: BLE001 - tabs learn it on reload; the reaper must go on
            log.exception("could not announce reaped run %s", run_id)
    return [run_id for run_id, _, _ in reaped]


def _dead_owners_reap() -> list[tuple[str, str, str]]:
    """Fail the active runs leased by processes of this machine that no longer exist, whatever their lease says: a
    server restarted after a crash frees its agents at once. Runs leased elsewhere wait for their lease."""
    local = liveness.local_marker()
    if not local:
        return []
    held = Run.objects.filter(status__in=RUN_ACTIVE, worker__startswith=local).values_list("id", "agent_id", "worker")
    return [
        (run_id, agent_id, GONE)
        for run_id, agent_id, worker in list(held)
        if liveness.process_gone(worker)
        and Run.objects.filter(pk=run_id, status__in=RUN_ACTIVE, worker=worker).update(
            status=RunStatus.FAILED, stop_reason="error", error=GONE, completed_at=timezone.now()
        )
    ]


def _orphaned_queued_runs(limit) -> list[tuple[str, str]]:
    """Queued runs older than `limit` whose task is no longer waiting to be claimed, yet nobody leased them."""

    old = list(
        Run.objects.filter(status=RunStatus.CREATED, worker="", created_at__lt=limit).values_list("id", "agent_id")
    )
    if not old:
        return []
    tasks = QueuedTask.objects.filter(kwargs__has_key="run_id")
    ready = {kwargs.get("run_id") for kwargs in tasks.filter(status=QueuedTask.READY).values_list("kwargs", flat=True)}
    claimed_now = {
        kwargs.get("run_id")
        for kwargs in tasks.filter(status=QueuedTask.RUNNING, started_at__gte=limit).values_list("kwargs", flat=True)
    }
    return [(run_id, agent_id) for run_id, agent_id in old if run_id not in ready and run_id not in claimed_now]


def _tasks_fail(run_ids: list[str]) -> None:
    QueuedTask.objects.filter(status=QueuedTask.RUNNING, kwargs__run_id__in=run_ids).update(
        status=QueuedTask.FAILED, finished_at=timezone.now(), error=f"RuntimeError\n{LOST}"
    )


def _lease_loop() -> None:
    while True:  # sweep at once on start: runs of a process that died before this one started heal now
        try:
            close_old_connections()
            leases_renew()
            telemetry.lease_swept(reaped=len(runs_reap()))
            waits.expire_due()
            swept.send_robust(sender=None)  # its receivers' errors are logged by Django and must not stop the sweep
            recovery.files_sweep(lease_s=settings.RUN_LEASE_S)  # ingests of files a dead process left
        except Exception:  # noqa: BLE001 - the lease thread must outlive database hiccups
            log.exception("lease renewal failed")
        finally:
            connection.close()
        if _lease_stop.wait(max(0.5, settings.RUN_LEASE_S / 3)):
            return


def lease_thread_ensure() -> None:
    """Start this process's lease renewal + reaper thread once."""
    global _lease_thread
    with _pool_lock:
        if _lease_thread is None or not _lease_thread.is_alive():
            _lease_stop.clear()
            _lease_thread = threading.Thread(target=_lease_loop, name="run-leases", daemon=True)
            _lease_thread.start()


# --------------------------------------------------------------------------- the pool


_slot = threading.local()


@contextmanager
def waiting():
    """While a thread blocks on other runs (an agent waiting for another's reply), lend its slot to the pool, so
    the runs it waits for can start even when every slot is taken by waiting parents, and a pooled connection."""
    connection_lend()
    pool = getattr(_slot, "pool", None)
    if pool is None:
        yield
        return
    _slot.pool = None
    pool.slot_release()
    try:
        yield
    finally:
        pool.free.acquire()
        _slot.pool = pool


def slot_take():
    """A free slot of this process's pool for a run its caller executes on its own thread, or None (every slot
    taken, or RUNS_IN_WORKER: web processes execute no runs). Give it back with `slot_give`."""
    if settings.RUNS_IN_WORKER:
        return None
    pool = pool_start_in_process()
    if pool.stopping.is_set() or not pool.free.acquire(blocking=False):
        return None
    return pool


def slot_give(pool) -> None:
    pool.slot_release()


@contextmanager
def in_slot(pool):
    """Execute the block as a run of `pool` on the calling thread: it may lend the slot while it waits
    (`waiting`), and gives the slot back at the end."""
    _slot.pool = pool
    try:
        yield
    finally:
        _slot.pool = None
        pool.slot_release()


class Pool:
    """Claims ready tasks while it has free slots and runs them; `wake()` skips the poll wait.

    Slots bound the runs executing at once; a thread waiting on other runs lends its slot (`waiting`), so
    the pool has threads for the nested runs of agent-to-agent messages (at most MULTI_AGENT_MAX_DEPTH deep).
    A task this process enqueued while every slot was taken waits in `backlog` and starts in the next slot
    released; the dispatcher's claims (one statement each) are for tasks
    other processes enqueued, and for those left from before a restart.
    """

    def __init__(self, *, threads: int, poll_s: float):
        self.threads = threads
        self.poll_s = poll_s
        self.free = threading.Semaphore(threads)
        self.executor = ThreadPoolExecutor(
            max_workers=threads * (1 + settings.MULTI_AGENT_MAX_DEPTH), thread_name_prefix="run"
        )
        self.woken = threading.Event()
        self.stopping = threading.Event()
        self.dispatcher: threading.Thread | None = None
        self.backlog: deque = deque()
        self.backlog_lock = threading.Lock()
        self.listening = False  # woken by the web processes' NOTIFY (a worker on PostgreSQL): polls rarely

    def wake(self) -> None:
        self.woken.set()

    def submit(self, enqueued) -> None:
        """Start a task this process just enqueued (its TaskResult) on a free thread, which claims it by id;
        without a free thread, leave it to the dispatcher's next claim. Claims are conditional, so a task runs
        once."""
        if self.stopping.is_set():
            self.wake()
            return
        if not self.free.acquire(blocking=False):
            with self.backlog_lock:
                self.backlog.append(enqueued)
            self._backlog_start()  # a slot released since the acquire above found the backlog empty
            return
        self.executor.submit(self._execute, enqueued=enqueued)

    def slot_release(self) -> None:
        """Give a slot back; a task waiting in the backlog starts in it."""
        self.free.release()
        if self.backlog:
            self._backlog_start()

    def _backlog_start(self) -> None:
        while True:
            with self.backlog_lock:
                if not self.backlog or self.stopping.is_set() or not self.free.acquire(blocking=False):
                    return
                enqueued = self.backlog.popleft()
            self.executor.submit(self._execute, enqueued=enqueued)

    def stop(self) -> None:
        self.stopping.set()
        self.woken.set()

    def serve(self) -> None:
        """Dispatch until stopped (blocks the calling thread). Between claims the dispatcher holds no pooled
        connection, and it closes its own when it stops."""
        lease_thread_ensure()
        try:
            while not self.stopping.is_set():
                if not self.free.acquire(timeout=self.poll_s):
                    continue
                task = None
                try:
                    task = _claim()
                except Exception:  # noqa: BLE001 - keep dispatching through transient database errors
                    log.exception("could not claim a task")
                    connection.close()
                if task is None:
                    self.slot_release()
                    connection_lend()
                    self.woken.wait(max(self.poll_s, LISTENED_POLL_S) if self.listening else self.poll_s)
                    self.woken.clear()
                    continue
                self.executor.submit(self._execute, task)
        finally:
            connection.close()

    def listen(self) -> None:
        """Wake the dispatcher at each NOTIFY of RUNS_CHANNEL (PostgreSQL; a thread of a worker process): the web
        processes send one when they commit a task. Reconnects after errors; polls as before meanwhile."""
        import psycopg  # only PostgreSQL workers listen

        while not self.stopping.is_set():
            try:
                with psycopg.connect(**connection.get_connection_params(), autocommit=True) as listener:
                    listener.execute(f"LISTEN {RUNS_CHANNEL}")
                    self.listening = True
                    self.wake()  # a task committed while (re)connecting was not notified to us
                    while not self.stopping.is_set():
                        for _ in listener.notifies(timeout=1.0):
                            self.wake()
            except Exception:  # noqa: BLE001 - a lost listener connection: poll until it is back
                log.exception("listening for queued runs failed; polling every %s s", self.poll_s)
            finally:
                self.listening = False
            self.stopping.wait(1.0)

    def _execute(self, task=None, *, enqueued=None) -> None:
        try:
            with in_slot(self):
                if task is None:
                    task = _claim_enqueued(enqueued)
                if task is not None:
                    _task_run(task)
        except Exception:  # noqa: BLE001 - a failed claim leaves the task ready for the dispatcher
            log.exception("could not claim task %s", getattr(enqueued, "id", None))
        finally:
            _connection_keep_or_drop()


_pool_connections: set = set()
_pool_connections_lock = threading.Lock()


def _connection_keep_or_drop() -> None:
    """After a task: keep the pool thread's connection for its next task (opening one costs more than most
    queries of a step: SQLite re-reads the schema), unless Django's own rules retire it (broken, left in a
    transaction, or older than DB_CONN_MAX_AGE). Kept connections are remembered for shutdown."""
    raw = connection.connection
    if raw is None:
        return
    connection.close_if_unusable_or_obsolete()
    with _pool_connections_lock:
        if connection.connection is raw:
            _pool_connections.add(raw)
        else:
            _pool_connections.discard(raw)


def _pool_connections_close() -> None:
    # The pool's threads have ended; close the database connections they kept (tests drop databases next).
    with _pool_connections_lock:
        kept = list(_pool_connections)
        _pool_connections.clear()
    for raw in kept:
        with suppress(Exception):  # already closed or broken
            raw.close()


@dataclass(frozen=True, slots=True)
class Claimed:
    """A task this process claimed: its row's id, the django-tasks Task and what to call it with."""

    id: str
    task: Any
    args: list
    kwargs: dict


@cache
def _claim_sql(*, skip_locked: bool) -> str:
    table = f'"{QueuedTask._meta.db_table}"'
    pick = (
        f"SELECT id FROM {table} WHERE status = %s AND (run_after IS NULL OR run_after <= %s) "
        "ORDER BY priority DESC, enqueued_at LIMIT 1" + (" FOR UPDATE SKIP LOCKED" if skip_locked else "")
    )
    return f"UPDATE {table} SET status = %s, started_at = %s, worker_ids = %s WHERE id = ({pick}) RETURNING *"


def _claim() -> Claimed | None:
    """Claim the next due ready task (highest priority, then oldest) with one statement; None if there is none. On
    PostgreSQL it skips rows other claims hold; SQLite's write transaction (begun IMMEDIATE) admits one claim at a
    time."""
    now = timezone.now()
    field = QueuedTask._meta.get_field
    params = [
        QueuedTask.RUNNING,
        field("started_at").get_db_prep_value(now, connection),
        field("worker_ids").get_db_prep_save([WORKER_ID], connection),
        QueuedTask.READY,
        field("run_after").get_db_prep_value(now, connection),
    ]
    try:
        with transaction.atomic():
            row = next(
                iter(QueuedTask.objects.raw(_claim_sql(skip_locked=connection.vendor == "postgresql"), params)), None
            )
    except OperationalError as exc:
        if "locked" in str(exc).lower():
            return None
        raise
    if row is None:
        return None
    try:
        task = import_string(row.task_path)
    except ImportError as exc:  # a task of another version of the code: it cannot run here
        _task_failed(row.id, exc)
        return None
    return Claimed(row.id, task, row.args, row.kwargs)


def _claim_enqueued(enqueued) -> Claimed | None:
    """Claim a task this process enqueued (its TaskResult) with one conditional UPDATE; None if someone else
    claimed it first, or if it is not due yet (the dispatcher claims it then)."""
    run_after = enqueued.task.run_after
    now = timezone.now()
    if run_after is not None and run_after > now:
        return None
    ready = {"id": enqueued.id, "status": QueuedTask.READY}
    if not queries.row_update(
        QueuedTask, where=ready, status=QueuedTask.RUNNING, started_at=now, worker_ids=[WORKER_ID]
    ):
        return None
    return Claimed(enqueued.id, enqueued.task, list(enqueued.args), dict(enqueued.kwargs))


def _task_run(claimed: Claimed) -> None:
    """Call the task; record its end on its row (SUCCESSFUL with its return value, or FAILED with the error)."""
    try:
        log.info("task %s %s started", claimed.task.module_path, claimed.kwargs)
        value = claimed.task.call(*claimed.args, **claimed.kwargs)
        queries.row_update(
            QueuedTask,
            where={"id": claimed.id},
            status=QueuedTask.SUCCESSFUL,
            finished_at=timezone.now(),
            return_value=value,
        )
        log.info("task %s ended: %s", claimed.id, value)
    except BaseException as exc:  # noqa: BLE001 - record every failure on the task row
        log.exception("task %s failed", claimed.id)
        _task_failed(claimed.id, exc)


def _task_failed(task_id: str, exc: BaseException) -> None:
    kind = type(exc)
    error = f"{kind.__module__}.{kind.__qualname__}\n" + "".join(traceback.format_exception(exc))
    try:
        queries.row_update(
            QueuedTask, where={"id": task_id}, status=QueuedTask.FAILED, finished_at=timezone.now(), error=error[:20000]
        )
    except Exception:  # noqa: BLE001 - the database failed too: the reaper fails the task with its run
        log.exception("could not record the failure of task %s", task_id)


def pool_start_in_process() -> Pool:
    """Start this process's pool on a daemon thread (once); used by the embedded server on first enqueue."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = Pool(threads=settings.RUN_WORKER_THREADS, poll_s=max(settings.RUN_POLL_S, 1.0))
            _pool.dispatcher = threading.Thread(target=_pool.serve, name="run-dispatcher", daemon=True)
            _pool.dispatcher.start()
    return _pool


def start_with_server() -> None:
    """At server start: sweep and watch leases now (runs a dead process left heal without waiting for this one's
    first run), and on the embedded default start the pool, which also takes runs queued before a restart."""
    lease_thread_ensure()
    if not settings.RUNS_IN_WORKER:
        pool_start_in_process()


def shutdown(*, timeout: float = 30) -> None:
    """Stop this process's pool (waiting for its runs) and lease thread; tests call it before dropping databases."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
        lease_thread = _lease_thread
    if pool is not None:
        pool.stop()
        pool.executor.shutdown(wait=True)
        if pool.dispatcher is not None:
            pool.dispatcher.join(timeout)
        _pool_connections_close()
    _lease_stop.set()
    if lease_thread is not None:
        lease_thread.join(timeout)


def pool_serve_forever(*, threads: int, poll_s: float) -> None:
    """Run a pool on this thread (the `run_worker` command); on PostgreSQL it listens for the web processes'
    NOTIFY and polls only once a second at most."""
    global _pool
    _pool = Pool(threads=threads, poll_s=poll_s)
    if connection.vendor == "postgresql":
        threading.Thread(target=_pool.listen, name="run-listener", daemon=True).start()
    _pool.serve()


def woken_after_commit(enqueued=None) -> None:
    """After the current transaction commits, hand the enqueued task (its TaskResult) to the local pool
    (starting it if embedded) or make it look for tasks now. A process without a pool (a web process while
    RUNS_IN_WORKER) tells the worker processes instead: on PostgreSQL a NOTIFY, which the database delivers
    when the transaction commits (and drops if it rolls back); elsewhere they find the task on their next poll."""

    if settings.RUNS_IN_WORKER and _pool is None:
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(f"NOTIFY {RUNS_CHANNEL}")
        return

    def wake():
        pool = pool_start_in_process() if not settings.RUNS_IN_WORKER else _pool
        if pool is None:
            return
        if enqueued is not None:
            pool.submit(enqueued)
        else:
            pool.wake()

    transaction.on_commit(wake)
