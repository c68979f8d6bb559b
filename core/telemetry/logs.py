"""Structured logs: the ids of what a thread is doing (request, run, step, agent) ride in a context variable and
are added to every log record; `JsonFormatter` writes one JSON object per line (LOG_FORMAT=json)."""

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime

IDS = ("request_id", "user", "run_id", "step_id", "agent_id", "trace_id")
_NONE: dict = {}  # never changed: `bound` and `bind` set new dicts
_ids: ContextVar[dict] = ContextVar("telemetry_ids", default=_NONE)
# The attributes every LogRecord has: anything else on a record came from `extra=` and is logged as a field.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime", *IDS}


_request: ContextVar[object | None] = ContextVar("telemetry_request", default=None)


def request_user() -> str:
    """The user the current request authenticated as through the API (a token's owner, or a session), else ""."""
    principal = getattr(_request.get(), "principal", None)
    return principal.user.get_username() if principal is not None else ""


def ids() -> dict:
    """The ids bound on this thread (or task) now."""
    return _ids.get()


@contextmanager
def bound(**values: str | None) -> Iterator[None]:
    """Add ids to the log records made inside the block (ids set to None or "" are left out)."""
    token = _ids.set({**_ids.get(), **{k: v for k, v in values.items() if v}})
    try:
        yield
    finally:
        _ids.reset(token)


@contextmanager
def request_bound(request, request_id: str) -> Iterator[None]:
    """The request being answered on this thread, and its id in the logs."""
    token = _request.set(request)
    try:
        with bound(request_id=request_id):
            yield
    finally:
        _request.reset(token)


def bind(**values: str | None) -> None:
    """Add ids until the enclosing `bound` block ends (the step's id, learnt inside its block)."""
    _ids.set({**_ids.get(), **{k: v for k, v in values.items() if v}})


class ContextFilter(logging.Filter):
    """Copies the bound ids onto each record (as attributes, for any formatter)."""

    def filter(self, record: logging.LogRecord) -> bool:
        current = _ids.get()
        for name in IDS:
            if not hasattr(record, name):
                setattr(record, name, current.get(name, ""))
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the bound ids, the record's `extra` fields."""

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        current = _ids.get()
        for name in IDS:
            value = getattr(record, name, "") or current.get(name, "")
            if value:
                out[name] = value
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """The plain format, with the bound ids appended as key=value."""

    def __init__(self):
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        current = _ids.get()
        pairs = [
            f"{n}={getattr(record, n, '') or current.get(n)}" for n in IDS if getattr(record, n, "") or current.get(n)
        ]
        return f"{text} [{' '.join(pairs)}]" if pairs else text
