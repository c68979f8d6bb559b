"""The embedded channel layer: group sends reach every member once, in order, without sweeping the whole
layer per send; capacity and expiry behave as in Channels' in-memory layer."""

import asyncio
import threading

import pytest
from channels.exceptions import ChannelFull

from core.channel_layer import LocalChannelLayer


def _run(coro):
    return asyncio.run(coro)


def test_group_send_reaches_each_member_in_order_and_not_other_groups():
    async def go():
        layer = LocalChannelLayer()
        a, b, c = [await layer.new_channel() for _ in range(3)]
        await layer.group_add("agent.one", a)
        await layer.group_add("agent.one", b)
        await layer.group_add("agent.two", c)
        for i in range(3):
            await layer.group_send("agent.one", {"type": "agent.event", "n": i})
        got_a = [(await layer.receive(a))["n"] for _ in range(3)]
        got_b = [(await layer.receive(b))["n"] for _ in range(3)]
        assert got_a == got_b == [0, 1, 2]
        assert c not in layer.channels  # nothing was queued for the other group
        await layer.group_discard("agent.one", b)
        await layer.group_send("agent.one", {"type": "agent.event", "n": 9})
        assert (await layer.receive(a))["n"] == 9
        assert b not in layer.channels

    _run(go())


def test_a_sent_message_is_a_copy_the_sender_can_no_longer_change():
    async def go():
        layer = LocalChannelLayer()
        ch = await layer.new_channel()
        await layer.group_add("g", ch)
        event = {"type": "agent.event", "events": [{"text": "before"}]}
        await layer.group_send("g", event)
        event["events"][0]["text"] = "after"
        assert (await layer.receive(ch))["events"][0]["text"] == "before"

    _run(go())


def test_full_channel_drops_group_messages_and_refuses_direct_sends():
    async def go():
        layer = LocalChannelLayer(capacity=2)
        ch = await layer.new_channel()
        await layer.group_add("g", ch)
        for i in range(5):
            await layer.group_send("g", {"type": "x", "n": i})  # no error: a slow tab loses events
        assert [(await layer.receive(ch))["n"] for _ in range(2)] == [0, 1]
        await layer.send(ch, {"type": "x", "n": 7})
        await layer.send(ch, {"type": "x", "n": 8})
        with pytest.raises(ChannelFull):
            await layer.send(ch, {"type": "x", "n": 9})

    _run(go())


def test_expired_messages_are_swept_at_most_once_per_interval():
    async def go():
        layer = LocalChannelLayer(expiry=0)
        stale = await layer.new_channel()
        await layer.group_add("g", stale)
        await layer.group_send("g", {"type": "x"})
        await asyncio.sleep(0.01)
        layer._swept_at = 0.0  # the interval has passed: the next send sweeps
        await layer.group_send("other", {"type": "x"})
        assert stale not in layer.channels and stale not in layer.groups.get("g", {})
        # Within the interval a send does not sweep again.
        fresh = await layer.new_channel()
        await layer.group_add("g", fresh)
        await layer.group_send("g", {"type": "x"})
        await asyncio.sleep(0.01)
        await layer.group_send("other", {"type": "x"})
        assert fresh in layer.channels

    _run(go())


def test_a_receiver_that_leaves_leaves_no_channel_behind():
    async def go():
        layer = LocalChannelLayer()
        ch = await layer.new_channel()
        waiting = asyncio.create_task(layer.receive(ch))
        await asyncio.sleep(0)
        assert ch in layer.channels
        waiting.cancel()  # a websocket closed while its consumer waited
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert ch not in layer.channels

    _run(go())


def test_a_message_sent_from_another_loop_wakes_the_receiver():
    async def go():
        layer = LocalChannelLayer()
        ch = await layer.new_channel()
        loop = asyncio.get_running_loop()
        sender = threading.Thread(target=lambda: asyncio.run(layer.send(ch, {"type": "x", "n": 1})))
        loop.call_later(0.05, sender.start)
        assert (await asyncio.wait_for(layer.receive(ch), 5))["n"] == 1
        sender.join(5)

    _run(go())
