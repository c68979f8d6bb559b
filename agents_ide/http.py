"""Django's ASGI handler with pooled request threads.

Django runs each request's sync code (sync middleware steps, sync views, the ORM behind them) on a thread of its
own: a new thread per request, stopped when the request ends. Every request then also opened a new database
connection, and on SQLite parsed the schema again: that was most of the server's cost of a small API call. Here
an ASGI middleware around Django's own handler lends each request a single-thread executor from a pool
(asgiref's `ThreadSensitiveContext(executor=...)`, which Django's handler then uses), so threads, and with
`CONN_MAX_AGE` their connections, serve request after request. A request still has one thread to itself for its
whole life (asgiref's thread-sensitive contract); everything else, disconnects included, is Django's handler.
"""

import queue
import threading
from concurrent.futures import Executor, Future

from asgiref.sync import ThreadSensitiveContext
from django.core.asgi import get_asgi_application

IDLE_THREADS = 16  # threads kept between requests; a burst beyond it gets extra threads that end after


class RequestExecutor(Executor):
    """One thread running the calls submitted to it in order, and a count of those that have not ended.

    The thread is a daemon: when the server stops, its event loop is gone, so a request still on the thread can never
    answer — a pool's ordinary thread would hold the process open for it (for good, when the thread waits on that
    loop). Whatever the request was writing is one transaction, rolled back with the process."""

    def __init__(self):
        self.pending = 0
        self._count_lock = threading.Lock()
        self._calls: queue.SimpleQueue = queue.SimpleQueue()
        self._closed = False
        threading.Thread(target=self._work, name="request", daemon=True).start()

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        with self._count_lock:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self.pending += 1
        future.add_done_callback(self._ended)
        self._calls.put((future, fn, args, kwargs))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._count_lock:
            self._closed = True
        self._calls.put(None)  # the thread ends after the calls before it

    def _work(self) -> None:
        while (call := self._calls.get()) is not None:
            future, fn, args, kwargs = call
            call = None  # keep no reference to a finished call's arguments while waiting for the next
            if future.set_running_or_notify_cancel():
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:  # noqa: BLE001 — handed to the caller, as ThreadPoolExecutor does
                    future.set_exception(exc)
                else:
                    future.set_result(result)
            future = fn = args = kwargs = result = None

    def _ended(self, _future: Future) -> None:
        with self._count_lock:
            self.pending -= 1

    def when_idle(self, callback) -> None:
        """Call `callback(self)` once the thread has nothing left to do: now, or when its last call ends."""
        with self._count_lock:
            busy = self.pending > 0
        if not busy:
            callback(self)
            return
        # A request Django gave up on (the client left) may still be running its view on this thread; queue behind it.
        self.submit(lambda: None).add_done_callback(lambda _f: callback(self))


class ExecutorPool:
    """Idle request executors, most recently used first."""

    def __init__(self, keep: int):
        self.keep = keep
        self.idle: list[Executor] = []
        self.lock = threading.Lock()

    def take(self) -> Executor:
        with self.lock:
            if self.idle:
                return self.idle.pop()
        return RequestExecutor()

    def give(self, executor: Executor) -> None:
        with self.lock:
            if len(self.idle) < self.keep:
                self.idle.append(executor)
                return
        executor.shutdown(wait=False)


class PooledThreads:
    """ASGI middleware: each HTTP request's thread-sensitive work (all of a Django request's sync code) runs on a
    thread borrowed from a pool for the request's whole life, and given back once that thread is idle."""

    def __init__(self, app, *, idle_threads: int = IDLE_THREADS):
        self.app = app
        self.executors = ExecutorPool(idle_threads)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        executor = self.executors.take()
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.app(scope, receive, send)
        finally:
            if isinstance(executor, RequestExecutor):
                executor.when_idle(self.executors.give)
            else:
                self.executors.give(executor)


def http_application(*, idle_threads: int = IDLE_THREADS) -> PooledThreads:
    """django.core.asgi.get_asgi_application(), with pooled request threads."""
    return PooledThreads(get_asgi_application(), idle_threads=idle_threads)
