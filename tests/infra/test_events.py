"""Channel-layer sends from sync code: one long-lived loop per process (no loop, or Redis connection, per
send), nothing sent when no tab of this process listens, and a clear error when misused from async code."""

import asyncio
import threading

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from core import events


def test_sends_from_several_threads_arrive_in_order_through_one_loop():
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)("agent.t1", channel)
    try:
        loops = []
        for i in range(3):
            t = threading.Thread(
                target=lambda i=i: (events.send_event("agent.t1", {"n": i}), loops.append(events._sender_loop))
            )
            t.start()
            t.join(10)
        assert len(loops) == 3 and len({id(loop) for loop in loops}) == 1 and loops[0].is_running()

        async def drain():
            return [(await layer.receive(channel))["event"]["n"] for _ in range(3)]

        assert asyncio.run_coroutine_threadsafe(drain(), loops[0]).result(10) == [0, 1, 2]
    finally:
        async_to_sync(layer.group_discard)("agent.t1", channel)


def test_nothing_is_sent_to_a_group_nobody_in_this_process_listens_to(monkeypatch):
    calls = []
    monkeypatch.setattr(events.asyncio, "run_coroutine_threadsafe", lambda *a, **k: calls.append(a))
    events.send_events("agent.nobody", [{"n": 1}])
    assert calls == []


def test_sync_send_from_async_code_is_refused():
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)("agent.t2", channel)

    async def misuse():
        events.send_event("agent.t2", {"n": 1})

    try:
        with pytest.raises(RuntimeError, match="asend_event"):
            asyncio.run(misuse())
    finally:
        async_to_sync(layer.group_discard)("agent.t2", channel)


def test_sends_to_a_listening_server_loop_are_copied_at_once_and_delivered_in_order(monkeypatch):
    layer = get_channel_layer()
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    try:
        asyncio.run_coroutine_threadsafe(_remember(), loop).result(10)
        assert events._server_loop is loop
        channel = asyncio.run_coroutine_threadsafe(layer.new_channel(), loop).result(10)
        asyncio.run_coroutine_threadsafe(layer.group_add("agent.t3", channel), loop).result(10)
        monkeypatch.setattr(
            events, "sender_loop", lambda: pytest.fail("a local tab's events must go to the server loop")
        )
        batch = [{"n": 0}]
        events.send_events("agent.t3", batch)
        batch[0]["n"] = 99  # the sender may reuse its data at once: what was sent is a copy
        events.send_event("agent.t3", {"n": 1})

        async def drain():
            first = await layer.receive(channel)
            second = await layer.receive(channel)
            return [first["events"][0]["n"], second["event"]["n"]]

        assert asyncio.run_coroutine_threadsafe(drain(), loop).result(10) == [0, 1]
    finally:
        monkeypatch.setattr(events, "_server_loop", None)
        loop.call_soon_threadsafe(loop.stop)


async def _remember():
    events.server_loop_remember()
