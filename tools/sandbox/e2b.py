"""E2B sandbox: each run gets a fresh E2B cloud VM (`e2b_code_interpreter.Sandbox`), killed afterwards.

The same runner script as the local backend is uploaded with the payload and executed with
`commands.run`, so both backends share one protocol: arguments travel as a JSON file, the result
comes back as a JSON file separate from stdout. The VM is the isolation boundary; requirements are
pip-installed inside it. The SDK is imported only when a sandbox is actually created.
"""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Callable
from typing import Any

from tools.sandbox import live
from tools.sandbox.base import (
    RUNNER_PATH,
    SandboxBackend,
    SandboxError,
    SandboxRequest,
    SandboxResult,
    elapsed_ms,
    error_result,
    result_from_runner,
    truncate_output,
    validate_request,
)

SandboxFactory = Callable[..., Any]


def default_sandbox_factory(**kwargs: Any) -> Any:
    """Create a real E2B sandbox (network call to E2B's API)."""
    from e2b_code_interpreter import Sandbox  # heavy import, and only needed when E2B is chosen

    return Sandbox.create(**kwargs)


class E2BSandbox(SandboxBackend):
    """Runs tools in E2B VMs; configured explicitly (API key, template), never from the environment."""

    name = "e2b"

    def __init__(
        self,
        *,
        api_key: str | None = None,
        template: str | None = None,
        sandbox_timeout_s: int = 300,
        pip_timeout_s: float = 300,
        python_command: str = "python3",
        workdir: str = "/home/user",
        sandbox_factory: SandboxFactory | None = None,
    ):
        self.api_key = api_key
        self.template = template
        self.sandbox_timeout_s = sandbox_timeout_s
        self.pip_timeout_s = pip_timeout_s
        self.python_command = python_command
        self.workdir = workdir.rstrip("/") or "/"
        self.sandbox_factory = sandbox_factory

    def run(self, request: SandboxRequest) -> SandboxResult:
        """Run the tool in a new E2B sandbox (network: E2B API; pip installs inside the VM)."""
        started = time.monotonic()
        try:
            validate_request(request)
            sandbox = self._create()
        except SandboxError as exc:
            return error_result(backend=self.name, started=started, error_type="SandboxError", message=str(exc))
        try:
            ready_ms = elapsed_ms(started)  # the VM is up; pip installs count as the tool's run
            result = self._run_in(sandbox, request, started)
            result.start_ms = ready_ms
            result.network = True  # an E2B VM always has the internet (it cannot reach our local services)
            return result
        finally:
            try:
                sandbox.kill()
            except Exception:  # noqa: BLE001 - the VM expires on its own timeout anyway
                pass

    def _create(self) -> Any:
        if self.sandbox_factory is None and not self.api_key:
            raise SandboxError("the e2b backend was chosen but no E2B API key is configured (E2B_API_KEY)")
        kwargs: dict[str, Any] = {"timeout": int(self.sandbox_timeout_s)}
        if self.template:
            kwargs["template"] = self.template
        if self.api_key:
            kwargs["api_key"] = self.api_key
        try:
            return (self.sandbox_factory or default_sandbox_factory)(**kwargs)
        except Exception as exc:  # noqa: BLE001 - SDK/network errors become a readable result
            raise SandboxError(f"could not start an E2B sandbox: {type(exc).__name__}: {exc}") from exc

    def _path(self, name: str) -> str:
        return f"{self.workdir}/{name}"

    def _run_in(self, sandbox: Any, request: SandboxRequest, started: float) -> SandboxResult:
        limit = request.limits.max_output_bytes
        if request.pip_requirements:
            cmd = f"{self.python_command} -m pip install --quiet --disable-pip-version-check " + shlex.join(
                request.pip_requirements
            )
            try:
                sandbox.commands.run(cmd, timeout=self.pip_timeout_s)
            except Exception as exc:  # noqa: BLE001
                return error_result(
                    backend=self.name,
                    started=started,
                    error_type="SandboxError",
                    message=f"pip install failed in the E2B sandbox: {_exc_text(exc)}",
                )
        with open(RUNNER_PATH, encoding="utf-8") as f:
            sandbox.files.write(self._path("tool_runner.py"), f.read())
        sandbox.files.write(self._path("tool_payload.json"), json.dumps(request.payload()))
        cmd = f"{self.python_command} tool_runner.py tool_payload.json tool_result.json"
        follow = live.listener()
        streams = (
            {"on_stdout": lambda s: follow("stdout", s.encode()), "on_stderr": lambda s: follow("stderr", s.encode())}
            if follow
            else {}
        )
        try:
            out = sandbox.commands.run(
                cmd, cwd=self.workdir, envs=dict(request.env_vars), timeout=request.timeout_s, **streams
            )
        except Exception as exc:  # noqa: BLE001 - CommandExitException carries the output too
            if _is_timeout(exc):
                return error_result(
                    backend=self.name,
                    started=started,
                    error_type="TimeoutError",
                    message=f"tool exceeded the wall-time limit of {request.timeout_s:g} s",
                )
            out = exc
        stdout = _cap(getattr(out, "stdout", "") or "", limit)
        stderr = _cap(getattr(out, "stderr", "") or "", limit)
        try:
            raw = sandbox.files.read(self._path("tool_result.json"))
            doc = json.loads(raw)
        except Exception:  # noqa: BLE001 - no result file: the process died before reporting
            code = getattr(out, "exit_code", None)
            return error_result(
                backend=self.name,
                started=started,
                error_type="NoResult",
                stdout=stdout,
                stderr=stderr,
                message=f"the tool process exited (code {code}) without reporting a result",
            )
        return result_from_runner(doc, backend=self.name, started=started, stdout=stdout, stderr=stderr)


def _cap(text: str, limit: int) -> str:
    data = text.encode("utf-8", errors="replace")
    return truncate_output(data, len(data), limit)


def _is_timeout(exc: Exception) -> bool:
    try:
        from e2b import TimeoutException
    except ImportError:  # SDK not installed: fall back to the class name
        return type(exc).__name__ == "TimeoutException"
    return isinstance(exc, TimeoutException)


def _exc_text(exc: Exception) -> str:
    stderr = getattr(exc, "stderr", "") or ""
    return (stderr[-2000:] if stderr else f"{type(exc).__name__}: {exc}").strip()
