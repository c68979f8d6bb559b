"""What a local tool run can reach: no network (PostgreSQL, Redis, the server's port) unless allowed, none of
the server's files, sockets, processes or environment, and nothing left for the next run. Every test runs
with the server as root (bwrap as a throwaway uid) and as an ordinary user (a setpriv'd child process, as
the Docker image runs), through real bubblewrap namespaces."""

import contextlib
import json
import os
import socket
import textwrap

import pytest
from django.conf import settings

from tests.tools.sandbox_servers import AsOrdinaryUser, make_server, servers
from tools.sandbox.base import SandboxLimits, SandboxRequest

PG_SOCKET = "/var/run/postgresql/.s.PGSQL.5432"

CONNECT = textwrap.dedent("""
    import socket

    def f(targets: list):
        out = {}
        for target in targets:
            try:
                if target.startswith("/"):
                    s = socket.socket(socket.AF_UNIX)
                    s.settimeout(3)
                    s.connect(target)
                else:
                    host, port = target.rsplit(":", 1)
                    s = socket.create_connection((host, int(port)), timeout=3)
                s.close()
                out[target] = "connected"
            except OSError as exc:
                out[target] = type(exc).__name__
        return out
""")


@pytest.fixture
def server(sandbox_server):
    return sandbox_server


def run(server, src, **kw):
    kw.setdefault("timeout_s", 20.0)
    return server.run(SandboxRequest(source_code=textwrap.dedent(src), function_name="f", **kw))


def _host_reaches(target: str) -> bool:
    try:
        if target.startswith("/"):
            s = socket.socket(socket.AF_UNIX)
            s.connect(target)
        else:
            host, port = target.rsplit(":", 1)
            s = socket.create_connection((host, int(port)), timeout=2)
        s.close()
        return True
    except OSError:
        return False


@pytest.fixture
def listener():
    """A listening TCP port on the host's loopback, standing for the server's own port."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    yield f"127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


@pytest.fixture
def local_services(listener):
    """PostgreSQL over TCP and its socket, Redis, and the server's port — those the host itself can reach."""
    targets = [t for t in ("127.0.0.1:5432", PG_SOCKET, "127.0.0.1:6379") if _host_reaches(t)] + [listener]
    if len(targets) < 4:
        pytest.skip(f"PostgreSQL and Redis must be running on this host (reachable: {targets})")
    return targets


def test_local_services_are_unreachable_without_network(server, local_services):
    r = run(server, CONNECT, args={"targets": local_services})
    assert r.status == "success", r.stderr
    assert r.network is False
    got = json.loads(r.tool_return)
    assert "connected" not in got.values(), got
    assert got[PG_SOCKET] == "FileNotFoundError"  # the socket's directory does not exist in the sandbox
    assert got["127.0.0.1:5432"] == got["127.0.0.1:6379"] == "ConnectionRefusedError"  # its own, empty loopback


THROUGH_PROXY = textwrap.dedent("""
    import os, socket

    def f(targets: list):
        proxy = os.environ["HTTPS_PROXY"].rsplit(":", 1)
        out = {}
        for target in targets:
            s = socket.create_connection((proxy[0][len("http://"):], int(proxy[1])), timeout=5)
            s.sendall(f"CONNECT {target} HTTP/1.1\\r\\nHost: {target}\\r\\n\\r\\n".encode())
            out[target] = s.recv(4096).decode().split("\\r\\n")[0]
            s.close()
        return out
""")


def _accepted(sock) -> int:
    """How many connections reached a listening socket (accepting them without waiting)."""
    sock.setblocking(False)
    count = 0
    with contextlib.suppress(BlockingIOError):
        while True:
            sock.accept()[0].close()
            count += 1
    return count


@pytest.fixture
def listening():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    yield sock, f"127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


def test_allowed_network_still_cannot_reach_local_services_directly(server, local_services):
    """Allowed the network, a run still has only its own loopback: the host's services are not there."""
    r = run(server, CONNECT, args={"targets": local_services}, allow_network=True)
    assert r.status == "success", r.stderr
    assert r.network is True
    got = json.loads(r.tool_return)
    assert "connected" not in got.values(), got
    assert got[PG_SOCKET] == "FileNotFoundError"


def test_the_egress_proxy_refuses_loopback_private_and_metadata_before_connecting(server, local_services, listening):
    sock, address = listening
    targets = [
        "127.0.0.1:5432",
        "127.0.0.1:6379",
        address,
        "[::1]:5432",
        "10.0.0.1:80",
        "192.168.1.1:80",
        "169.254.169.254:80",
        "[fd00::1]:80",
        "localhost:6379",
    ]
    r = run(server, THROUGH_PROXY, args={"targets": targets}, allow_network=True)
    assert r.status == "success", r.stderr
    got = json.loads(r.tool_return)
    assert all(line.startswith("HTTP/1.1 403") for line in got.values()), got
    assert _accepted(sock) == 0  # refused before any connection


def test_an_address_the_operator_allows_is_reached_through_the_proxy(listening):
    sock, address = listening
    srv = make_server(servers()[-1], egress_allow=[address])
    try:
        r = run(srv, THROUGH_PROXY, args={"targets": [address, "127.0.0.1:6379"]}, allow_network=True)
    finally:
        if isinstance(srv, AsOrdinaryUser):
            srv.close()
    assert r.status == "success", r.stderr
    got = json.loads(r.tool_return)
    assert got[address].startswith("HTTP/1.1 200"), got
    assert got["127.0.0.1:6379"].startswith("HTTP/1.1 403"), got  # another port of the same address is not allowed
    assert _accepted(sock) == 1


def test_the_network_is_only_a_loopback(server):
    r = run(
        server,
        """
        import socket
        def f():
            return sorted(name for _, name in socket.if_nameindex())
    """,
    )
    assert r.tool_return == '["lo"]'


def test_run_data_dir_and_host_trees_are_invisible(server):
    data_dir = str(settings.DATA_DIR)
    assert os.path.isdir(data_dir) and os.path.isdir("/run")
    r = run(
        server,
        f"""
        import os
        def f():
            paths = ["/run", "/var/run", "/run/lock", "/var/run/postgresql", {data_dir!r}, {settings.BASE_DIR.as_posix()!r},
                     "/root", "/var", "/srv", "/etc/passwd", "/etc/shadow"]
            return {{"visible": [p for p in paths if os.path.lexists(p)], "root": sorted(os.listdir("/"))}}
    """,
    )
    assert r.status == "success", r.stderr
    got = json.loads(r.tool_return)
    assert got["visible"] == []
    assert set(got["root"]) <= {
        "bin",
        "dev",
        "etc",
        "home",
        "lib",
        "lib32",
        "lib64",
        "libx32",
        "opt",
        "proc",
        "sbin",
        "tmp",
        "usr",
    }


def test_only_the_private_dir_and_tmp_are_writable(server):
    r = run(
        server,
        """
        import os
        def f():
            out = {}
            for path in ["/home/user/a", "/tmp/b", "/dev/shm/g", "/usr/c", "/etc/d", "/e", "/opt/f", "/dev/h"]:
                try:
                    open(path, "w").write("x")
                    out[path] = "written"
                except OSError as exc:
                    out[path] = type(exc).__name__
            return [os.getcwd(), os.environ["HOME"], os.environ["TMPDIR"], out]
    """,
    )
    cwd, home, tmpdir, out = json.loads(r.tool_return)
    assert cwd == home == "/home/user" and tmpdir == "/tmp"
    assert out == {
        "/home/user/a": "written",
        "/tmp/b": "written",
        "/dev/shm/g": "written",
        "/usr/c": "OSError",
        "/etc/d": "OSError",
        "/e": "OSError",
        "/opt/f": "OSError",
        "/dev/h": "OSError",
    }


def test_nothing_written_survives_to_the_next_run(server):
    marker = f"sandbox-survivor-{os.getpid()}"
    first = run(
        server,
        f"""
        import os
        def f():
            for d in ("/tmp", "/home/user", "/dev/shm"):
                open(os.path.join(d, {marker!r}), "w").write("left behind")
            return "ok"
    """,
    )
    assert first.tool_return == "ok", first.stderr
    second = run(
        server,
        f"""
        import os
        def f():
            return [d for d in ("/tmp", "/home/user", "/dev/shm") if os.path.exists(os.path.join(d, {marker!r}))]
    """,
    )
    assert second.status == "success" and second.tool_return == "[]"
    for d in ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/run"):  # nor on the host
        assert not os.path.exists(os.path.join(d, marker))


@pytest.mark.parametrize("directory", ["/tmp", "/home/user", "/dev/shm"])
def test_scratch_space_is_capped(server, directory):
    r = run(
        server,
        f'''
        def f():
            written = 0
            try:
                for i in range(64):
                    with open(f"{directory}/chunk{{i}}", "wb") as fh:
                        fh.write(b"x" * (1024 * 1024))
                    written += 1
            except OSError as exc:
                return [written, exc.errno]
            return [written, None]
    ''',
        limits=SandboxLimits(scratch_mb=4),
    )
    assert r.status == "success", r.stderr
    written, errno_ = json.loads(r.tool_return)
    assert written < 5 and errno_ == 28  # ENOSPC


def test_server_environment_and_processes_are_out_of_reach(server, monkeypatch):
    monkeypatch.setenv("AGENTS_IDE_TEST_SECRET", "s3cr3t-value")
    r = run(
        server,
        """
        import os, signal
        def f():
            seen = {}
            for pid in (p for p in os.listdir("/proc") if p.isdigit()):
                with open(f"/proc/{pid}/environ", "rb") as fh:
                    seen[pid] = fh.read().decode(errors="replace")
            try:
                os.kill(int(os.environ["SERVER_PID"]), signal.SIGTERM)
                signalled = "sent"
            except OSError as exc:
                signalled = type(exc).__name__
            return {"env": sorted(os.environ), "procs": len(seen), "secret": any("s3cr3t" in e for e in seen.values()),
                    "signal": signalled}
    """,
        env_vars={"SERVER_PID": str(os.getpid())},
    )
    got = json.loads(r.tool_return)
    assert got["env"] == ["HOME", "LANG", "PATH", "SERVER_PID", "TMPDIR"]
    assert got["secret"] is False and got["procs"] <= 2  # bwrap's init and the tool
    assert got["signal"] == "ProcessLookupError"


def test_tool_environment_reaches_the_tool_but_not_the_launcher(server):
    """bwrap runs outside the namespaces: a tool's LD_PRELOAD must not load anything into it (or into python)."""
    r = run(
        server,
        """
        import os
        def f():
            return [os.environ["LD_PRELOAD"], os.environ["GIVEN"]]
    """,
        env_vars={"LD_PRELOAD": "/nonexistent/preload.so", "GIVEN": "1"},
    )
    assert r.status == "success" and r.tool_return == '["/nonexistent/preload.so", "1"]'
    assert "preload" not in r.stderr  # the loader would complain if it had tried to load it


def test_processes_the_tool_leaves_behind_die_with_the_run(server):
    r = run(
        server,
        """
        import os, time
        def f():
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    time.sleep(600)
                os._exit(0)
            return os.readlink("/proc/self/ns/pid")
    """,
    )
    assert r.status == "success", r.stderr
    assert _processes_in_pid_namespace(r.tool_return) == []


def test_timed_out_run_leaves_no_process(server):
    r = run(
        server,
        """
        import os
        def f():
            print(os.readlink("/proc/self/ns/pid"), flush=True)
            while True:
                pass
    """,
        timeout_s=1.0,
        limits=SandboxLimits(cpu_s=60),
    )
    assert r.error_type == "TimeoutError"
    assert _processes_in_pid_namespace(r.stdout.strip()) == []


def test_fork_bomb_is_bounded_by_its_own_namespace(server):
    r = run(
        server,
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
                    time.sleep(600)
                    os._exit(0)
                made += 1
            return made
    """,
        limits=SandboxLimits(max_processes=8),
    )
    assert r.status == "success", r.stderr
    assert 0 < int(r.tool_return) < 8


def test_tool_cannot_make_namespaces_of_its_own(server):
    r = run(
        server,
        """
        import ctypes, errno
        def f():
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.unshare(0x10000000) == 0:  # CLONE_NEWUSER
                return "unshared"
            return errno.errorcode[ctypes.get_errno()]
    """,
    )
    assert r.status == "success", r.stderr
    assert r.tool_return in ("ENOSPC", "EPERM")


def _processes_in_pid_namespace(ns: str) -> list[int]:
    """Live host processes in the run's PID namespace once it is torn down (the result may come back while the
    kernel is still killing them; a zombie is dead, host init reaps it when it gets to it)."""
    from tests.helpers import until

    with contextlib.suppress(AssertionError):  # the caller asserts on what is left
        until(lambda: not _live_in(ns), timeout=30, interval=0.01, what="the namespace's processes to end")
    return _live_in(ns)


def _live_in(ns: str) -> list[int]:
    assert ns.startswith("pid:["), ns
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/ns/pid") != ns:
                    continue
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    if fh.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X"):
                        found.append(int(entry))
            except OSError:
                continue
    return found
