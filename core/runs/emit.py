"""Where a run's events go: the agent's channel group, which every open tab and the run's caller (an SSE
stream, core.runs.streaming) follow, with flags saying which events are the caller's."""

import logging
import time

from core.engine.stream import coalesce
from core.events import agent_group, send_events

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

    def __init__(self, agent_id: str, run_id: str, conversation_id: str | None = None):
        self.group = agent_group(agent_id)
        self.run_id = run_id
        self.conversation_id = conversation_id  # the run's thread: tabs showing another thread skip its events
        self._batch: list[dict] = []
        self._caller: list[bool] = []
        self._sent_at = 0.0

    def stream(self, chunk: dict) -> None:
        """Queue a token chunk (nothing committed backs it yet); sent now unless a send just went out."""
        self.emit(chunk, flush=time.monotonic() - self._sent_at >= self.STREAM_COALESCE_S)

    def emit(self, event: dict, *, to_caller: bool = True, flush: bool = True) -> None:
        """Queue one event (only once the data it shows has committed, token chunks aside); flush sends the
        queue out now."""
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
