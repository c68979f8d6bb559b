"""Letta-style prefixed identifiers (`agent-<uuid4>`), so ids say what they name."""

import uuid


def new_id(prefix: str) -> str:
    """Return a fresh `<prefix>-<uuid4>` identifier."""
    return f"{prefix}-{uuid.uuid4()}"


def id_default(prefix: str):
    """A model-field default that yields a fresh prefixed id (a named function, so migrations serialize it)."""
    return _DEFAULTS[prefix]


def _make(prefix: str):
    def default() -> str:
        return new_id(prefix)

    default.__name__ = f"new_{prefix.replace('-', '_')}_id"
    default.__qualname__ = default.__name__
    return default


PREFIXES = (
    "org",
    "agent",
    "message",
    "run",
    "step",
    "block",
    "passage",
    "tool",
    "toolrun",
    "token",
    "history",
    "provider",
    "replay",
    "testrun",
    "mcp_server",
    "conv",
    "dataset",
    "case",
    "experiment",
)
_DEFAULTS = {p: _make(p) for p in PREFIXES}
# Migrations reference defaults by module attribute, so expose each one by name.
globals().update({fn.__name__: fn for fn in _DEFAULTS.values()})
