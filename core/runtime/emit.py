"""Where a run's events go: the caller's callback (SSE, REST collector) and the agent's channel group."""

import logging
from collections.abc import Callable

from core.events import agent_group, send_events

log = logging.getLogger(__name__)


class Emitter:
    """Sends events to every open tab on the agent and, unless group-only, to the run's caller.

    Events are delivered in batches (one channel-layer message per step): each hop to the channel
    layer costs far more than the events themselves.
    """

    def __init__(self, agent_id: str, on_event: Callable[[dict], None] | None = None):
        self.group = agent_group(agent_id)
        self.on_event = on_event
        self._batch: list[dict] = []

    def emit(self, event: dict, *, to_caller: bool = True, flush: bool = True) -> None:
        """Queue one event (only once the data it shows has committed); flush sends the queue out now."""
        self._batch.append(event)
        if to_caller and self.on_event is not None:
            self.on_event(event)
        if flush:
            self.flush()

    def flush(self) -> None:
        batch, self._batch = self._batch, []
        try:
            send_events(self.group, batch)
        except Exception:  # noqa: BLE001 - a broken channel layer must not break a run
            log.exception("could not send events to %s", self.group)
