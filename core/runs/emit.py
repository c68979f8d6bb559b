"""Where a run's events go: the agent's channel group, which every open tab and the run's caller (an SSE
stream, core.runs.streaming) follow, with flags saying which events are the caller's."""

import logging
import time

from django.core.cache import cache
from django.utils import timezone

from core.engine.stream import coalesce
from core.events import agent_group, group_listened, send_events

log = logging.getLogger(__name__)


class Emitter:
    """Sends a run's events to the agent's group; each batch carries the run id and, per event, whether the
    run's caller sees it (the caller gets the reply, tabs also get inputs, statuses and context updates).

    Events are delivered in batches (one channel-layer message per step): each hop to the channel
    layer costs far more than the events themselves.
    """

    # Token chunks go out at once when the last send is this old, else with the next one (or the step's end):
    # a model streaming 100 tokens/s costs a channel-layer send per ~20 ms, not per token.
    STREAM_COALESCE_S = 0.02
    # How often a streaming run looks whether a tab joined mid-reply and wants what was streamed so far.
    RESYNC_CHECK_S = 0.25

    def __init__(self, agent_id: str, run_id: str, conversation_id: str | None = None):
        self.group = agent_group(agent_id)
        self.run_id = run_id
        self.conversation_id = conversation_id  # the run's thread: tabs showing another thread skip its events
        self._batch: list[dict] = []
        self._caller: list[bool] = []
        self._sent_at = 0.0
        self._parts: dict[tuple[str, str], dict] = {}  # the model call's streamed parts so far, for a snapshot
        self._resync_at = 0.0

    def stream(self, chunk: dict) -> None:
        """Queue a token chunk (nothing committed backs it yet); sent now unless a send just went out. A tab that
        joined mid-reply (resync_request) gets, after it, a snapshot of every part streamed so far."""
        self._remember(chunk)
        now = time.monotonic()
        if now - self._resync_at >= self.RESYNC_CHECK_S:
            self._resync_at = now
            if cache.get(_resync_key(self.group)):
                cache.delete(_resync_key(self.group))
                self.emit(chunk, flush=False)
                self.emit(self._snapshot(), to_caller=False)
                return
        self.emit(chunk, flush=now - self._sent_at >= self.STREAM_COALESCE_S)

    def _remember(self, chunk: dict) -> None:
        kind = chunk.get("message_type", "")
        part = self._parts.setdefault((kind, chunk.get("id", "")), {"message_type": kind, "id": chunk.get("id", "")})
        for key in ("date", "step_id", "run_id"):
            part.setdefault(key, chunk.get(key))
        if kind in _TEXT_FIELDS:
            part["text"] = part.get("text", "") + (chunk.get(_TEXT_FIELDS[kind]) or "")
        elif isinstance(call := chunk.get("tool_call"), dict):
            part["name"] = part.get("name") or call.get("name") or ""
            part["arguments"] = part.get("arguments", "") + (call.get("arguments") or "")

    def _snapshot(self) -> dict:
        return {"message_type": "stream_snapshot", "run_id": self.run_id, "parts": list(self._parts.values())}

    def emit(self, event: dict, *, to_caller: bool = True, flush: bool = True) -> None:
        """Queue one event (only once the data it shows has committed, token chunks aside); flush sends the
        queue out now."""
        if not event.get("delta") and event.get("message_type") != "stream_snapshot":
            self._parts.clear()  # the model call ended: what it streamed is stored (or was dropped)
        self._batch.append(event)
        self._caller.append(to_caller)
        if flush:
            self.flush()

    def flush(self) -> None:
        if not self._batch:
            return
        batch, caller = coalesce(self._batch, self._caller)  # a batch's token chunks of one part go out as one
        self._batch, self._caller = [], []
        self._sent_at = time.monotonic()
        try:
            send_events(self.group, batch, run_id=self.run_id, caller=caller, conversation_id=self.conversation_id)
        except Exception:  # noqa: BLE001 - a broken channel layer must not break a run
            log.exception("could not send events to %s", self.group)


_TEXT_FIELDS = {"assistant_message": "content", "reasoning_message": "reasoning"}


def _resync_key(group: str) -> str:
    return "aide:resync:" + group


async def resync_request(agent_id: str) -> None:
    """A tab joined the agent (a reload, a second tab, a socket back): a reply streaming now sends it a snapshot of
    what it streamed so far (within Emitter.RESYNC_CHECK_S), so the tab shows the reply whole, not from mid-word.
    Through the cache, which several processes share when the channel layer is shared too."""
    await cache.aset(_resync_key(agent_group(agent_id)), 1, timeout=15)


def inputs_accepted(run) -> None:
    """Tell every tab of the agent the person's inputs a run was just given: a tab that did not send them shows
    them at once (the claim stored them; its first step puts them in the window)."""
    inputs = [
        {"content": m.get("text", ""), "otid": m.get("otid", "")}
        for m in run.input_messages or ()
        if m.get("role") == "user" and not m.get("kind")
    ]
    group = agent_group(run.agent_id)
    if not inputs or group_listened(group) is False:
        return
    event = {
        "message_type": "input_accepted",
        "run_id": run.id,
        "inputs": inputs,
        "date": timezone.now().isoformat(timespec="seconds"),
    }
    try:
        send_events(group, [event], run_id=run.id, caller=[False], conversation_id=run.conversation_id)
    except Exception:  # noqa: BLE001 - a broken channel layer must not refuse a send
        log.exception("could not announce the inputs of run %s", run.id)
