"""Limits and fallbacks of the local sandbox. Each test fails if its protection is removed.

Limits are tested on the namespaced sandbox with the server as root and as an ordinary user (the
`sandbox_server` fixture); what a namespaced run can reach is in test_sandbox_isolation.py. Where user
namespaces are unavailable, runs are refused unless the operator opts in to the weak mode, which keeps the
environment, the limits and — with a root server — a throwaway uid (`needs_root` cases rely on that drop).
"""

import os
import shutil
import tempfile
import textwrap
import threading

import pytest

from tests.helpers import until
from tests.tools.sandbox_servers import AsOrdinaryUser
from tools.sandbox.base import SandboxLimits, SandboxRequest
from tools.sandbox.local import LocalSandbox

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="dropping to a throwaway uid needs root (CI runs as root)")


@pytest.fixture
def sandbox(sandbox_server):
    return sandbox_server


@pytest.fixture(scope="module")
def weak():
    return LocalSandbox(isolation="weak")


def run(backend, src, timeout_s=10.0, **kw):
    return backend.run(SandboxRequest(source_code=textwrap.dedent(src), function_name="f", timeout_s=timeout_s, **kw))


@pytest.fixture
def root_owned_dir():
    """A directory like the server's own: owned by us (root in CI), mode 0755 unless changed."""
    path = tempfile.mkdtemp(prefix="sandbox-sec-")
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_tool_cannot_see_server_environment_in_weak_mode(weak, monkeypatch):
    monkeypatch.setenv("AGENTS_IDE_TEST_SECRET", "s3cr3t-value")
    monkeypatch.setenv("DATABASE_URL", "postgres://user:pw@db/prod")
    r = run(
        weak,
        """
        import os
        def f():
            return sorted(os.environ)
    """,
        env_vars={"GIVEN": "1"},
    )
    assert r.status == "success" and r.network is True  # the weak mode cannot cut the network off
    assert r.tool_return == '["GIVEN", "HOME", "LANG", "PATH", "TMPDIR"]'


@needs_root
def test_tool_cannot_read_server_environment_through_proc_in_weak_mode(weak, monkeypatch):
    monkeypatch.setenv("AGENTS_IDE_TEST_SECRET", "s3cr3t-value")
    r = run(
        weak,
        """
        import os
        def f():
            with open(f"/proc/{os.getppid()}/environ", "rb") as fh:
                return fh.read().decode(errors="replace")
    """,
    )
    assert r.status == "error" and r.error_type == "PermissionError"
    assert "s3cr3t-value" not in r.tool_return + r.stdout + r.stderr


@needs_root
def test_tool_cannot_read_database_file_in_private_dir_in_weak_mode(weak, root_owned_dir):
    data_dir = os.path.join(root_owned_dir, "data")
    os.mkdir(data_dir, 0o700)
    db = os.path.join(data_dir, "db.sqlite3")
    with open(db, "w") as fh:
        fh.write("SQLite format 3 secret-rows")
    os.chmod(db, 0o644)  # even a world-readable file is protected by its 0700 directory
    r = run(
        weak,
        f"""
        def f():
            return open({db!r}).read()
    """,
    )
    assert r.status == "error" and r.error_type == "PermissionError"
    assert "secret-rows" not in r.tool_return + r.stdout + r.stderr


@needs_root
def test_tool_cannot_write_outside_its_directory_in_weak_mode(weak, root_owned_dir):
    repo_target = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "sandbox-escape.txt")
    targets = [os.path.join(root_owned_dir, "escape.txt"), repo_target]
    r = run(
        weak,
        f"""
        def f():
            results = []
            for path in {targets!r}:
                try:
                    open(path, "w").write("escaped")
                    results.append("written")
                except PermissionError:
                    results.append("denied")
            open("inside.txt", "w").write("fine")
            return results
    """,
    )
    try:
        assert r.tool_return == '["denied", "denied"]'
        assert not any(os.path.exists(t) for t in targets)
    finally:
        for t in targets:
            if os.path.exists(t):
                os.remove(t)


@needs_root
def test_files_left_in_shared_tmp_dirs_are_removed_in_weak_mode(weak):
    name = f"sandbox-leftover-{os.getpid()}"
    r = run(
        weak,
        f'''
        import os
        def f():
            os.mkdir("/tmp/{name}-dir")
            open("/tmp/{name}-dir/inner", "w").write("x")
            open("/tmp/{name}", "w").write("x")
            return sorted(p for p in os.listdir("/tmp") if p.startswith("{name}"))
    ''',
    )
    assert r.tool_return == f'["{name}", "{name}-dir"]'
    # swept after the result, before the run's uid is free for another run
    until(
        lambda: not os.path.exists(f"/tmp/{name}") and not os.path.exists(f"/tmp/{name}-dir"),
        timeout=30,
        what="the run's files removed",
    )


@needs_root
def test_tool_cannot_signal_the_server_in_weak_mode(weak):
    r = run(weak, "import os, signal\ndef f():\n    os.kill(os.getppid(), signal.SIGTERM)\n")
    assert r.status == "error" and r.error_type == "PermissionError"


def test_infinite_loop_is_killed_at_timeout_in_weak_mode(weak):
    r = run(
        weak,
        """
        import os, sys
        def f():
            print(os.getpid(), flush=True)
            while True:
                pass
    """,
        timeout_s=1.0,
        limits=SandboxLimits(cpu_s=60),
    )
    assert r.status == "error" and r.error_type == "TimeoutError"
    pid = int(r.stdout.split()[0])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_cpu_limit_kills_busy_loop(sandbox):
    r = run(sandbox, "def f():\n    while True:\n        pass\n", timeout_s=30.0, limits=SandboxLimits(cpu_s=1))
    assert r.status == "error" and r.error_type == "SandboxKilled"
    assert "CPU time limit exceeded" in r.error_message


def test_memory_bomb_is_contained(sandbox):
    r = run(
        sandbox,
        """
        def f():
            hog = []
            while True:
                hog.append(bytearray(64 * 1024 * 1024))
    """,
        limits=SandboxLimits(memory_mb=256),
    )
    assert r.status == "error" and r.error_type == "MemoryError"
    r = run(sandbox, "def f():\n    return len(bytearray(8 * 1024 ** 3))\n", limits=SandboxLimits(memory_mb=256))
    assert r.error_type == "MemoryError"


def test_file_size_limit(sandbox):
    r = run(
        sandbox,
        """
        import signal
        def f():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            with open("big.bin", "wb") as fh:
                fh.write(b"x" * (3 * 1024 * 1024))
    """,
        limits=SandboxLimits(file_size_mb=1),
    )
    assert r.status == "error" and r.error_type == "OSError" and "too large" in r.error_message.lower()


@needs_root
def test_fork_bomb_is_bounded_and_cleaned_up_in_weak_mode(weak):
    r = run(
        weak,
        """
        import os, time
        def f():
            made = 0
            for _ in range(500):
                try:
                    pid = os.fork()
                except OSError:
                    break
                if pid == 0:
                    os.setsid()  # leave the process group: only the uid sweep can find us
                    time.sleep(600)
                    os._exit(0)
                made += 1
            print(os.getuid())
            return made
    """,
        limits=SandboxLimits(max_processes=8),
    )
    assert r.status == "success", r.stderr
    assert int(r.tool_return) < 8
    uid = int(r.stdout)
    # swept after the result, before the uid is free for another run
    until(
        lambda: not [p for p in os.listdir("/proc") if p.isdigit() and _owned_live(p, uid)],
        timeout=30,
        what="the run's processes killed",
    )


def test_recursive_fork_bomb_is_contained(sandbox):
    r = run(
        sandbox,
        """
        import os
        def f():
            while True:
                try:
                    os.fork()
                except OSError:
                    pass
    """,
        timeout_s=1.5,
        limits=SandboxLimits(max_processes=10),
    )
    assert r.status == "error" and r.error_type == "TimeoutError"


def test_output_flood_is_truncated(sandbox):
    r = run(
        sandbox,
        """
        import sys
        def f():
            sys.stdout.write("x" * 5_000_000)
            sys.stderr.write("y" * 5_000_000)
            return "done"
    """,
        limits=SandboxLimits(max_output_bytes=1000),
    )
    assert r.status == "success" and r.tool_return == "done"
    assert r.stdout.startswith("x" * 1000) and "x" * 1001 not in r.stdout
    assert "[output truncated: 4999000 of 5000000 bytes omitted" in r.stdout
    assert len(r.stderr) < 1200


def test_endless_output_stops_at_timeout(sandbox):
    r = run(
        sandbox,
        """
        import sys
        def f():
            while True:
                sys.stdout.write("z" * 65536)
    """,
        timeout_s=1.0,
        limits=SandboxLimits(max_output_bytes=2048),
    )
    assert r.error_type == "TimeoutError" and "output truncated" in r.stdout


def test_server_stays_responsive_during_a_bomb(sandbox):
    bomb_result = {}

    def bomb():
        bomb_result["r"] = run(
            sandbox,
            """
            import os
            def f():
                hog = []
                while True:
                    try:
                        os.fork()
                        hog.append(bytearray(16 * 1024 * 1024))
                    except (OSError, MemoryError):
                        pass
        """,
            timeout_s=6.0,
            limits=SandboxLimits(max_processes=10, memory_mb=128),
        )

    thread = threading.Thread(target=bomb)
    thread.start()
    try:
        quick = run(sandbox, "def f(x: int):\n    return x * 2\n", args={"x": 21})
        assert thread.is_alive(), "the bomb should still be running while the trivial run completes"
        assert quick.status == "success" and quick.tool_return == "42"
    finally:
        thread.join()
    assert bomb_result["r"].error_type == "TimeoutError"


def _owned_live(pid: str, uid: int) -> bool:
    try:
        if os.stat(f"/proc/{pid}").st_uid != uid:
            return False
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except FileNotFoundError:
        return False


# --- where user namespaces are unavailable ---------------------------------------------------------

NO_USERNS = [
    "unshare",
    "--user",
    "--map-root-user",
    "sh",
    "-c",
    'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"',
    "sh",
]


@pytest.fixture
def server_without_user_namespaces():
    """An ordinary-user server in a user namespace that may create no more (user.max_user_namespaces=0)."""
    if os.geteuid() != 0:
        pytest.skip("becoming an ordinary user needs root")
    servers = []

    def make(**config):
        srv = AsOrdinaryUser(wrap=NO_USERNS, drop_privileges=False, **config)
        servers.append(srv)
        return srv

    yield make
    for srv in servers:
        srv.close()


def test_runs_are_refused_and_the_server_says_why(server_without_user_namespaces):
    srv = server_without_user_namespaces()
    r = srv.run(SandboxRequest(source_code="def f():\n    return 1\n", function_name="f"), log_status=True)
    assert r.status == "error" and r.error_type == "SandboxError"
    assert r.error_message.startswith(
        "local tool runs are refused: bubblewrap could not create the sandbox's namespaces (bwrap: "
    )
    assert "SANDBOX_LOCAL_WEAK_ISOLATION=1" in r.error_message
    assert "ERROR local tool sandbox: local tool runs are refused" in srv.last_stderr


def test_the_operator_may_opt_in_to_the_weak_mode(server_without_user_namespaces):
    srv = server_without_user_namespaces(allow_weak_isolation=True)
    r = srv.run(
        SandboxRequest(source_code="import os\ndef f():\n    return os.getcwd()\n", function_name="f"), log_status=True
    )
    assert r.status == "success" and r.network is True
    assert "/tool-run-" in r.tool_return
    assert "WARNING local tool sandbox: bubblewrap could not create the sandbox's namespaces" in srv.last_stderr
    assert "run WITHOUT namespaces" in srv.last_stderr


def test_missing_bubblewrap_refuses_runs_unless_weak_is_allowed():
    src = SandboxRequest(source_code="def f():\n    return 1\n", function_name="f")
    refused = LocalSandbox(bwrap="/nonexistent/bwrap").run(src)
    assert refused.error_type == "SandboxError" and "could not start" in refused.error_message
    allowed = LocalSandbox(bwrap="/nonexistent/bwrap", allow_weak_isolation=True)
    assert allowed.isolation_status()[0] == "weak" and allowed.run(src).tool_return == "1"
    assert LocalSandbox().isolation_status() == ("namespaces", None)


def test_a_failed_check_is_retried_so_installing_bubblewrap_needs_no_restart(monkeypatch, root_owned_dir):
    from tools.sandbox.bwrap import find_bwrap

    monkeypatch.setattr("tools.sandbox.local.PROBE_RETRY_S", 0.0)
    path = os.path.join(root_owned_dir, "bwrap")
    backend = LocalSandbox(bwrap=path)
    assert backend.isolation_status()[0] == "refused"
    os.symlink(find_bwrap(), path)  # the operator installs it
    assert backend.isolation_status() == ("namespaces", None)
