"""The embedded channel layer: Channels' layer interface in one process, with sends that cost O(group members).

Channels' `InMemoryChannelLayer` sweeps every channel and every group for expired entries on each send and receive,
and deep-copies each message per receiver. With a few dozen open tabs and runs emitting a batch per step, that sweep
was the single largest cost of the server process under load (10% of its CPU). This layer is our own
implementation of the same interface (`channels.layers.BaseChannelLayer`'s methods, the groups and flush
extensions) and the same delivery semantics (per-channel capacity, message expiry, group expiry), but it sweeps at
most once a second and copies a message once per group send (receivers only read it). Processes that share a layer
use channels-redis's pub/sub layer instead (`agents_ide.settings.redis_channel_layers`).
"""

import asyncio
import copy
import time
import uuid
from collections import deque

from channels.exceptions import ChannelFull
from channels.layers import BaseChannelLayer


class _Inbox:
    """One channel's messages, oldest first, as (expires_at, message), and the receivers waiting for one."""

    __slots__ = ("capacity", "messages", "waiters")

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.messages: deque[tuple[float, dict]] = deque()
        self.waiters: deque[asyncio.Future] = deque()

    def put(self, channel: str, expires_at: float, message: dict) -> None:
        if len(self.messages) >= self.capacity:
            raise ChannelFull(channel)
        self.messages.append((expires_at, message))
        self.wake_one()

    def wake_one(self) -> None:
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                _wake(waiter)
                return


def _wake(waiter: asyncio.Future) -> None:
    """Resolve a receiver's future on its own loop (a test may send from another loop than the one receiving)."""
    loop = waiter.get_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        waiter.set_result(None)
    else:
        loop.call_soon_threadsafe(lambda: waiter.done() or waiter.set_result(None))


class LocalChannelLayer(BaseChannelLayer):
    """Channels and groups of this process, in memory."""

    extensions = ["groups", "flush"]
    sweep_interval_s = 1.0

    def __init__(self, expiry=60, group_expiry=86400, capacity=100, channel_capacity=None, **kwargs):
        super().__init__(expiry=expiry, capacity=capacity, channel_capacity=channel_capacity, **kwargs)
        self.group_expiry = group_expiry
        self.channels: dict[str, _Inbox] = {}
        self.groups: dict[str, dict[str, float]] = {}  # group -> {channel: joined at}
        self._swept_at = 0.0

    # ------------------------------------------------------------------ channels

    async def new_channel(self, prefix: str = "specific.") -> str:
        return f"{prefix}.inmemory!{uuid.uuid4().hex}"

    async def send(self, channel: str, message: dict) -> None:
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_channel_name(channel)
        assert "__asgi_channel__" not in message
        self._put(channel, copy.deepcopy(message))

    async def receive(self, channel: str) -> dict:
        """The channel's next message, waiting for one if there is none."""
        self.require_valid_channel_name(channel)
        self._sweep()
        while True:
            inbox = self._inbox(channel)
            if inbox.messages:
                _, message = inbox.messages.popleft()
                if inbox.messages:
                    inbox.wake_one()  # another receiver of the channel may be waiting too
                elif not inbox.waiters:
                    self.channels.pop(channel, None)
                return message
            waiter = asyncio.get_running_loop().create_future()
            inbox.waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in inbox.waiters:
                    inbox.waiters.remove(waiter)
                if not inbox.messages and not inbox.waiters and self.channels.get(channel) is inbox:
                    self.channels.pop(channel, None)  # a receiver that left (cancelled) leaves nothing behind

    def _inbox(self, channel: str) -> _Inbox:
        inbox = self.channels.get(channel)
        if inbox is None:
            inbox = self.channels[channel] = _Inbox(self.get_capacity(channel))
        return inbox

    def _put(self, channel: str, message: dict) -> None:
        self._inbox(channel).put(channel, time.monotonic() + self.expiry, message)

    # ------------------------------------------------------------------ groups

    async def group_add(self, group: str, channel: str) -> None:
        self.require_valid_group_name(group)
        self.require_valid_channel_name(channel)
        self.groups.setdefault(group, {})[channel] = time.monotonic()

    async def group_discard(self, group: str, channel: str) -> None:
        self.require_valid_channel_name(channel)
        self.require_valid_group_name(group)
        members = self.groups.get(group)
        if members:
            members.pop(channel, None)
            if not members:
                self.groups.pop(group, None)

    async def group_send(self, group: str, message: dict) -> None:
        self._group_put(group, self._frozen(group, message))

    def group_send_soon(self, loop: asyncio.AbstractEventLoop, group: str, message: dict) -> None:
        """From another thread: copy the message now and deliver it on `loop` (the loop the consumers
        receive on) without waiting; a thread's sends are delivered in the order it made them."""
        loop.call_soon_threadsafe(self._group_put, group, self._frozen(group, message))

    def listened(self, group: str) -> bool:
        """Whether a channel of this process is in the group."""
        return bool(self.groups.get(group))

    def _frozen(self, group: str, message: dict) -> dict:
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_group_name(group)
        return copy.deepcopy(message)  # one copy shared by the group's receivers, which only read it

    def _group_put(self, group: str, message: dict) -> None:
        self._sweep()
        for channel in list(self.groups.get(group) or ()):
            try:
                self._put(channel, message)
            except ChannelFull:
                pass  # a tab that stopped reading loses events, as with Channels' in-memory layer

    # ------------------------------------------------------------------ expiry and flush

    def _sweep(self) -> None:
        """Drop expired messages (a channel that had one leaves its groups: its reader is gone) and expired group
        memberships; at most once per `sweep_interval_s`."""
        now = time.monotonic()
        if now - self._swept_at < self.sweep_interval_s:
            return
        self._swept_at = now
        for channel, inbox in list(self.channels.items()):
            expired = False
            while inbox.messages and inbox.messages[0][0] < now:
                inbox.messages.popleft()
                expired = True
            if expired:
                for members in self.groups.values():
                    members.pop(channel, None)
                if not inbox.messages and not inbox.waiters:
                    self.channels.pop(channel, None)
        joined_before = now - self.group_expiry
        for group, members in list(self.groups.items()):
            for channel, joined in list(members.items()):
                if joined < joined_before:
                    members.pop(channel, None)
            if not members:
                self.groups.pop(group, None)

    async def flush(self) -> None:
        self.channels = {}
        self.groups = {}

    async def close(self) -> None:
        pass
