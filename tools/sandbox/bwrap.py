"""Bubblewrap for the local sandbox: the namespaces a tool run gets and the only files it can see.

Each run is `bwrap … python -I -S runner.py` in fresh user, mount, PID, IPC, UTS, cgroup and network
namespaces: only its own loopback. A run allowed the network reaches it through the egress proxy
(`egress.py`: the public internet only), relayed from its loopback by `_relay.py`. Its root is an
empty read-only tmpfs holding: /usr (and the /bin, /lib… links into it) and the interpreter's prefix
(or the tool's venv) read-only, /etc/hosts and /etc/localtime (plus name resolution and TLS roots when
the network is allowed), a new /proc (this run's processes only), a minimal /dev, and two size-capped
tmpfs mounts, the private directory `SANDBOX_HOME` and /tmp. Nothing else of the host — the data
directory, /run and its sockets, /var, users' homes, other runs' files — exists inside, and everything
written is gone when the run ends. No setuid helper is needed: bwrap runs as the server's user (or a
throwaway uid when the server is root), which is how the Docker image runs.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess

from tools.sandbox.base import SandboxError

SANDBOX_HOME = "/home/user"  # the tool's cwd and HOME (the same path E2B uses)
RUNNER_IN_SANDBOX = "/opt/agents-ide/runner.py"
RELAY_IN_SANDBOX = "/opt/agents-ide/relay.py"  # _relay.py: limits, and the way to the egress proxy
EGRESS_SOCKET_IN_SANDBOX = "/run/agents-ide/egress.sock"
BWRAP_SEARCH_PATH = "/usr/bin:/bin:/usr/local/bin:/usr/sbin"
_MB = 1024 * 1024
_ROOT_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
# Read-only /etc files: `localhost` and the time zone for every run; name resolution, TLS roots and service
# names only for a run with network (each is a mount, a few hundred microseconds).
_ETC = ("hosts", "localtime")
_ETC_NETWORK = _ETC + (
    "resolv.conf",
    "nsswitch.conf",
    "host.conf",
    "gai.conf",
    "services",
    "protocols",
    "ssl",
    "ca-certificates",
    "pki",
)


def find_bwrap() -> str | None:
    """The bubblewrap binary (Debian's `bubblewrap` package), or None if it is not installed."""
    return shutil.which("bwrap", path=BWRAP_SEARCH_PATH)


def python_mounts(python: str) -> list[str]:
    """Directories a sandboxed `python` needs beyond /usr: its installation prefix, and its venv if it is one."""
    mounts = []
    exe = os.path.realpath(python)
    prefix = os.path.dirname(os.path.dirname(exe))
    if not _under_usr(prefix):
        # Only a real installation (bin/ beside lib/python3.x): never, say, a home directory with a bin/.
        if prefix == "/" or not glob.glob(os.path.join(prefix, "lib", "python3*", "os.py")):
            raise SandboxError(
                f"{exe} is not inside a Python installation that can be mounted read-only (no {prefix}/lib/python3.x)"
            )
        mounts.append(prefix)
    venv = os.path.dirname(os.path.dirname(os.path.abspath(python)))
    if os.path.exists(os.path.join(venv, "pyvenv.cfg")) and not _under_usr(venv):
        mounts.append(venv)  # at the path the command names, symlinks or not
    return mounts


def _under_usr(path: str) -> bool:
    real = os.path.realpath(path)
    return real == "/usr" or real.startswith("/usr/")


def bwrap_argv(
    *,
    bwrap: str,
    mounts: list[str],
    runner: str,
    allow_network: bool,
    scratch_mb: int,
    relay: str | None = None,
    egress_socket: str | None = None,
) -> list[str]:
    """The bwrap options for one run (the command to run inside follows them).

    The network namespace is always new: a run allowed the network reaches it only through the egress proxy,
    whose socket (`egress_socket`) is mounted in for `relay` to forward to."""
    if allow_network and not (relay and egress_socket):
        raise SandboxError("a sandbox with network needs the egress relay and the proxy's socket")
    argv = [
        bwrap,
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--hostname",
        "sandbox",
        "--unshare-net",
    ]
    argv += ["--ro-bind", "/usr", "/usr"]
    for name in _ROOT_LINKS:
        path = "/" + name
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    for name in _ETC_NETWORK if allow_network else _ETC:
        path = "/etc/" + name
        if os.path.exists(path):
            argv += ["--ro-bind", path, path]
    size = str(max(1, scratch_mb) * _MB)
    # bwrap's /dev is an uncapped tmpfs: cap /dev/shm like the others and make the rest read-only.
    argv += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        size,
        "--tmpfs",
        "/dev/shm",
        "--remount-ro",
        "/dev",
        "--size",
        size,
        "--tmpfs",
        "/tmp",
        "--size",
        size,
        "--tmpfs",
        SANDBOX_HOME,
    ]
    for path in mounts:  # after /tmp's tmpfs, which would hide a venv cached under /tmp
        argv += ["--ro-bind", path, path]
    argv += ["--ro-bind", runner, RUNNER_IN_SANDBOX]
    if relay:
        argv += ["--ro-bind", relay, RELAY_IN_SANDBOX]
    if allow_network:
        argv += ["--ro-bind", egress_socket, EGRESS_SOCKET_IN_SANDBOX]
    argv += ["--chdir", SANDBOX_HOME, "--remount-ro", "/"]
    return argv


def probe(*, bwrap: str | None, python: str, runner: str, user: int | None) -> str | None:
    """Why a namespaced run cannot start here (no bwrap, user namespaces refused…), or None if it can.

    Starts one trial sandbox, as `user` if given, exactly as a run would (minus the network).
    """
    if bwrap is None:
        return "bubblewrap is not installed (the `bwrap` command; on Debian/Ubuntu: sudo apt-get install bubblewrap)"
    argv = bwrap_argv(bwrap=bwrap, mounts=python_mounts(python), runner=runner, allow_network=False, scratch_mb=1)
    argv += ["--", python, "-I", "-S", "-c", f"open({RUNNER_IN_SANDBOX!r}).close()"]
    ids = {"user": user, "group": user, "extra_groups": []} if user is not None else {}
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=30,
            env={"PATH": "/usr/bin:/bin"},
            stdin=subprocess.DEVNULL,
            cwd="/",
            **ids,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap could not start: {exc}"
    if proc.returncode != 0:
        detail = (proc.stderr.strip() or f"exit code {proc.returncode}").splitlines()[-1]
        return f"bubblewrap could not create the sandbox's namespaces ({detail})"
    return None
