"""A run's output while it runs: a caller opens `streaming(key)` around a run, the backend hands what the tool
prints to `listener()`'s function as it arrives, and another request reads it with `read(key, since)`. Keys live
in this process only (as cancel.py's); a finished run's output is kept a little while for a late reader."""

from __future__ import annotations

import codecs
import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

KEEP_S = 60.0  # how long a finished run's output stays readable
MAX_CHARS = 256 * 1024  # per run; the sandbox caps what it keeps lower than this anyway


@dataclass
class LiveOutput:
    key: str
    parts: list[tuple[str, str]] = field(default_factory=list)  # (stream, text) in arrival order
    chars: int = 0
    done: bool = False
    finished_at: float = 0.0
    decoders: dict = field(default_factory=dict)

    def feed(self, stream: str, data: bytes) -> None:
        """Add bytes the tool wrote to `stream` (decoded incrementally: a character may span two reads)."""
        decoder = self.decoders.get(stream)
        if decoder is None:
            decoder = self.decoders[stream] = codecs.getincrementaldecoder("utf-8")(errors="replace")
        text = decoder.decode(data)
        with _lock:
            if text and self.chars < MAX_CHARS:
                text = text[: MAX_CHARS - self.chars]
                self.parts.append((stream, text))
                self.chars += len(text)


_lock = threading.Lock()
_open: dict[str, LiveOutput] = {}
_current: contextvars.ContextVar[LiveOutput | None] = contextvars.ContextVar("sandbox_live_output", default=None)


@contextmanager
def streaming(key: str) -> Iterator[LiveOutput]:
    """Make what runs started inside this block print readable by `read(key, …)` from any thread of this process."""
    state = LiveOutput(key)
    now = time.monotonic()
    with _lock:
        for old in [k for k, v in _open.items() if v.done and now - v.finished_at > KEEP_S]:
            del _open[old]
        _open[key] = state
    token = _current.set(state)
    try:
        yield state
    finally:
        _current.reset(token)
        with _lock:
            state.done, state.finished_at = True, time.monotonic()


def listener() -> Callable[[str, bytes], None] | None:
    """For a backend: where to hand the current run's output as it arrives (None when nobody follows it)."""
    state = _current.get()
    return state.feed if state is not None else None


def read(key: str, since: int = 0) -> tuple[list[tuple[str, str]], int, bool, bool]:
    """The output of the run under `key` after part `since`: (parts, the next `since`, finished, known here)."""
    with _lock:
        state = _open.get(key)
        if state is None:
            return [], since, False, False
        parts = state.parts[since:]
        return parts, since + len(parts), state.done, True
