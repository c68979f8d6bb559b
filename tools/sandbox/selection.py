"""Tool sandboxes: swappable backends behind one interface (`base.SandboxBackend`).

Which backend runs a tool is always explicit: a per-tool override, else the deployment default
(`resolve_backend_name`). Having an E2B key configured never switches backends by itself.
"""

from __future__ import annotations

import importlib

from tools.sandbox.base import (
    SandboxBackend,
    SandboxError,
    SandboxLimits,
    SandboxRequest,
    SandboxResult,
)

BACKENDS = {
    "local": "tools.sandbox.local.LocalSandbox",
    "e2b": "tools.sandbox.e2b.E2BSandbox",
}

__all__ = [
    "BACKENDS",
    "SandboxBackend",
    "SandboxError",
    "SandboxLimits",
    "SandboxRequest",
    "SandboxResult",
    "get_backend",
    "resolve_backend_name",
]


def resolve_backend_name(tool_override: str | None, deployment_default: str) -> str:
    """Return the backend that runs a tool: its own override if set, else the deployment default."""
    name = (tool_override or deployment_default or "").strip().lower()
    if name not in BACKENDS:
        source = "tool override" if tool_override else "deployment default"
        raise SandboxError(f"unknown sandbox backend {name!r} ({source}); choose one of {', '.join(BACKENDS)}")
    return name


def get_backend(name: str, **config) -> SandboxBackend:
    """Instantiate the backend `name` with explicit `config` (imports it lazily; e2b's SDK is heavy)."""
    if name not in BACKENDS:
        raise SandboxError(f"unknown sandbox backend {name!r}; choose one of {', '.join(BACKENDS)}")
    module_path, _, class_name = BACKENDS[name].rpartition(".")
    return getattr(importlib.import_module(module_path), class_name)(**config)
