"""The embedded default's channel layer: Channels' in-memory layer with sends that cost O(group members).

Channels' `InMemoryChannelLayer` sweeps every channel and every group for expired entries on each send and
receive, and deep-copies each message per receiver. With a few dozen open tabs and runs emitting a batch
per step, that sweep was the single largest cost of the server process under load (10% of its CPU). Here
the sweep runs at most once a second, and a message is copied once per group send (receivers only read).
Delivery semantics are the parent's: per-channel capacity, message expiry, group expiry.
"""

import asyncio
import copy
import time

from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer


class LocalChannelLayer(InMemoryChannelLayer):
    sweep_interval_s = 1.0

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._swept_at = 0.0

    def _clean_expired(self):
        now = time.monotonic()
        if now - self._swept_at >= self.sweep_interval_s:
            self._swept_at = now
            super()._clean_expired()

    def _put(self, channel: str, message: dict) -> None:
        queue = self.channels.get(channel)
        if queue is None:
            queue = self.channels[channel] = asyncio.Queue(maxsize=self.get_capacity(channel))
        try:
            queue.put_nowait((time.time() + self.expiry, message))
        except asyncio.QueueFull:
            raise ChannelFull(channel) from None

    async def send(self, channel, message):
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_channel_name(channel)
        assert "__asgi_channel__" not in message
        self._put(channel, copy.deepcopy(message))

    async def group_send(self, group, message):
        self._group_put(group, self._frozen(group, message))

    def group_send_soon(self, loop: asyncio.AbstractEventLoop, group: str, message: dict) -> None:
        """From another thread: copy the message now and deliver it on `loop` (the loop the consumers
        receive on) without waiting; a thread's sends are delivered in the order it made them."""
        loop.call_soon_threadsafe(self._group_put, group, self._frozen(group, message))

    def _frozen(self, group: str, message: dict) -> dict:
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_group_name(group)
        return copy.deepcopy(message)  # one copy shared by the group's receivers, which only read it

    def _group_put(self, group: str, message: dict) -> None:
        self._clean_expired()
        for channel in list(self.groups.get(group) or ()):
            try:
                self._put(channel, message)
            except ChannelFull:
                pass  # a tab that stopped reading loses events, as with the parent layer
