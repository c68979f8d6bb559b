"""Following a run from async code: the SSE body of `POST …/messages/stream` (and `streaming: true`).

The run executes on the run pool (core.runs.executor), possibly in another process; the stream follows the
agent's channel group, where the runner's events carry the run id and which of them are the caller's.
The caller subscribes before its run is submitted (`subscribe`, from the view), so not even a token chunk the
run sends before the response starts streaming is missed; the stream then replays what the run already
committed (a run resumed or followed late), then forwards live events it has not sent yet, so nothing is lost
or doubled. With
`stream_tokens` the caller also gets the token chunks (`"delta": true`, core.engine.stream) and then not
the complete messages they spelled out; without it, chunks are skipped. While waiting it
sends pings and re-reads the run, so a run whose process died (failed by the lease reaper) ends the stream.
A background run's stream is recorded with seq_ids and can be resumed (see "record and resume" below).
"""

import asyncio
import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.utils import timezone

from core.agents.messages import (
    ASSISTANT_KWARG,
    ASSISTANT_TOOL,
    message_to_letta,
    stop_reason_message,
    usage_statistics,
)
from core.errors import DomainError
from core.events import agent_group, server_loop_remember
from core.models import RUN_TERMINAL, Message, Run, RunStatus
from core.runs.executor import run_reply

log = logging.getLogger(__name__)

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


async def _follow(run_id: str, channel, layer, *, replay: bool = True):
    """Yield the caller's events of the run: committed ones first (`replay`: the channel was subscribed after the run
    started), then live ones, until the run ends."""
    seen: set = set()
    if replay:
        run, committed = await _committed_read(run_id)
        for event in committed:
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
                if _key(event) not in seen:  # its stored message was replayed whole already: the chunks add nothing
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


@dataclass(frozen=True)
class Subscription:
    """A channel of its own in an agent's group: every event sent to the agent from now on waits in it."""

    layer: Any
    group: str
    channel: str

    async def close(self) -> None:
        await self.layer.group_discard(self.group, self.channel)


async def subscribe(agent_id: str) -> Subscription:
    """Follow the agent's events from now on: taken before a run is submitted, its caller misses none of them.
    (Given to `sse_events`, whose stream ends it; a stream that never starts leaves it to the group's expiry.)"""
    layer = get_channel_layer()
    server_loop_remember()
    channel = await layer.new_channel()
    group = agent_group(agent_id)
    await layer.group_add(group, channel)
    return Subscription(layer, group, channel)


subscribe_sync = async_to_sync(subscribe)


class _CallerView:
    """Which of a run's events its caller gets: the message types asked for (and the run's end, always); token
    chunks only with `stream_tokens`, and then not the complete message they already spelled out."""

    def __init__(self, types: list[str] | None, stream_tokens: bool, raw: bool = False):
        self.types, self.stream_tokens, self.streamed = types, stream_tokens, set()
        self.raw = raw  # use_assistant_message false: send_message's call and return instead of assistant_message

    def converts(self, event: dict) -> bool:
        return self.raw and event.get("message_type") == "assistant_message" and not event.get("delta")

    def raw_chunk(self, event: dict) -> dict | None:
        """With use_assistant_message false and stream_tokens, a token chunk of the reply as Letta streams it then:
        a tool_call_message chunk of send_message whose `arguments` are the next fragment of `{"message": "…"}`
        (the first opens the object, `raw_closing` closes it when the complete message comes)."""
        if not (self.raw and self.stream_tokens and event.get("delta")):
            return None
        if event.get("message_type") != "assistant_message" or (self.types and "tool_call_message" not in self.types):
            return None
        fragment = json.dumps(str(event.get("content") or ""), ensure_ascii=False)[1:-1]
        key = (event.get("id"), "tool_call_message")
        opening = key not in self.streamed
        self.streamed.add(key)
        return self._raw_call(event, ('{"' + ASSISTANT_KWARG + '": "' if opening else "") + fragment, opening)

    def raw_closing(self, event: dict) -> dict | None:
        """The fragment that closes the arguments a reply's raw chunks opened (None: none were sent)."""
        if (event.get("id"), "tool_call_message") not in self.streamed:
            return None
        return self._raw_call({**event, "delta": True}, '"}', False)

    @staticmethod
    def _raw_call(event: dict, arguments: str, opening: bool) -> dict:
        # Letta's ToolCallDelta in both fields (letta/interfaces/openai_streaming_interface.py): the stored call's id
        # is not known to a chunk of the reply's text
        call = {"name": ASSISTANT_TOOL, "arguments": arguments, "tool_call_id": None}
        chunk = {k: v for k, v in event.items() if k != "content"}
        return {**chunk, "message_type": "tool_call_message", "tool_call": call, "tool_calls": call}

    def shows(self, event: dict) -> bool:
        kind = event.get("message_type")
        if self.raw and kind == "assistant_message":
            return False  # its call and return go instead (_raw_parts)
        if self.types and kind not in (*self.types, *ALWAYS):
            return False
        if event.get("delta"):
            if self.stream_tokens:
                self.streamed.add(_key(event))
            return self.stream_tokens
        return _key(event) not in self.streamed


async def sse_events(
    *,
    run,
    types: list[str] | None = None,
    include_pings: bool = True,
    stream_tokens: bool = False,
    subscription: Subscription | None = None,
    use_assistant_message: bool = True,
):
    """The SSE body of a claimed run: one `data:` frame per event, pings while waiting, then `data: [DONE]`. A
    background run's events come from its record, numbered by `seq_id`, so the stream can be resumed.
    `subscription`: the one taken before the run was submitted (else one is taken now)."""
    view = _CallerView(types, stream_tokens, raw=not use_assistant_message)
    async for frame in _frames(_events(run, view, subscription), view, include_pings):
        yield frame


def _events(run, view: _CallerView, subscription: Subscription | None):
    if run.background:
        return _recorded(record_for(run, subscription), starting_after=0, view=view)
    return _followed(run.id, run.agent_id, subscription)


async def caller_events(
    *, run, types: list[str] | None = None, stream_tokens: bool = False, subscription: Subscription | None = None
):
    """The events of a claimed run its caller gets (as sse_events sends them, pings included), as dicts: for a body
    in another wire format (the OpenAI-compatible chat completions)."""
    view = _CallerView(types, stream_tokens)
    async for event in _events(run, view, subscription):
        if event.get("message_type") == "ping" or view.shows(event):
            yield event


async def _frames(events, view: _CallerView, include_pings: bool):
    async for event in events:
        if event.get("message_type") == "ping":
            if include_pings:
                yield sse_frame(event)
        elif view.converts(event):
            if closing := view.raw_closing(event):
                yield sse_frame(closing)
            for part in await _raw_parts(event):
                if view.shows(part):
                    yield sse_frame(part)
        elif chunk := view.raw_chunk(event):
            yield sse_frame(chunk)
        elif view.shows(event):
            yield sse_frame(event)
    yield "data: [DONE]\n\n"


def _raw_parts_sync(event: dict) -> list[dict]:
    """An assistant_message as a caller that asked for use_assistant_message false gets it, as Letta streams it then:
    the stored reply's send_message call (tool_call_message) and that call's return (tool_return_message)."""
    row = Message.objects.filter(pk=event.get("id")).first()
    if row is None:
        return []
    calls = [p for p in message_to_letta(row, use_assistant_message=False) if p["message_type"] == "tool_call_message"]
    calls = [p for p in calls if p["tool_call"]["name"] == ASSISTANT_TOOL]
    ids = [p["tool_call"]["tool_call_id"] for p in calls]
    returns = Message.objects.filter(agent_id=row.agent_id, role="tool", tool_call_id__in=ids).order_by("seq")
    return [*calls, *(p for r in returns for p in message_to_letta(r, use_assistant_message=False))]


_raw_parts = database_sync_to_async(_raw_parts_sync)


async def _followed(run_id: str, agent_id: str, subscription: Subscription | None = None):
    """The run's events for its caller, from its subscription: the one taken before the run was submitted holds every
    event of the run; one taken now starts with what the run committed before."""
    early = subscription is not None
    subscription = subscription or await subscribe(agent_id)
    try:
        async for event in _follow(run_id, subscription.channel, subscription.layer, replay=not early):
            yield event
    finally:
        await subscription.close()


# --------------------------------------------------------------------------- background runs: record and resume
#
# Letta keeps a background run's stream in Redis; here a recorder task follows the run independently of any caller
# (a caller's connection may drop; the recorder goes on until the run ends) and keeps what the caller would get,
# each event numbered (`seq_id`, from 1), in this process's memory: the embedded default's one process, or with
# several web processes the one that served the send. A resume (`POST /v1/runs/{id}/stream`) replays the record
# after `starting_after` and then follows it live. Without a record (another process, a restart, an expired one, a
# run queued by `…/messages/async`) a recorder is started then, from the run's committed messages.

EXPIRED_AFTER_S = 3 * 3600  # Letta's: a background run's stream is gone three hours after the run was created
RECORD_KEEP_S = EXPIRED_AFTER_S  # an ended record is kept as long
RECORDS_MAX = 256  # ended records kept at most; a running run's record is never dropped


class NotResumable(DomainError):
    status = 400


class Expired(DomainError):
    status = 410


class _Record:
    """One background run's events as its caller gets them, with their seq_ids: appended by its recorder, read by
    any number of streams, each on its own thread and event loop (hence a lock, and wake-ups on the reader's loop)."""

    def __init__(self, run_id: str):
        self.run_id = run_id
        self.events: list[dict] = []
        self.ended_at: float | None = None
        self.task: asyncio.Task | None = None
        self._lock = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    def append(self, event: dict) -> None:
        with self._lock:
            self.events.append({**event, "seq_id": len(self.events) + 1})
            waiters, self._waiters = self._waiters, []
        _wake(waiters)

    def end(self) -> None:
        with self._lock:
            self.ended_at = time.monotonic()
            waiters, self._waiters = self._waiters, []
        _wake(waiters)

    def read(self, start: int) -> tuple[list[dict], bool]:
        """The events after the first `start` ones, and whether the record is complete (then they are the last)."""
        with self._lock:
            return self.events[start:], self.ended_at is not None

    async def wait(self, start: int, timeout: float) -> bool:
        """Wait until there is an event past `start` or the record ends; False if `timeout` passed first."""
        loop, woken = asyncio.get_running_loop(), asyncio.Event()
        with self._lock:
            if len(self.events) > start or self.ended_at is not None:
                return True
            self._waiters.append((loop, woken))
        try:
            await asyncio.wait_for(woken.wait(), timeout)
            return True
        except TimeoutError:
            return False
        finally:
            with self._lock:
                if (loop, woken) in self._waiters:
                    self._waiters.remove((loop, woken))


def _wake(waiters) -> None:
    for loop, woken in waiters:
        if not loop.is_closed():
            loop.call_soon_threadsafe(woken.set)


_records: dict[str, _Record] = {}
_records_lock = threading.Lock()


def _records_prune() -> None:
    """Drop ended records past their keep, then the oldest ended ones beyond RECORDS_MAX (caller holds the lock)."""
    now = time.monotonic()
    ended = sorted((r.ended_at, run_id) for run_id, r in _records.items() if r.ended_at is not None)
    excess = max(0, len(ended) - RECORDS_MAX)
    for i, (ended_at, run_id) in enumerate(ended):
        if i < excess or now - ended_at > RECORD_KEEP_S:
            del _records[run_id]


def record_for(run, subscription: Subscription | None = None) -> _Record:
    """The run's record, started now (its recorder a task on this event loop, following `subscription` if given)
    if this process has none."""
    with _records_lock:
        _records_prune()
        record = _records.get(run.id)
        fresh = record is None
        if fresh:
            record = _records[run.id] = _Record(run.id)
    loop = asyncio.get_running_loop()
    if fresh:
        record.task = loop.create_task(_record(record, run.id, run.agent_id, subscription))
    elif subscription is not None:  # a recorder already follows the run: this caller's channel is not needed
        loop.create_task(subscription.close())
    return record


async def _record(record: _Record, run_id: str, agent_id: str, subscription: Subscription | None = None) -> None:
    """Follow the run to its end, keeping each event its caller would see (pings aside)."""
    try:
        async for event in _followed(run_id, agent_id, subscription):
            if event.get("message_type") != "ping":
                record.append(event)
    except Exception:  # noqa: BLE001 - a reader must still see the record end
        log.exception("recording run %s failed", run_id)
    finally:
        record.end()


async def _recorded(record: _Record, *, starting_after: int, view: _CallerView):
    """The record's events with seq_id past `starting_after`, as they come, until it ends; pings carry the last
    seq_id sent. `view` first sees the events before them, so chunks sent before a break still count as sent."""
    position = max(0, starting_after)
    for event in record.read(0)[0][:position]:
        view.shows(event)
    while True:
        events, ended = record.read(position)
        for event in events:
            yield event
        position += len(events)
        if ended:
            return
        if not await record.wait(position, PING_SECONDS):
            yield {"message_type": "ping", "seq_id": position or None, "run_id": record.run_id}


def run_resumable(run) -> None:
    """Raise why the run's stream cannot be resumed (Letta's errors): it was not a background run (400), or it is
    older than three hours (410)."""
    if not run.background:
        raise NotResumable("INVALID_ARGUMENT: Run was not created in background mode, so it cannot be retrieved.")
    if (timezone.now() - run.created_at).total_seconds() > EXPIRED_AFTER_S:
        raise Expired("EXPIRED: Run was created more than 3 hours ago, and is now expired.")


async def sse_resume(*, run, starting_after: int = 0, include_pings: bool = True):
    """The SSE body resuming a background run's stream after seq_id `starting_after` (Letta's retrieve-stream): the
    recorded events, then live ones, then `data: [DONE]`. Token chunks if the run's caller asked for them."""
    view = _CallerView(None, run.stream_tokens)
    async for frame in _frames(
        _recorded(record_for(run), starting_after=starting_after, view=view), view, include_pings
    ):
        yield frame
