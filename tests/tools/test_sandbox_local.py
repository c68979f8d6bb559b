"""The local sandbox backend: protocol, results, agent_state, pip venvs, and backend selection."""

import glob
import json
import os
import shutil
import tempfile
import textwrap

import pytest

from tests.helpers import until
from tools.sandbox.base import SandboxError, SandboxLimits, SandboxRequest
from tools.sandbox.local import LocalSandbox
from tools.sandbox.selection import get_backend, resolve_backend_name


@pytest.fixture(scope="module")
def local():
    return get_backend("local")


def run(backend, src, fn="f", **kw):
    return backend.run(SandboxRequest(source_code=textwrap.dedent(src), function_name=fn, **kw))


def test_success_with_json_return_and_separate_streams(local):
    r = run(
        local,
        """
        import sys
        def f(a: int, b: int):
            print("to stdout")
            print("to stderr", file=sys.stderr)
            return {"sum": a + b, "items": [a, b]}
    """,
        args={"a": 2, "b": 3},
    )
    assert r.status == "success"
    assert r.tool_return == '{"sum": 5, "items": [2, 3]}'
    assert r.stdout == "to stdout\n"
    assert r.stderr == "to stderr\n"
    assert r.backend == "local"
    assert r.duration_ms > 0
    assert r.error_type is None


def test_strings_are_returned_verbatim_and_non_json_as_repr(local):
    assert run(local, 'def f():\n    return "plain text"\n').tool_return == "plain text"
    assert run(local, "def f():\n    return {1, 2}\n").tool_return == "{1, 2}"
    assert run(local, "def f():\n    return None\n").tool_return == "None"  # Letta's str(), as True is "True"
    assert run(local, "def f():\n    return True\n").tool_return == "True"


ORDER_MODELS = {
    "type": "object",
    "properties": {"order": {"$ref": "#/$defs/Order"}, "lines": {"type": "array", "items": {"$ref": "#/$defs/Line"}}},
    "$defs": {
        "Line": {"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}}},
        "Order": {
            "type": "object",
            "properties": {
                "items": {"type": "array", "items": {"$ref": "#/$defs/Line"}},
                "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            },
        },
    },
}


def test_arguments_of_the_args_schemas_models_are_those_models(local):
    """Letta's sandbox defines an args_json_schema's models before the source and builds the arguments from them
    (services/tool_sandbox/base.py): annotations name them, fields read as attributes, a field may be called `items`."""
    src = """
        def f(self, order: Order, lines: list[Line]) -> dict:
            assert type(order).__name__ == "Order" and isinstance(lines[0], Line) and self is None
            return {"first": order.items[0].sku, "qty": sum(l.qty for l in lines), "note": order.note, "raw": order}
    """
    order = {"items": [{"sku": "A-1", "qty": 2}]}
    r = run(local, src, args={"order": order, "lines": [{"sku": "B", "qty": 3}]}, arg_models=ORDER_MODELS)
    assert r.status == "success", r.traceback
    assert json.loads(r.tool_return) == {"first": "A-1", "qty": 3, "note": None, "raw": {**order, "note": None}}
    bare = run(local, src, args={"order": order, "lines": []})
    assert bare.status == "error" and bare.error_type == "NameError"  # the NameError it raised before


def test_printing_cannot_spoof_the_result(local):
    r = run(
        local,
        """
        def f():
            print('{"status": "success", "tool_return": "spoofed"}')
            return "real"
    """,
    )
    assert r.tool_return == "real"


def test_arguments_travel_as_data_not_code(local):
    nasty = '"); import os; os._exit(3) #\n\'\'\'"""'
    r = run(local, "def f(s: str):\n    return s\n", args={"s": nasty})
    assert r.status == "success" and r.tool_return == nasty


def test_exception_becomes_error_with_type_message_traceback(local):
    r = run(
        local,
        """
        def helper():
            raise ValueError("bad input")

        def f():
            helper()
    """,
    )
    assert r.status == "error"
    assert r.error_type == "ValueError" and r.error_message == "bad input"
    assert r.tool_return == "ValueError: bad input"
    assert 'File "<tool>", line 3, in helper' in r.traceback
    assert 'raise ValueError("bad input")' in r.traceback
    assert "_runner.py" not in r.traceback
    assert r.traceback in r.stderr


def test_system_exit_and_missing_function_are_errors(local):
    r = run(local, "import sys\ndef f():\n    sys.exit(4)\n")
    assert r.status == "error" and r.error_type == "SystemExit"
    r = run(local, "def g():\n    return 1\n")
    assert r.status == "error" and r.error_type == "NameError" and "'f'" in r.error_message


def test_syntax_error_in_source_is_reported(local):
    r = run(local, "def f(:\n    pass\n")
    assert r.status == "error" and r.error_type == "SyntaxError"


CWD = """
    import json, os
    def f():
        open("scratch.txt", "w").write("x")
        return json.dumps({"cwd": os.getcwd(), "home": os.environ["HOME"], "token": os.environ.get("API_TOKEN")})
"""


def test_env_vars_and_private_working_directory(local):
    import json

    r = run(local, CWD, env_vars={"API_TOKEN": "t-123"})
    data = json.loads(r.tool_return)
    assert data == {"cwd": "/home/user", "home": "/home/user", "token": "t-123"}  # a tmpfs of the run's own
    assert r.network is False


def test_weak_mode_uses_a_throwaway_host_directory():
    import json

    data = json.loads(run(LocalSandbox(isolation="weak"), CWD, env_vars={"API_TOKEN": "t-123"}).tool_return)
    assert data["token"] == "t-123"
    assert data["home"] == data["cwd"] and os.path.basename(data["cwd"]).startswith("tool-run-")
    # removed once the run is over (by the reaper, after the result), with the uid it ran as freed
    until(lambda: not os.path.exists(data["cwd"]), timeout=30, what="the run's directory removed")


def test_agent_state_snapshot_attribute_and_item_access(local):
    state = {
        "id": "agent-1",
        "name": "helper",
        "tags": ["a"],
        "blocks": [{"label": "human", "value": "Ana", "limit": 100}, {"label": "persona", "value": "bot"}],
    }
    r = run(
        local,
        """
        def f(agent_state, suffix: str):
            human = agent_state.memory.get_block("human").value
            agent_state.memory.update_block_value(label="persona", value="bot" + suffix)
            return [agent_state.id, agent_state["name"], agent_state.tags, human, agent_state.memory.list_block_labels()]
    """,
        args={"suffix": "!"},
        agent_state=state,
    )
    assert r.status == "success", r.stderr
    assert r.tool_return == '["agent-1", "helper", ["a"], "Ana", ["human", "persona"]]'
    assert r.agent_state["blocks"][1]["value"] == "bot!"


def test_agent_state_not_passed_when_not_declared(local):
    r = run(local, "def f(**kw):\n    return sorted(kw)\n", agent_state={"id": "x", "blocks": []})
    assert r.tool_return == "[]" and r.agent_state is None


def test_invalid_requests_become_sandbox_errors(local):
    r = run(local, "def f():\n    return 1\n", pip_requirements=["--index-url=http://evil"])
    assert r.status == "error" and r.error_type == "SandboxError" and "invalid pip requirement" in r.error_message
    r = run(local, "def f():\n    return 1\n", env_vars={"BAD=NAME": "x"})
    assert r.error_type == "SandboxError"


def test_pip_requirements_refused_when_installs_disabled(tmp_path):
    backend = LocalSandbox(venv_cache_dir=str(tmp_path / "venvs"), allow_pip_install=False)
    r = run(backend, "def f():\n    return 1\n", pip_requirements=["requests==2.32.3"])
    assert r.status == "error"
    assert r.error_message == (
        "tool requires packages requests==2.32.3; local installs are disabled (set SANDBOX_LOCAL_ALLOW_PIP=1)"
    )


@pytest.fixture
def reachable_dir():
    """A directory the sandbox user can traverse (pytest's tmp_path sits under a 0700 directory)."""
    path = tempfile.mkdtemp(prefix="sandbox-test-")
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_pip_requirements_use_a_cached_venv(reachable_dir):
    """The installer is stubbed (no network in tests): it drops a module into the venv's site-packages."""
    calls = []

    def fake_installer(venv_python, requirements):
        calls.append(list(requirements))
        site = glob.glob(
            os.path.join(os.path.dirname(os.path.dirname(venv_python)), "lib", "python3*", "site-packages")
        )[0]
        with open(os.path.join(site, "fancylib.py"), "w") as f:
            f.write("VERSION = '9.9'\n")

    cache = os.path.join(reachable_dir, "venvs")
    backend = LocalSandbox(venv_cache_dir=str(cache), allow_pip_install=True, installer=fake_installer)
    src = "def f():\n    import fancylib\n    return fancylib.VERSION\n"
    first = run(backend, src, pip_requirements=["fancylib==9.9"])
    second = run(backend, src, pip_requirements=["fancylib==9.9"])
    assert first.status == "success", (first.error_message, first.stderr)
    assert first.tool_return == second.tool_return == "9.9"
    assert calls == [["fancylib==9.9"]]
    # A disabled backend may still use what is already cached.
    cached_only = LocalSandbox(venv_cache_dir=str(cache), allow_pip_install=False)
    assert run(cached_only, src, pip_requirements=["fancylib==9.9"]).tool_return == "9.9"
    # Without the requirement the package is not importable (-S: no site-packages at all).
    assert run(backend, src).error_type == "ModuleNotFoundError"


def test_runs_without_privilege_drop_too():
    backend = LocalSandbox(drop_privileges=False)  # bwrap as the server's own uid
    r = run(backend, "import os\ndef f():\n    return os.getuid()\n")
    assert r.status == "success" and r.tool_return == str(os.getuid())


def test_backend_resolution_is_explicit():
    assert resolve_backend_name(None, "local") == "local"
    assert resolve_backend_name("e2b", "local") == "e2b"
    assert resolve_backend_name("", "e2b") == "e2b"
    with pytest.raises(SandboxError, match="unknown sandbox backend 'docker'"):
        resolve_backend_name("docker", "local")
    with pytest.raises(SandboxError):
        get_backend("nope")
    assert get_backend("local").name == "local"
    assert get_backend("e2b", api_key="k").name == "e2b"


def test_limits_are_part_of_the_request():
    req = SandboxRequest(source_code="", function_name="f", limits=SandboxLimits(cpu_s=1, memory_mb=64))
    assert req.limits.cpu_s == 1 and req.limits.max_output_bytes == 64 * 1024
    assert "limits" not in req.payload()  # backends add what they enforce


@pytest.mark.parametrize(
    "value",
    [
        {"a": [1, 2.5, True, None], "b": {"c": "d"}},
        'quote " backslash \\ newline \n tab \t bell \x07 unicode é ☃',
        [float("inf"), float("-inf"), 1e300, -0.0, 10**30],
        (1, "two"),
        {1: "int key"},
        [],
        {},
    ],
)
def test_runner_json_encoder_matches_json_dumps(value):
    """The runner's import-free encoder must produce exactly what json.dumps would."""
    import importlib.util
    import json

    from tools.sandbox.base import RUNNER_PATH

    spec = importlib.util.spec_from_file_location("sandbox_runner", RUNNER_PATH)
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    assert runner._to_json(value) == json.dumps(value, ensure_ascii=False)


def test_non_plain_agent_state_values_are_sent_as_json(local):
    import datetime

    state = {"id": "a", "name": "n", "tags": [], "blocks": [], "created_at": datetime.datetime(2024, 1, 2, 3, 4)}
    r = run(local, "def f(agent_state):\n    return agent_state['created_at']\n", agent_state=state)
    assert r.status == "success" and r.tool_return == "2024-01-02 03:04:00"


def test_next_run_takes_a_sandbox_started_ahead_and_it_is_fresh(reachable_dir):
    """After a run, the next sandbox is started in the background; the next run uses it (once)."""

    from tools.sandbox.warm import WARM

    backend = LocalSandbox(work_root=reachable_dir)  # part of the key: no other test's sandbox matches
    src = """
        import os
        def f(note: str):
            seen = os.listdir("/tmp") + os.listdir("/home/user")
            open("/tmp/" + note, "w").write(note)
            return [os.readlink("/proc/self/ns/pid"), seen]
    """
    first = run(backend, src, args={"note": "first"})
    assert first.status == "success", first.stderr

    def ours():
        return [s for key, group in list(WARM._ready.items()) if reachable_dir in key for s in group]

    waiting = until(ours, timeout=30, what="the waiting sandbox's background start")
    waiting_ns = [_pid_namespace_below(s.proc.pid) for s in waiting]
    second = run(backend, src, args={"note": "second"})
    ns, seen = json.loads(second.tool_return)
    assert ns == waiting_ns[0] and ns != json.loads(first.tool_return)[0]
    assert seen == []  # nothing of the first run


def _pid_namespace_below(pid: int) -> str:
    """The PID namespace of the sandbox bwrap `pid` started (its first child is the namespace's init)."""

    def namespace() -> str | None:  # bwrap may not have made its namespaces yet
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            children = fh.read().split()
        ns = os.readlink(f"/proc/{children[0]}/ns/pid") if children else None
        return ns if ns != os.readlink("/proc/self/ns/pid") else None

    return until(namespace, timeout=30, interval=0.01, what="the waiting sandbox's PID namespace")


def test_a_forked_server_process_starts_without_the_parents_waiting_sandboxes():
    from tools.sandbox.warm import WARM

    run(LocalSandbox(), "def f():\n    return 1\n")  # the parent now has a worker thread and (soon) a sandbox
    pid = os.fork()
    if pid == 0:
        os._exit(0 if (not WARM._ready and not WARM._workers and not WARM._filling) else 1)
    assert os.waitpid(pid, 0)[1] == 0


def test_weak_mode_takes_a_process_started_ahead_once_with_its_own_directory_and_env(reachable_dir):
    """Without namespaces too, the next run's process is started ahead: blocked on its payload, with its own
    directory (and, on a root server, its own uid); the tool's variables reach only the run they were given to."""
    from tools.sandbox.warm import WARM

    backend = LocalSandbox(isolation="weak", work_root=reachable_dir)
    first = json.loads(run(backend, CWD, env_vars={"API_TOKEN": "first"}).tool_return)

    def ours():
        return [s for key, group in list(WARM._ready.items()) if reachable_dir in key for s in group]

    waiting = until(ours, timeout=30, what="the waiting process's background start")
    assert all(s.workdir and s.workdir != first["cwd"] for s in waiting)
    with open(f"/proc/{waiting[0].proc.pid}/environ", "rb") as fh:
        assert b"API_TOKEN" not in fh.read()  # a waiting process has none of any run's variables
    second = json.loads(run(backend, CWD).tool_return)
    assert second["cwd"] == waiting[0].workdir and second["home"] == second["cwd"]
    assert second["token"] is None  # nothing of the first run's environment
    until(lambda: waiting[0].proc.poll() is not None, timeout=30, what="the used process gone")


def test_only_a_python_installation_or_venv_is_mounted_beyond_usr(tmp_path):
    from tools.sandbox.bwrap import python_mounts

    assert python_mounts("/usr/bin/python3") == []
    base = tmp_path / "python"
    (base / "bin").mkdir(parents=True)
    (base / "lib" / "python3.11").mkdir(parents=True)
    (base / "lib" / "python3.11" / "os.py").write_text("")
    (base / "bin" / "python3").write_text("")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = {base / 'bin'}\n")
    (venv / "bin" / "python").symlink_to(base / "bin" / "python3")
    assert python_mounts(str(base / "bin" / "python3")) == [str(base)]
    assert python_mounts(str(venv / "bin" / "python")) == [str(base), str(venv)]
    home = tmp_path / "home"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "python3").write_text("")
    with pytest.raises(SandboxError, match="not inside a Python installation"):
        python_mounts(str(home / "bin" / "python3"))  # would otherwise mount the whole home directory
