"""The shared channel layer over Redis: a send from sync code (a run thread) is one PUBLISH from that thread,
received by the layer's own subscribers in the order the thread sent, with no hop to an event loop."""

import asyncio
import threading

import pytest
import redis

from core import events
from core.channel_layer import RedisLayer
from tests.helpers import require_redis, until

REDIS_URL = "redis://127.0.0.1:6379/10"


@pytest.fixture
def layer():
    require_redis(REDIS_URL)
    return RedisLayer(hosts=[REDIS_URL])


def test_sync_sends_reach_the_layers_subscribers_in_order_without_an_event_loop(layer, monkeypatch):
    loop = asyncio.new_event_loop()  # the receiving side: a consumer's loop, as in a web process
    threading.Thread(target=loop.run_forever, daemon=True).start()

    def on_loop(coro):
        return asyncio.run_coroutine_threadsafe(coro, loop).result(10)

    try:
        member, other = on_loop(layer.new_channel()), on_loop(layer.new_channel())
        on_loop(layer.group_add("agent.r1", member))
        on_loop(layer.group_add("agent.r2", other))
        subscribed = redis.Redis.from_url(REDIS_URL)
        until(
            lambda: all(n for _, n in subscribed.pubsub_numsub("asgi__group__agent.r1", "asgi__group__agent.r2")),
            what="the layer's subscriptions",
        )
        monkeypatch.setattr(events, "get_channel_layer", lambda: layer)
        monkeypatch.setattr(events, "sender_loop", lambda: pytest.fail("a Redis send must not hop to a loop"))
        sent = threading.Thread(
            target=lambda: [events.send_events("agent.r1", [{"n": i}], run_id="r") for i in range(3)]
        )
        sent.start()
        sent.join(10)

        async def drain(channel, n):
            return [await asyncio.wait_for(layer.receive(channel), 5) for _ in range(n)]

        got = on_loop(drain(member, 3))
        assert [m["events"][0]["n"] for m in got] == [0, 1, 2] and {m["run_id"] for m in got} == {"r"}
        assert got[0]["type"] == "agent.event"
        with pytest.raises(TimeoutError):
            on_loop(asyncio.wait_for(layer.receive(other), 0.3))  # another group's member got nothing
    finally:
        on_loop(layer.flush())
        loop.call_soon_threadsafe(loop.stop)


def test_a_sync_send_to_an_unreachable_redis_raises():
    layer = RedisLayer(hosts=["redis://127.0.0.1:1/0"])
    with pytest.raises(redis.ConnectionError):
        layer.group_send_blocking("agent.r3", {"type": "agent.event", "event": {}})


def test_a_layer_over_several_redis_shards_sends_from_sync_code_through_the_event_loop(monkeypatch):
    layer = RedisLayer(hosts=["redis://127.0.0.1:6379/10", "redis://127.0.0.1:6379/11"])
    assert not layer.blocking_sends
    monkeypatch.setattr(layer, "group_send_blocking", lambda *a: pytest.fail("a sharded layer publishes on its loop"))
    handed = []

    class Sent:
        def result(self, timeout=None):
            return None

    def run_coroutine_threadsafe(coro, loop):
        handed.append(loop)
        coro.close()
        return Sent()

    monkeypatch.setattr(events.asyncio, "run_coroutine_threadsafe", run_coroutine_threadsafe)
    events._group_send(layer, "agent.r4", {"type": "agent.event", "event": {}})
    assert handed == [events.sender_loop()]
