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
            t = threading.Thread(target=lambda i=i: (events.send_event("agent.t1", {"n": i}), loops.append(events._sender_loop)))
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
