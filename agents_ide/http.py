"""Django's ASGI handler with pooled request threads.

Django runs each request's sync code (sync middleware steps, sync views, the ORM behind them) on a thread
of its own: a new thread per request, stopped when the request ends. Every request then also opened a new
database connection, and on SQLite parsed the schema again: that was most of the server's cost of a small
API call. Here a request borrows a single-thread executor from a pool and gives it back when it ends, so
threads, and with `CONN_MAX_AGE` their connections, serve request after request. A request still has
one thread to itself for its whole life (asgiref's thread-sensitive contract).
"""

import asyncio
import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor

import django
from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.http import FileResponse
from django.urls import set_script_prefix

IDLE_THREADS = 16  # threads kept between requests; a burst beyond it gets extra threads that end after


class _ExecutorPool:
    def __init__(self, keep: int):
        self.keep = keep
        self.idle: list[ThreadPoolExecutor] = []
        self.lock = threading.Lock()

    def take(self) -> ThreadPoolExecutor:
        with self.lock:
            if self.idle:
                return self.idle.pop()
        return ThreadPoolExecutor(max_workers=1, thread_name_prefix="request")

    def give(self, executor: ThreadPoolExecutor) -> None:
        with self.lock:
            if len(self.idle) < self.keep:
                self.idle.append(executor)
                return
        executor.shutdown(wait=False)


class PooledASGIHandler(ASGIHandler):
    def __init__(self, *, idle_threads: int = IDLE_THREADS):
        super().__init__()
        # The middleware chain runs synchronously, with the view, in one hop to the request's thread. Built for an
        # async handler, Django's own middleware (sessions, CSRF, auth, messages, ...) hands each of its hooks to
        # that thread and back: about fifteen hops a request, each a wake-up of the event loop and of the thread.
        self.load_middleware(is_async=False)
        self.executors = _ExecutorPool(idle_threads)

    async def get_response_async(self, request):
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)

    async def handle(self, scope, receive, send):
        """Django's `handle` in one hop to the request's thread where Django takes three: `request_started`'s
        receivers, the request, the middleware chain and the view, and (for a response whose body is all there)
        its close with `request_finished`'s receivers run there together; each hop is a wake-up of the thread and
        of the event loop (about 0.1 ms of CPU on this kind of machine). A streamed response is sent while a
        client's disconnect is watched for, and closed afterwards, as Django does."""
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        response = await sync_to_async(self._respond, thread_sensitive=True)(scope, body_file)
        if not response.streaming:
            await self.send_response(response, send)
            return
        tasks = [
            asyncio.create_task(self.listen_for_disconnect(receive)),
            asyncio.create_task(self.send_response(response, send)),
        ]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in tasks:
                if not task.done():
                    task.cancel()  # the client left: stop sending (or sending ended: stop listening)
                with contextlib.suppress(asyncio.CancelledError, RequestAborted):  # how each of them ends
                    await task
        finally:
            await sync_to_async(response.close, thread_sensitive=True)()
            body_file.close()

    def _respond(self, scope, body_file):
        """The request's work on its thread: the response, closed already unless it is streamed."""
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, response = self.create_request(scope, body_file)
        if request is not None:
            response = self.get_response(request)
            response._handler_class = self.__class__
            if isinstance(response, FileResponse):
                response.block_size = self.chunk_size  # the ASGI server chunks it
        if not response.streaming:
            body_file.close()
            response.close()  # its body is in memory: resources and request_finished's receivers now, not after
        return response

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        executor = self.executors.take()
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            self.executors.give(executor)


def http_application() -> PooledASGIHandler:
    """Like django.core.asgi.get_asgi_application, with pooled request threads."""
    django.setup(set_prefix=False)
    return PooledASGIHandler()
