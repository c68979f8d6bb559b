"""The shared channel layer over Redis (channels-redis's pub/sub layer, as `redis_channel_layers` configures it): a
send from sync code (a run thread) goes through this process's one sender loop and reaches the layer's subscribers,
in another process or on another loop, in the order the thread sent; a send Redis refuses raises in the sender."""

import asyncio
import threading

import pytest
import redis
from channels.layers import get_channel_layer
from channels_redis.pubsub import RedisPubSubChannelLayer

from agents_ide.settings import redis_channel_layers
from core import events
from tests.helpers import redis_test_url, require_redis

REDIS_URL = redis_test_url("layer")


@pytest.fixture
def receiving_loop():
    """A consumer's loop, as in a web process: `on_loop(coro)` runs a coroutine there and returns its result."""
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()

    def on_loop(coro):
        return asyncio.run_coroutine_threadsafe(coro, loop).result(10)

    yield on_loop
    loop.call_soon_threadsafe(loop.stop)


def _layer(urls: list[str]) -> RedisPubSubChannelLayer:
    return RedisPubSubChannelLayer(**{**redis_channel_layers(urls[0])["default"]["CONFIG"], "hosts": urls})


def _joined(on_loop, layer, group: str) -> str:
    """A new channel in `group`, once a group send reaches it (the subscription is live)."""
    channel = on_loop(layer.new_channel())
    on_loop(layer.group_add(group, channel))

    async def probe():
        while True:
            await layer.group_send(group, {"type": "probe"})
            try:
                return await asyncio.wait_for(layer.receive(channel), 0.2)
            except TimeoutError:
                continue

    on_loop(asyncio.wait_for(probe(), 10))
    return channel


def _drain(on_loop, layer, channel, n: int) -> list[dict]:
    async def drain():
        got = []
        while len(got) < n:
            message = await asyncio.wait_for(layer.receive(channel), 5)
            if message["type"] != "probe":  # a late echo of the subscription probe
                got.append(message)
        return got

    return on_loop(drain())


def test_the_settings_configure_channels_redis_pub_sub_layer(settings):
    settings.CHANNEL_LAYERS = redis_channel_layers(REDIS_URL)  # Channels drops its layers when the setting changes
    assert type(get_channel_layer()) is RedisPubSubChannelLayer


def test_sync_sends_reach_the_layers_subscribers_in_order(receiving_loop, monkeypatch):
    require_redis(REDIS_URL)
    layer = _layer([REDIS_URL])
    try:
        member, other = _joined(receiving_loop, layer, "agent.r1"), _joined(receiving_loop, layer, "agent.r2")
        monkeypatch.setattr(events, "get_channel_layer", lambda: layer)
        sent = threading.Thread(
            target=lambda: [events.send_events("agent.r1", [{"n": i}], run_id="r") for i in range(3)]
        )
        sent.start()
        sent.join(10)
        got = _drain(receiving_loop, layer, member, 3)
        assert [m["events"][0]["n"] for m in got] == [0, 1, 2] and {m["run_id"] for m in got} == {"r"}
        assert got[0]["type"] == "agent.event"
        with pytest.raises(TimeoutError):
            receiving_loop(asyncio.wait_for(layer.receive(other), 0.3))  # another group's member got nothing
    finally:
        receiving_loop(layer.flush())


def test_a_sync_send_to_an_unreachable_redis_raises():
    layer = _layer(["redis://127.0.0.1:1/0"])
    with pytest.raises(redis.ConnectionError):
        events._group_send(layer, "agent.r3", {"type": "agent.event", "event": {}})


def test_a_layer_over_several_redis_shards_delivers_sync_sends(receiving_loop):
    require_redis(REDIS_URL)
    layer = _layer([REDIS_URL, redis_test_url("layer_shard")])
    try:
        members = {group: _joined(receiving_loop, layer, group) for group in ("agent.r4", "agent.r5", "agent.r6")}
        for group in members:
            events._group_send(layer, group, {"type": "agent.event", "event": {"group": group}})
        for group, channel in members.items():
            assert _drain(receiving_loop, layer, channel, 1)[0]["event"] == {"group": group}
    finally:
        receiving_loop(layer.flush())
