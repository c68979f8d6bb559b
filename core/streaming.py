"""Running an agent in the background of an async server: SSE streams and websocket-started runs.

The run itself is the synchronous `run_agent`, executed in a worker thread; its events reach an
asyncio queue (SSE) and the agent's channel group. A client that disconnects does not stop the run.
"""

import asyncio
import json

from asgiref.sync import sync_to_async
from django.db import close_old_connections, connection

PING_SECONDS = 15.0
_DONE = object()
_tasks: set[asyncio.Task] = set()


def _run_in_thread(**kwargs):
    from core.runner import run_agent

    close_old_connections()
    try:
        return run_agent(**kwargs)
    finally:
        connection.close()


def run_in_background(*, run, owner, on_event=None) -> asyncio.Task:
    """Start a claimed run on a worker thread from async code; the task is kept alive until it ends."""
    task = asyncio.ensure_future(sync_to_async(_run_in_thread, thread_sensitive=False)(
        agent_id=run.agent_id, owner=owner, input_messages=run.input_messages, run=run, on_event=on_event))
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)
    return task


def sse_frame(event: dict) -> str:
    data = json.dumps(event, default=str, ensure_ascii=False)
    if event.get("message_type") == "error_message":
        return f"event: error\ndata: {data}\n\n"
    return f"data: {data}\n\n"


async def sse_events(*, run, owner, types: list[str] | None = None, include_pings: bool = True):
    """The SSE body of a run: one `data:` frame per event, pings while waiting, then `data: [DONE]`."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()

    def on_event(event: dict) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, event)

    task = run_in_background(run=run, owner=owner, on_event=on_event)
    task.add_done_callback(lambda _t: queue.put_nowait(_DONE))
    while True:
        try:
            event = await asyncio.wait_for(queue.get(), timeout=PING_SECONDS)
        except TimeoutError:
            if include_pings:
                yield sse_frame({"message_type": "ping"})
            continue
        if event is _DONE:
            break
        if types and event.get("message_type") not in (*types, "stop_reason", "usage_statistics", "error_message"):
            continue
        yield sse_frame(event)
    if task.exception() is not None:
        yield sse_frame({"message_type": "error_message", "message": "The run failed unexpectedly.",
                         "detail": str(task.exception())})
    yield "data: [DONE]\n\n"
