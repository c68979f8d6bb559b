"""The E2B backend against a STUBBED SDK boundary.

E2B's cloud cannot be reached from here, so `FakeSandbox` stands in for
`e2b_code_interpreter.Sandbox` (injected through the backend's `sandbox_factory`). The stub mimics
the SDK surface the backend uses — `commands.run`, `files.write/read`, `kill`, and the SDK's own
`CommandExitException`/`TimeoutException` — and executes commands with a local subprocess in a
temporary directory standing in for the VM's working directory, so the real runner script and the
result protocol are exercised end to end. What is NOT tested here: E2B's API itself.
"""

import os
import subprocess
import sys
import tempfile
import textwrap

import pytest
from e2b import CommandExitException, CommandResult, TimeoutException

from tools.sandbox.base import SandboxLimits, SandboxRequest
from tools.sandbox.selection import get_backend

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class FakeSandbox:
    """Stub of e2b_code_interpreter.Sandbox: the VM's /home/user is a local temp dir."""

    instances: list["FakeSandbox"] = []

    def __init__(self, pip_fails=False, hang=False, **create_kwargs):
        self.create_kwargs = create_kwargs
        self.root = tempfile.mkdtemp(prefix="fake-e2b-")
        self.commands_run: list[dict] = []
        self.killed = False
        self.pip_fails, self.hang = pip_fails, hang
        self.commands = self
        self.files = _FakeFiles(self)
        FakeSandbox.instances.append(self)

    def local(self, path):
        assert path.startswith("/home/user"), path
        return os.path.join(self.root, os.path.relpath(path, "/home/user"))

    def run(self, cmd, cwd=None, envs=None, timeout=60, **_):
        self.commands_run.append({"cmd": cmd, "cwd": cwd, "envs": envs, "timeout": timeout})
        if " -m pip install " in cmd:
            if self.pip_fails:
                raise CommandExitException(stderr="ERROR: No matching distribution", stdout="", exit_code=1, error=None)
            return CommandResult(stderr="", stdout="", exit_code=0, error=None)
        if self.hang:
            raise TimeoutException("context deadline exceeded")
        env = {"PATH": "/usr/bin:/bin", **(envs or {})}
        proc = subprocess.run(
            cmd, shell=True, cwd=self.local(cwd), env=env, capture_output=True, text=True, timeout=timeout
        )
        if proc.returncode != 0:
            raise CommandExitException(stderr=proc.stderr, stdout=proc.stdout, exit_code=proc.returncode, error=None)
        return CommandResult(stderr=proc.stderr, stdout=proc.stdout, exit_code=0, error=None)

    def kill(self):
        self.killed = True


class _FakeFiles:
    def __init__(self, sandbox):
        self.sandbox = sandbox

    def write(self, path, data):
        with open(self.sandbox.local(path), "w") as f:
            f.write(data)

    def read(self, path):
        with open(self.sandbox.local(path)) as f:
            return f.read()


def backend(**factory_kwargs):
    FakeSandbox.instances.clear()
    return get_backend(
        "e2b",
        api_key="e2b_test_key",
        template="my-template",
        python_command=sys.executable,
        sandbox_factory=lambda **kw: FakeSandbox(**factory_kwargs, **kw),
    )


def req(src, **kw):
    return SandboxRequest(source_code=textwrap.dedent(src), function_name="f", **kw)


def test_runs_tool_and_reports_result_streams_and_backend():
    b = backend()
    r = b.run(
        req(
            """
        import os, sys
        def f(x: int):
            print("hello")
            print("warn", file=sys.stderr)
            return {"double": x * 2, "token": os.environ.get("TOOL_TOKEN")}
    """,
            args={"x": 4},
            env_vars={"TOOL_TOKEN": "abc"},
            timeout_s=12,
        )
    )
    assert r.status == "success", r.stderr
    assert r.tool_return == '{"double": 8, "token": "abc"}'
    assert r.stdout == "hello\n" and r.stderr == "warn\n"
    assert r.backend == "e2b"
    sbx = FakeSandbox.instances[0]
    assert sbx.create_kwargs == {"template": "my-template", "api_key": "e2b_test_key", "timeout": 300}
    (call,) = sbx.commands_run
    assert call["envs"] == {"TOOL_TOKEN": "abc"} and call["timeout"] == 12 and call["cwd"] == "/home/user"
    assert sbx.killed


def test_exception_comes_back_as_error_with_traceback():
    r = backend().run(req("def f():\n    raise KeyError('missing')\n"))
    assert r.status == "error" and r.error_type == "KeyError"
    assert r.tool_return == "KeyError: 'missing'"
    assert 'File "<tool>", line 2' in r.traceback and r.traceback in r.stderr


def test_agent_state_reaches_the_tool():
    r = backend().run(
        req(
            "def f(agent_state):\n    return agent_state.memory.get_block('human').value\n",
            agent_state={"id": "a1", "name": "n", "tags": [], "blocks": [{"label": "human", "value": "Bo"}]},
        )
    )
    assert r.tool_return == "Bo"


def test_pip_requirements_are_installed_first():
    b = backend()
    r = b.run(req("def f():\n    return 1\n", pip_requirements=["requests==2.32.3", "numpy"]))
    assert r.status == "success"
    pip, runner = FakeSandbox.instances[0].commands_run
    assert pip["cmd"].endswith("-m pip install --quiet --disable-pip-version-check requests==2.32.3 numpy")
    assert "tool_runner.py" in runner["cmd"]


def test_pip_failure_is_a_clear_error():
    r = backend(pip_fails=True).run(req("def f():\n    return 1\n", pip_requirements=["nope-pkg"]))
    assert r.status == "error" and r.error_type == "SandboxError"
    assert "pip install failed" in r.error_message and "No matching distribution" in r.error_message
    assert FakeSandbox.instances[0].killed


def test_timeout_is_reported():
    r = backend(hang=True).run(req("def f():\n    return 1\n", timeout_s=2))
    assert r.error_type == "TimeoutError" and "2 s" in r.error_message


def test_output_is_truncated():
    r = backend().run(req("def f():\n    print('x' * 10000)\n", limits=SandboxLimits(max_output_bytes=100)))
    assert r.stdout.startswith("x" * 100) and "output truncated" in r.stdout


def test_missing_api_key_is_an_error_not_a_silent_fallback():
    r = get_backend("e2b").run(req("def f():\n    return 1\n"))
    assert r.status == "error" and r.backend == "e2b"
    assert "no E2B API key" in r.error_message


def test_sdk_failure_to_create_is_reported():
    def broken(**_):
        raise RuntimeError("401 unauthorized")

    r = get_backend("e2b", api_key="bad", sandbox_factory=broken).run(req("def f():\n    return 1\n"))
    assert r.error_type == "SandboxError" and "401 unauthorized" in r.error_message


def test_sdk_is_imported_lazily():
    out = subprocess.run(
        [sys.executable, "-c", "import sys, tools.sandbox.e2b; print('e2b_code_interpreter' in sys.modules)"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "False"


@pytest.fixture(autouse=True)
def _cleanup():
    yield
    import shutil

    for sbx in FakeSandbox.instances:
        shutil.rmtree(sbx.root, ignore_errors=True)
