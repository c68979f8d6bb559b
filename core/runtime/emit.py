"""Where a run's events go: the caller's callback (SSE, REST collector) and the agent's channel group."""

import logging
from collections.abc import Callable

from core.events import agent_group, send_event

log = logging.getLogger(__name__)


class Emitter:
    """Sends each event to every open tab on the agent and, unless it is group-only, to the run's caller."""

    def __init__(self, agent_id: str, on_event: Callable[[dict], None] | None = None):
        self.group = agent_group(agent_id)
        self.on_event = on_event

    def emit(self, event: dict, *, to_caller: bool = True) -> None:
        """Deliver one event (call only after the data it shows has committed)."""
        try:
            send_event(self.group, event)
        except Exception:  # noqa: BLE001 - a broken channel layer must not break a run
            log.exception("could not send event to %s", self.group)
        if to_caller and self.on_event is not None:
            self.on_event(event)
