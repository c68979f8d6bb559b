"""Following a run from async code: the SSE body of `POST …/messages/stream` (and `streaming: true`).

The run executes on the run pool (core.runs.executor), possibly in another process; the stream follows the
agent's channel group, where the runner's events carry the run id and which of them are the caller's.
It subscribes first, then replays what the run already committed (its events went out before we
listened), then forwards live events it has not sent yet, so nothing is lost or doubled. With
`stream_tokens` the caller also gets the token chunks (`"delta": true`, core.engine.stream) and then not
the complete messages they spelled out; without it, chunks are skipped. While waiting it
sends pings and re-reads the run, so a run whose process died (failed by the lease reaper) ends the stream.
"""

import asyncio
import json

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from core.agents.messages import stop_reason_message, usage_statistics
from core.events import agent_group, server_loop_remember
from core.models import RUN_TERMINAL, Run, RunStatus
from core.runs.executor import run_reply

PING_SECONDS = 15.0
ALWAYS = ("stop_reason", "usage_statistics", "error_message")


def sse_frame(event: dict) -> str:
    data = json.dumps(event, default=str, ensure_ascii=False)
    if event.get("message_type") == "error_message":
        return f"event: error\ndata: {data}\n\n"
    return f"data: {data}\n\n"


def _key(event: dict):
    return (event.get("id"), event.get("message_type")) if event.get("id") else None


def _committed(run_id: str):
    """The run's row and the caller's messages it committed so far (one read, outside the event loop)."""

    run = Run.objects.get(pk=run_id)
    return run, run_reply(run=run)


# On one of asgiref's threads rather than Django's one sync thread (streams must not queue behind each other's
# reads), with that thread's database connection tidied after (a pooled one goes back to the pool).
_committed_read = database_sync_to_async(_committed, thread_sensitive=False)


def _ending(run) -> list[dict]:
    """The closing events of a run that ended without us seeing its own (it ended before we listened, or
    its process died and the reaper failed it)."""

    out = []
    if run.status == RunStatus.FAILED and run.error:
        out.append(
            {
                "message_type": "error_message",
                "run_id": run.id,
                "error_type": "run_failed",
                "message": run.error,
                "detail": None,
            }
        )
    out.append(stop_reason_message(run.stop_reason or "error"))
    out.append(usage_statistics({**(run.usage or {}), "run_ids": [run.id]}))
    return out


async def _follow(run_id: str, channel, layer):
    """Yield the caller's events of the run: committed ones first, then live ones, until the run ends."""
    seen: set = set()
    run, replay = await _committed_read(run_id)
    for event in replay:
        seen.add(_key(event))
        yield event
    if run.status in RUN_TERMINAL:
        for event in _ending(run):
            yield event
        return
    while True:
        try:
            message = await asyncio.wait_for(layer.receive(channel), timeout=PING_SECONDS)
        except TimeoutError:
            yield {"message_type": "ping"}
            run, replay = await _committed_read(run_id)
            if run.status in RUN_TERMINAL:  # its closing events never reached us
                for event in [e for e in replay if _key(e) not in seen] + _ending(run):
                    yield event
                return
            continue
        events = message.get("events") or [message.get("event") or {}]
        flags = message.get("caller") or [True] * len(events)
        mine = message.get("run_id") == run_id
        ended = None
        for event, for_caller in zip(events, flags, strict=False):
            if (
                event.get("message_type") == "run_status"
                and event.get("run_id") == run_id
                and event.get("status") in RUN_TERMINAL
            ):
                ended = event
            elif mine and for_caller and event.get("delta"):
                yield event
            elif mine and for_caller and (key := _key(event)) not in seen:
                if key is not None:
                    seen.add(key)
                yield event
        if ended is not None:
            if not mine:  # announced by the reaper, not the run: close the stream from the stored row
                run, _ = await _committed_read(run_id)
                for event in _ending(run):
                    yield event
            return


async def sse_events(*, run, types: list[str] | None = None, include_pings: bool = True, stream_tokens: bool = False):
    """The SSE body of a claimed run: one `data:` frame per event, pings while waiting, then `data: [DONE]`."""
    streamed: set = set()
    layer = get_channel_layer()
    server_loop_remember()
    channel = await layer.new_channel()
    group = agent_group(run.agent_id)
    await layer.group_add(group, channel)
    try:
        async for event in _follow(run.id, channel, layer):
            kind = event.get("message_type")
            if kind == "ping":
                if include_pings:
                    yield sse_frame(event)
                continue
            if types and kind not in (*types, *ALWAYS):
                continue
            if event.get("delta"):
                if not stream_tokens:
                    continue
                streamed.add(_key(event))
            elif _key(event) in streamed:
                continue  # its chunks already spelled it out
            yield sse_frame(event)
    finally:
        await layer.group_discard(group, channel)
    yield "data: [DONE]\n\n"
