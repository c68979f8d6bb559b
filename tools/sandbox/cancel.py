"""Cancelling a run in progress: a caller opens `cancellable(key)` around a run and another request calls
`cancel(key)`; the backend running it registers how to stop it. Keys live in this process only."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class Cancellation:
    key: str
    cancelled: bool = False
    stop: Callable[[], None] | None = None


_lock = threading.Lock()
_open: dict[str, Cancellation] = {}
_current: contextvars.ContextVar[Cancellation | None] = contextvars.ContextVar("sandbox_cancellation", default=None)


@contextmanager
def cancellable(key: str) -> Iterator[Cancellation]:
    """Make runs started inside this block stoppable by `cancel(key)` (from any thread of this process)."""
    state = Cancellation(key)
    with _lock:
        _open[key] = state
    token = _current.set(state)
    try:
        yield state
    finally:
        _current.reset(token)
        with _lock:
            if _open.get(key) is state:
                del _open[key]


def register_stop(stop: Callable[[], None]) -> None:
    """Called by a backend once its run started: how to stop it. Stops at once if cancelled already."""
    state = _current.get()
    if state is None:
        return
    with _lock:
        state.stop = stop
        stop_now = state.cancelled
    if stop_now:
        stop()


def cancel(key: str) -> bool:
    """Stop the run opened under `key` (kills its processes); False if no such run is in progress here."""
    with _lock:
        state = _open.get(key)
        if state is None:
            return False
        state.cancelled = True
        stop = state.stop
    if stop is not None:
        stop()
    return True
