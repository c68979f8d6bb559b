"""Realtime events to open IDE tabs (channel groups). Call after the transaction commits.

This module only transports: its callers compute what to send and to which groups (it reads no table).

Sends from sync code (run threads, workers): to the embedded layer they are handed to the server's loop; any other
layer's (Redis) go through one long-lived event loop per process (with `async_to_sync` each send would build a new
loop, and a new connection pool and connection).
"""

import asyncio
import threading

from channels.layers import get_channel_layer

from core.channel_layer import LocalChannelLayer

_server_loop: asyncio.AbstractEventLoop | None = None
_sender_loop: asyncio.AbstractEventLoop | None = None
_sender_lock = threading.Lock()
SEND_TIMEOUT_S = 10


def server_loop_remember() -> None:
    """Record the server's event loop (call from async code: a consumer's connect)."""
    global _server_loop
    _server_loop = asyncio.get_running_loop()


def sender_loop() -> asyncio.AbstractEventLoop:
    """This process's event loop for channel-layer sends from sync code (started once, on a daemon thread)."""
    global _sender_loop
    with _sender_lock:
        if _sender_loop is None or not _sender_loop.is_running():
            loop = asyncio.new_event_loop()
            started = threading.Event()
            loop.call_soon(started.set)
            threading.Thread(target=loop.run_forever, name="channel-sends", daemon=True).start()
            started.wait(SEND_TIMEOUT_S)
            _sender_loop = loop
        return _sender_loop


def _group_send(layer, group: str, message: dict) -> None:
    # The in-memory layer's queues belong to the server loop: a put from another loop does not wake a
    # waiting consumer, which then sees the event up to a second late. Hand it to the server loop.
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is not None:
        raise RuntimeError("send_event/send_events are for sync code; await asend_event in async code")
    if isinstance(layer, LocalChannelLayer):
        if not layer.listened(group):
            return  # no tab is listening in this process: nothing to deliver, no loop to wake
        server = _server_loop if _server_loop is not None and _server_loop.is_running() else None
        if server is not None:
            layer.group_send_soon(server, group, message)  # the run thread goes on at once, events in order
            return
        loop = sender_loop()
    else:
        loop = sender_loop()
    asyncio.run_coroutine_threadsafe(layer.group_send(group, message), loop).result(timeout=SEND_TIMEOUT_S)


def group_listened(group: str) -> bool | None:
    """Whether anyone in this process listens to the group (the embedded layer knows); None when the layer is
    shared between processes and the listeners may be elsewhere."""
    layer = get_channel_layer()
    if layer is None:
        return False
    if isinstance(layer, LocalChannelLayer):
        return layer.listened(group)
    return None


def agent_group(agent_id: str) -> str:
    """The channel group every tab showing this agent joins."""
    return f"agent.{agent_id}".replace("-", "_")


def send_event(group: str, event: dict) -> None:
    """Send one event dict to a channel group (the consumer forwards it to the browser as JSON)."""
    layer = get_channel_layer()
    if layer is not None:
        _group_send(layer, group, {"type": "agent.event", "event": event})


def send_events(group: str, events: list[dict], **extra) -> None:
    """Send several events to a group in one channel-layer message (tabs receive them one by one, in order);
    `extra` keys ride along for listeners other than tabs (a run's caller flags, core.runs.emit)."""
    layer = get_channel_layer()
    if layer is not None and events:
        _group_send(layer, group, {"type": "agent.event", "events": events, **extra})


async def asend_event(group: str, event: dict) -> None:
    layer = get_channel_layer()
    if layer is not None:
        await layer.group_send(group, {"type": "agent.event", "event": event})
