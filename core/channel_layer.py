"""The channel layers: the embedded default's (Channels' in-memory layer with sends that cost O(group members)),
and the one processes share over Redis (channels-redis's pub/sub layer with a cheaper send from sync code).

Channels' `InMemoryChannelLayer` sweeps every channel and every group for expired entries on each send and
receive, and deep-copies each message per receiver. With a few dozen open tabs and runs emitting a batch
per step, that sweep was the single largest cost of the server process under load (10% of its CPU). Here
the sweep runs at most once a second, and a message is copied once per group send (receivers only read).
Delivery semantics are the parent's: per-channel capacity, message expiry, group expiry.
"""

import asyncio
import copy
import threading
import time

import redis
from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer
from channels_redis.pubsub import RedisPubSubChannelLayer
from channels_redis.utils import decode_hosts


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


class RedisLayer(RedisPubSubChannelLayer):
    """channels-redis's pub/sub layer (what processes share over Redis), plus a send for sync code.

    A run thread's send used to hop to an event loop on another thread and wait there for the PUBLISH: two thread
    hand-offs per send, more CPU than the PUBLISH itself (about 210 against 95 µs per send here, idle). Here the
    calling thread publishes on a blocking connection of its own pool: the same message, serialized the same way,
    to the channel the layer's groups subscribe to, so every receiver is the layer's own (a thread's sends arrive
    in the order it made them). Receiving is the parent's, unchanged.
    """

    def __init__(self, *args, hosts=None, prefix: str = "asgi", **kwargs):
        super().__init__(*args, hosts=hosts, prefix=prefix, **kwargs)
        self._prefix = prefix
        self._hosts = decode_hosts(hosts)
        # One Redis URL (what redis_channel_layers configures): sync code publishes itself. Several shards, or a
        # host given as anything but a URL, and sync sends take the parent's async path (core.events).
        self.blocking_sends = len(self._hosts) == 1 and "address" in self._hosts[0]
        self._blocking = None
        self._blocking_lock = threading.Lock()

    def group_send_blocking(self, group: str, message: dict) -> None:
        """Publish `message` to `group` from sync code; returns once Redis has it (raises if it cannot). Only for a
        layer with `blocking_sends`."""
        assert isinstance(message, dict), "message is not a dict"
        self._blocking_client().publish(f"{self._prefix}__group__{group}", self.serialize(message))

    def _blocking_client(self):
        if self._blocking is None:
            with self._blocking_lock:
                if self._blocking is None:
                    host = dict(self._hosts[0])
                    self._blocking = redis.Redis.from_url(host.pop("address"), **host)
        return self._blocking
