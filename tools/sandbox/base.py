"""The sandbox interface: one request/result vocabulary shared by every backend (local, e2b).

A backend runs one tool call in isolation and reports what happened as a `SandboxResult`, including
when the tool fails or the request is unusable; `SandboxError` is raised only by helpers such as
`resolve_backend_name`/`get_backend` and used internally by backends.
"""

from __future__ import annotations

import os
import re
import time
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

# The script every backend executes inside its sandbox (same protocol everywhere).
RUNNER_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_runner.py")

# Conservative: name, optional extras and version specifiers; nothing that pip would read as an option.
_REQUIREMENT_RE = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?\s*([<>=!~]=?\s*[A-Za-z0-9.*+!_-]+\s*,?\s*)*$"
)
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class SandboxError(Exception):
    """The run request cannot be executed as given (not a failure of the tool itself)."""


@dataclass(frozen=True)
class SandboxLimits:
    """Resource ceilings for one run; backends enforce what their platform allows."""

    cpu_s: int = 10
    memory_mb: int = 512
    file_size_mb: int = 16
    max_processes: int = 16
    max_output_bytes: int = 64 * 1024
    scratch_mb: int = 64  # size of the private directory and of /tmp, each (namespaced local runs)


@dataclass(frozen=True)
class SandboxRequest:
    """One tool call: the tool's source, which function to call, and what it is given."""

    source_code: str
    function_name: str
    args: dict[str, Any] = field(default_factory=dict)
    env_vars: dict[str, str] = field(default_factory=dict)
    agent_state: dict[str, Any] | None = None
    timeout_s: float = 30.0
    limits: SandboxLimits = field(default_factory=SandboxLimits)
    pip_requirements: list[str] = field(default_factory=list)
    # Whether the tool may use the network. Off, a namespaced run has only its own loopback.
    allow_network: bool = False
    # The tool's parameters schema when it names models ($defs, as a pydantic args_json_schema does): the runner
    # defines them before the source and builds the arguments from them, as Letta's sandbox does.
    arg_models: dict[str, Any] | None = None

    def payload(self) -> dict[str, Any]:
        """The JSON document the runner script reads (arguments travel as data, never as code)."""
        doc = {
            "source_code": self.source_code,
            "function_name": self.function_name,
            "args": self.args,
            "agent_state": self.agent_state,
        }
        if self.arg_models:
            doc["arg_models"] = self.arg_models
        return doc


@dataclass
class SandboxResult:
    """What a run produced, in Letta's `tool_return_message` vocabulary plus timing and backend."""

    status: Literal["success", "error"]
    tool_return: str
    stdout: str = ""
    stderr: str = ""
    error_type: str | None = None
    error_message: str | None = None
    traceback: str | None = None
    duration_ms: float = 0.0
    backend: str = ""
    # How long the sandbox took to be ready for the tool's code (validation, a venv, the process or VM), within
    # duration_ms; None when it never got that far.
    start_ms: float | None = None
    # Whether the run could use the network (a backend that cannot cut it off says True).
    network: bool = False
    # The agent snapshot as the tool left it (only when the tool declared `agent_state`), so the
    # caller can decide whether to persist block edits.
    agent_state: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class SandboxBackend(ABC):
    """Runs one tool call in isolation. Subclasses set `name` and implement `run`.

    `run` never raises: failures of the tool and unusable requests (error_type "SandboxError")
    both come back as results with status "error".
    """

    name: str = ""

    @abstractmethod
    def run(self, request: SandboxRequest) -> SandboxResult:
        """Execute `request` in a fresh sandbox and return its result; tool failures are results."""


def validate_request(request: SandboxRequest) -> None:
    """Raise SandboxError if env var names/values or pip requirement strings are unusable."""
    for key, value in request.env_vars.items():
        if not isinstance(key, str) or not _ENV_NAME_RE.match(key):
            raise SandboxError(f"invalid environment variable name {key!r}")
        if not isinstance(value, str) or "\x00" in value:
            raise SandboxError(f"environment variable {key!r} must be a string without NUL bytes")
    for req in request.pip_requirements:
        if not isinstance(req, str) or not _REQUIREMENT_RE.match(req.strip()):
            raise SandboxError(f"invalid pip requirement {req!r} (expected e.g. 'requests' or 'requests==2.32.3')")


def error_result(
    *,
    backend: str,
    started: float,
    error_type: str,
    message: str,
    stdout: str = "",
    stderr: str = "",
    traceback: str | None = None,
    network: bool = False,
) -> SandboxResult:
    """Build an error result whose `tool_return` is the short error text, as Letta reports it."""
    return SandboxResult(
        status="error",
        tool_return=f"{error_type}: {message}",
        stdout=stdout,
        stderr=stderr,
        error_type=error_type,
        error_message=message,
        traceback=traceback,
        duration_ms=elapsed_ms(started),
        backend=backend,
        network=network,
    )


def result_from_runner(
    doc: dict[str, Any], *, backend: str, started: float, stdout: str, stderr: str, network: bool = False
) -> SandboxResult:
    """Turn the runner's result document into a SandboxResult (the traceback is appended to stderr)."""
    if doc.get("status") == "success":
        return SandboxResult(
            status="success",
            tool_return=str(doc.get("tool_return", "")),
            stdout=stdout,
            stderr=stderr,
            duration_ms=elapsed_ms(started),
            backend=backend,
            network=network,
            agent_state=doc.get("agent_state"),
        )
    tb = doc.get("traceback") or None
    return error_result(
        backend=backend,
        started=started,
        error_type=str(doc.get("error_type") or "Error"),
        message=str(doc.get("error_message") or ""),
        stdout=stdout,
        stderr=(stderr + tb) if tb else stderr,
        traceback=tb,
        network=network,
    )


# What a run without the network meets when it tries to connect: no name resolution, no route, its own empty loopback.
_NO_NETWORK = re.compile(
    r"Temporary failure in name resolution|Name or service not known|No address associated with hostname"
    r"|Network is unreachable|\[Errno (?:101|111)\]|Connection refused|NameResolutionError|Failed to resolve"
)
NETWORK_BLOCKED = "network blocked by the sandbox"


def network_blocked_said(result: SandboxResult) -> SandboxResult:
    """A failed run without the network whose error is a refused connection or name lookup: say so plainly first
    (the tool's own error follows); any other result is returned as it is."""
    if result.status != "error" or not _NO_NETWORK.search(f"{result.error_message or ''}\n{result.traceback or ''}"):
        return result
    said = (
        f"{NETWORK_BLOCKED}: this run has no network (allow it for the tool, or for the run); "
        f"the tool got {result.error_type}: {result.error_message}"
    )
    return replace(result, tool_return=said, error_message=said)


def elapsed_ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 2)


def truncate_output(data: bytes, total: int, limit: int) -> str:
    """Decode captured output; if `total` bytes exceeded `limit`, say how much was dropped."""
    text = data[:limit].decode("utf-8", errors="replace")
    if total > limit:
        text += f"\n[output truncated: {total - limit} of {total} bytes omitted; limit {limit} bytes]"
    return text
