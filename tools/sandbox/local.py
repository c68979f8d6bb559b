"""Local sandbox: each run is a fresh `python -I -S` process, inside bubblewrap namespaces (`bwrap.py`).

Isolation, in layers:
- namespaces (the default): the run gets its own user, mount, PID, IPC, UTS and network namespaces, so
  it sees only /usr, its interpreter (or venv), a private directory, /tmp and /dev/shm (capped tmpfs, gone)
  — no data directory, no /run sockets, no other process — and no network unless the request allows
  it. This needs unprivileged user namespaces, not root; where they are unavailable runs are refused
  unless the operator allowed the weak mode (`allow_weak_isolation`), which keeps only the layers below;
- environment: the child gets only the tool's env vars plus PATH/HOME/TMPDIR/LANG, never ours (namespaced,
  the runner sets them from the payload: bwrap, which runs outside the namespaces, gets a fixed set);
- identity: when the server runs as root, bwrap (or, in the weak mode, the tool) runs as a throwaway
  uid/gid from `uid_range` (one per concurrent run, held by a lock file), so RLIMIT_NPROC binds (it is
  ignored for root) and a stray process can be found and killed by uid;
- resources: RLIMIT_CPU/AS/FSIZE/NPROC/CORE are set by the runner before the tool's source is even
  compiled (not in a `preexec_fn`, which is unsafe in a threaded server); wall time is enforced here;
- lifetime: the child leads its own session; when it exits or times out we kill its process group.
  Namespaced, killing bwrap ends the PID namespace, taking every process the tool started; the result
  is returned as soon as it is complete and a reaper thread waits for the teardown. Weak, we kill what
  its throwaway uid still owns and delete what it left in /tmp, /var/tmp and /dev/shm;
- start-up: the next sandboxes, namespaced or weak, are started ahead (`warm.py`), so a run rarely waits for one;
  each is used by one run and discarded.

The weak mode without root runs the tool as the server's user: env, cwd, limits and timeouts still
apply, but file permissions, /proc/<server>/environ and the network do not protect the server.
"""

from __future__ import annotations

import hashlib
import json
import logging
import marshal
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace

from tools.sandbox import live
from tools.sandbox.base import (
    RUNNER_PATH,
    SandboxBackend,
    SandboxError,
    SandboxRequest,
    SandboxResult,
    elapsed_ms,
    error_result,
    network_blocked_said,
    result_from_runner,
    truncate_output,
    validate_request,
)
from tools.sandbox.bwrap import (
    BWRAP_SEARCH_PATH,
    EGRESS_SOCKET_IN_SANDBOX,
    RELAY_IN_SANDBOX,
    RUNNER_IN_SANDBOX,
    SANDBOX_HOME,
    bwrap_argv,
    find_bwrap,
    probe,
    python_mounts,
)
from tools.sandbox.cancel import register_stop
from tools.sandbox.egress import RELAY_PORT, egress_proxy, proxy_env
from tools.sandbox.process import (
    REAPER,
    Pump,
    UidLease,
    count_uid_tasks,
    kill_run,
    kill_uid_processes,
    owned_dir,
    reap,
)
from tools.sandbox.venvs import Installer, ensure_venv
from tools.sandbox.warm import DEFAULT_SIZE as WARM_DEFAULT_SIZE
from tools.sandbox.warm import WARM, Spawned

logger = logging.getLogger(__name__)

BASE_PATH = "/usr/local/bin:/usr/bin:/bin"
WEAK_ISOLATION_SETTING = "SANDBOX_LOCAL_WEAK_ISOLATION"
_SIGNAL_MEANING = {
    signal.SIGXCPU: "CPU time limit exceeded",
    signal.SIGXFSZ: "file size limit exceeded",
    signal.SIGKILL: "killed (CPU hard limit or out of memory)",
    signal.SIGSEGV: "segmentation fault",
}
_SIGNAL_NUMBERS = {int(s) for s in signal.Signals}
_PAYLOAD_FORMAT = "marshal"  # see _runner.py: the runner then needn't import json
_RESULT_FD = "fd:RESULT"  # placeholder in argv until the pipe exists
# Drops a root server's child to its throwaway uid and gid with no supplementary groups, then execs the sandbox.
SETPRIV = shutil.which("setpriv", path=BWRAP_SEARCH_PATH)


class LocalSandbox(SandboxBackend):
    """Runs tools in local subprocesses (see the module docstring for the isolation it gives).

    `isolation`: None picks namespaces when they work here, else the weak mode if
    `allow_weak_isolation`, else refuses every run; "namespaces" or "weak" forces one. `warm`: how many
    sandboxes to keep started ahead per profile (`warm.py`; True: the default, 2; False or 0: none).
    `egress_allow`: internal destinations a run with network may reach through the egress proxy (None: the
    deployment's settings, `core.egress.allowances`).
    """

    name = "local"

    def __init__(
        self,
        *,
        python_executable: str | None = None,
        uid_range: tuple[int, int] = (52000, 59999),
        drop_privileges: bool | None = None,
        allow_pip_install: bool = False,
        venv_cache_dir: str | None = None,
        work_root: str | None = None,
        max_result_bytes: int = 8 * 1024 * 1024,
        installer: Installer | None = None,
        isolation: str | None = None,
        allow_weak_isolation: bool = False,
        bwrap: str | None = None,
        warm: bool | int = True,
        egress_allow: list[str] | None = None,
    ):
        if isolation not in (None, "namespaces", "weak"):
            raise ValueError(f"isolation must be None, 'namespaces' or 'weak', not {isolation!r}")
        self.drop_privileges = (os.geteuid() == 0) if drop_privileges is None else drop_privileges
        self.work_root = work_root or tempfile.gettempdir()
        self.python_executable = python_executable or find_interpreter(world_accessible=self.drop_privileges)
        self.uid_range = uid_range
        self.allow_pip_install = allow_pip_install
        self.venv_cache_dir = venv_cache_dir or os.path.join(self.work_root, "agents-ide-tool-venvs")
        self.max_result_bytes = max_result_bytes
        self.installer = installer
        self.isolation = isolation
        self.allow_weak_isolation = allow_weak_isolation
        self.bwrap = bwrap or find_bwrap()
        self.warm = WARM_DEFAULT_SIZE if warm is True else max(0, int(warm))  # sandboxes kept waiting (0: none)
        self.egress_allow = None if egress_allow is None else tuple(egress_allow)

    def isolation_status(self) -> tuple[str, str | None]:
        """How runs are isolated here — "namespaces", "weak" or "refused" — and why namespaces are unavailable.

        The first call per (bwrap, interpreter, identity) starts one trial sandbox; success is kept, a failure
        is retried after `PROBE_RETRY_S`.
        """
        if self.isolation == "weak":
            return "weak", None
        reason = self._namespaces_unavailable()
        if reason is None:
            return "namespaces", None
        return ("weak" if self.isolation is None and self.allow_weak_isolation else "refused"), reason

    def _namespaces_unavailable(self) -> str | None:
        key = (self.bwrap, self.python_executable, self.drop_privileges)
        with _status_lock:
            known = _namespace_status.get(key)
            if known is None or (known[0] is not None and time.monotonic() - known[1] > PROBE_RETRY_S):
                runner = shared_copy(self.work_root, RUNNER_PATH)
                lease = UidLease.acquire(self.uid_range, self.work_root) if self.drop_privileges else None
                try:
                    reason = probe(
                        bwrap=self.bwrap,
                        python=self.python_executable,
                        runner=runner,
                        user=lease.uid if lease else None,
                    )
                finally:
                    if lease:
                        kill_uid_processes(lease.uid)
                        lease.release()
                known = _namespace_status[key] = (reason, time.monotonic())
            return known[0]

    def run(self, request: SandboxRequest) -> SandboxResult:
        """Run the tool in a fresh sandboxed subprocess (may build a venv; starts the next warm sandbox)."""
        started = time.monotonic()
        try:
            validate_request(request)
            mode, reason = self.isolation_status()
            if mode == "refused":
                raise SandboxError(refusal_message(reason))
            python = self._python(request)
            if mode == "namespaces":
                return self._run_namespaced(request, python, started)
        except (SandboxError, OSError) as exc:
            return error_result(backend=self.name, started=started, error_type="SandboxError", message=str(exc))
        return self._run_weak(request, python, started)

    def _python(self, request: SandboxRequest) -> str:
        if not request.pip_requirements:
            return self.python_executable
        return ensure_venv(
            interpreter=self.python_executable,
            requirements=request.pip_requirements,
            cache_dir=self.venv_cache_dir,
            allow_install=self.allow_pip_install,
            installer=self.installer,
        )

    def _run_namespaced(self, request, python, started) -> SandboxResult:
        network = request.allow_network
        argv = bwrap_argv(
            bwrap=self.bwrap,
            mounts=python_mounts(python),
            runner=shared_copy(self.work_root, RUNNER_PATH),
            allow_network=network,
            scratch_mb=request.limits.scratch_mb,
            relay=shared_copy(self.work_root, RELAY_PATH) if network else None,
            egress_socket=egress_proxy(self.work_root, self.egress_allow).socket_path if network else None,
        )
        argv.append("--")
        if network:  # the relay forwards the run's loopback port to the egress proxy, then starts the runner
            argv += [python, "-I", "-S", RELAY_IN_SANDBOX, "--proxy", EGRESS_SOCKET_IN_SANDBOX, str(RELAY_PORT), "--"]
        argv += _runner_argv(python, RUNNER_IN_SANDBOX, site=bool(request.pip_requirements))
        # bwrap runs outside the namespaces, so it gets a fixed environment; the runner sets the tool's own.
        env = {"PATH": BASE_PATH, "HOME": SANDBOX_HOME, "TMPDIR": "/tmp", "LANG": "C.UTF-8"}

        def spawn() -> Spawned:
            lease = UidLease.acquire(self.uid_range, self.work_root) if self.drop_privileges else None
            try:
                return self._spawn(argv, "/", env, lease)
            except BaseException:
                if lease:
                    lease.release()
                raise

        # Nothing but this command line decides what a sandbox is, so one started ahead is as fresh as a new one.
        key = (tuple(argv), self.drop_privileges, self.uid_range, self.work_root)
        spawned = self._warm_or_new(key, spawn)
        # The run's user namespace counts only its own processes, bwrap's init among them.
        return self._collect(
            request,
            spawned,
            started,
            nproc=request.limits.max_processes + (3 if network else 1),  # bwrap's init (and the relay's 2 tasks)
            network=network,
            namespaced=True,
            tool_env={**env, **(proxy_env() if network else {}), **request.env_vars},
        )

    def _run_weak(self, request, python, started) -> SandboxResult:
        argv = _runner_argv(python, shared_copy(self.work_root, RUNNER_PATH), site=bool(request.pip_requirements))

        def spawn() -> Spawned:
            # Its own directory and (root servers) its own uid, made with it: a warm one is as fresh as a new one.
            lease = UidLease.acquire(self.uid_range, self.work_root) if self.drop_privileges else None
            workdir = None
            try:
                workdir = tempfile.mkdtemp(prefix="tool-run-", dir=self.work_root)
                if lease:
                    os.chown(workdir, lease.uid, lease.uid)
                os.chmod(workdir, 0o700)
                env = {"PATH": BASE_PATH, "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8"}
                return replace(self._spawn(argv, workdir, env, lease), workdir=workdir)
            except BaseException:
                if workdir:
                    shutil.rmtree(workdir, ignore_errors=True)
                if lease:
                    lease.release()
                raise

        key = ("weak", tuple(argv), self.drop_privileges, self.uid_range, self.work_root)
        try:
            spawned = self._warm_or_new(key, spawn)
        except (OSError, SandboxError) as exc:
            return error_result(
                backend=self.name,
                started=started,
                error_type="SandboxError",
                network=True,
                message=f"could not start the sandbox process: {exc}",
            )
        # The runner sets the tool's environment from the payload, as a namespaced run's.
        tool_env = {"PATH": BASE_PATH, "HOME": spawned.workdir, "TMPDIR": spawned.workdir, "LANG": "C.UTF-8"}
        # Without our own uid, NPROC counts all of the server user's processes too.
        nproc = request.limits.max_processes + (0 if spawned.lease else count_uid_tasks(os.getuid()))
        return self._collect(
            request,
            spawned,
            started,
            nproc=nproc,
            network=True,
            namespaced=False,
            tool_env={**tool_env, **request.env_vars},
        )

    def _warm_or_new(self, key: tuple, spawn) -> Spawned:
        """A sandbox started ahead for this profile if one waits (or is about to), else one started now; either
        way replacements are started in the background (`warm.py`)."""
        if not self.warm:
            return spawn()
        spawned = WARM.take(key) or spawn()
        WARM.refill(key, spawn, self.warm)
        return spawned

    def _spawn(self, argv, cwd, env, lease) -> Spawned:
        """Start the sandbox process as `lease`'s uid if given; it waits for its payload on stdin.

        The uid is dropped by `setpriv` (util-linux) in the child rather than by Popen's `user=`: with `user=`
        Python must fork the whole server (copying its page tables, several milliseconds holding the GIL for a
        server of a few hundred MB), without it Python can vfork. Where setpriv is missing, Popen drops it."""
        ids = {}
        if lease and SETPRIV:
            argv = [SETPRIV, f"--reuid={lease.uid}", f"--regid={lease.uid}", "--clear-groups", "--", *argv]
        elif lease:
            ids = {"user": lease.uid, "group": lease.uid, "extra_groups": []}
        result_r, result_w = os.pipe()
        try:
            proc = subprocess.Popen(
                _fd3_argv(argv, result_w),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(result_w,),
                cwd=cwd,
                env=env,
                start_new_session=True,
                **ids,
            )
        except BaseException:
            os.close(result_r)
            raise
        finally:
            os.close(result_w)
        return Spawned(proc, result_r, lease)

    def _collect(
        self, request, spawned: Spawned, started, *, nproc, network, namespaced, tool_env=None
    ) -> SandboxResult:
        """Give the sandbox its payload, enforce wall time and output caps, and read its result."""
        ready_ms = elapsed_ms(started)  # the process is up (or was taken warm): the rest is the tool's own run
        limits = request.limits
        payload = request.payload()
        payload["limits"] = {
            "cpu_s": limits.cpu_s,
            "memory_mb": limits.memory_mb,
            "file_size_mb": limits.file_size_mb,
            "nproc": nproc,
        }
        if tool_env is not None:
            payload["env"] = tool_env
        proc, lease = spawned.proc, spawned.lease
        # Namespaced, killing bwrap ends the whole PID namespace; weak, the throwaway uid's processes are killed too.
        stop = (lambda: kill_run(proc, None)) if namespaced else (lambda: kill_run(proc, lease))
        io = Pump(
            proc,
            spawned.result_r,
            _encode_payload(payload),
            limits.max_output_bytes,
            self.max_result_bytes,
            early=True,
            on_output=live.listener(),
            # A complete result: kill the process group at once; what else the run left (its uid's processes, its
            # files) is swept by the reaper before the uid is free again, after the result is returned.
            on_complete=lambda: kill_run(proc, None),
        )
        register_stop(stop)
        try:
            # The wall clock starts with the payload: building a venv first must not eat the tool's time.
            io.run(deadline=time.monotonic() + request.timeout_s, on_finish=stop)
        finally:
            # Killed already; waiting for the teardown needn't delay a complete result.
            (REAPER.reap if io.result_complete else reap)(proc, lease, spawned.workdir)
        return replace(self._result(request, proc, io, started, network, namespaced), start_ms=ready_ms)

    def _result(self, request, proc, io: Pump, started, network: bool, namespaced: bool) -> SandboxResult:
        stdout = truncate_output(io.data["stdout"], io.total["stdout"], request.limits.max_output_bytes)
        stderr = truncate_output(io.data["stderr"], io.total["stderr"], request.limits.max_output_bytes)
        common = {"backend": self.name, "started": started, "stdout": stdout, "stderr": stderr, "network": network}
        if io.timed_out:
            return error_result(
                **common,
                error_type="TimeoutError",
                message=f"tool exceeded the wall-time limit of {request.timeout_s:g} s and was killed",
            )
        if io.total["result"] > self.max_result_bytes:
            return error_result(
                **common,
                error_type="ResultTooLarge",
                message=f"the return value exceeded {self.max_result_bytes} bytes",
            )
        raw = io.data["result"]
        if raw:
            try:
                result = result_from_runner(json.loads(raw), **common)
            except ValueError:
                pass
            else:
                return result if network or not namespaced else network_blocked_said(result)
        code = proc.returncode
        if namespaced and code is not None and code > 128 and (code - 128) in _SIGNAL_NUMBERS:
            code = 128 - code  # bwrap exits 128+N when the tool was killed by signal N
        if code is not None and code < 0:
            sig = signal.Signals(-code)
            meaning = _SIGNAL_MEANING.get(sig, "killed by a signal")
            return error_result(**common, error_type="SandboxKilled", message=f"{meaning} ({sig.name})")
        return error_result(
            **common, error_type="NoResult", message=f"the tool process exited (code {code}) without reporting a result"
        )


def refusal_message(reason: str | None) -> str:
    """Why local runs are refused, and the operator's ways out."""
    return (
        f"local tool runs are refused: {reason}. Install bubblewrap and allow unprivileged user namespaces, "
        f"use the e2b backend, or set {WEAK_ISOLATION_SETTING}=1 to run tools without namespaces (no file "
        f"or network isolation)"
    )


def log_isolation_status(backend: LocalSandbox) -> str:
    """Log how local tool runs are isolated on this machine (starts one trial sandbox); returns the mode."""
    mode, reason = backend.isolation_status()
    if mode == "namespaces":
        logger.info("local tool sandbox: bubblewrap namespaces (%s)", backend.bwrap)
    elif mode == "weak" and reason:
        logger.warning(
            "local tool sandbox: %s; %s is set, so local tools run WITHOUT namespaces: no file or network isolation",
            reason,
            WEAK_ISOLATION_SETTING,
        )
    elif mode == "refused":
        logger.error("local tool sandbox: %s", refusal_message(reason))
    return mode


# A working sandbox stays known for the process's lifetime; a failure is tried again after a while (the
# operator may install bubblewrap or enable user namespaces without restarting the server).
PROBE_RETRY_S = 60.0
_status_lock = threading.Lock()
_namespace_status: dict[tuple, tuple[str | None, float]] = {}


def _runner_argv(python: str, runner: str, *, site: bool) -> list[str]:
    # -S drops site-packages; a venv's python keeps site on, for the venv's packages.
    return [python, "-I", *([] if site else ["-S"]), runner, "fd:0", _RESULT_FD, _PAYLOAD_FORMAT]


def _encode_payload(payload: dict) -> bytes:
    try:
        return marshal.dumps(payload, 4)
    except ValueError:  # not plain data (e.g. a datetime in agent_state): send what JSON would
        return marshal.dumps(json.loads(json.dumps(payload, default=str)), 4)


def _fd3_argv(argv: list[str], result_w: int) -> list[str]:
    """Tell the runner the inherited fd number of the result pipe (pass_fds keeps numbers)."""
    return [f"fd:{result_w}" if a == _RESULT_FD else a for a in argv]


_copies_lock = threading.Lock()
_copies: dict[tuple[str, str], str] = {}
RELAY_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_relay.py")


def shared_copy(work_root: str, source_path: str) -> str:
    """A world-readable copy of one of our sandbox scripts (the child may not be able to read our source tree)."""
    with _copies_lock:
        path = _copies.get((work_root, source_path))
        if path and os.path.exists(path):
            return path
        with open(source_path, "rb") as f:
            source = f.read()
        directory = owned_dir(
            os.path.join(work_root, f"agents-ide-runner-{hashlib.sha256(source).hexdigest()[:12]}"), 0o755
        )
        path = os.path.join(directory, os.path.basename(source_path))
        fd, tmp = tempfile.mkstemp(dir=directory)
        with os.fdopen(fd, "wb") as f:
            f.write(source)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        _copies[(work_root, source_path)] = path
        return path


def find_interpreter(*, world_accessible: bool) -> str:
    """A Python 3 the sandbox user can execute (our own venv may live under a 0700 /root)."""
    candidates = [os.path.realpath(sys.executable), os.path.realpath(getattr(sys, "_base_executable", "") or "")]
    candidates += [shutil.which(n, path=BASE_PATH) or "" for n in ("python3", "python")]
    for path in candidates:
        if path and os.access(path, os.X_OK) and (not world_accessible or _others_can_execute(path)):
            return path
    raise SandboxError("no Python interpreter executable by the sandbox user; pass python_executable=")


def _others_can_execute(path: str) -> bool:
    path = os.path.realpath(path)
    if not os.stat(path).st_mode & stat.S_IXOTH:
        return False
    parent = os.path.dirname(path)
    while True:
        if not os.stat(parent).st_mode & stat.S_IXOTH:
            return False
        if parent == "/":
            return True
        parent = os.path.dirname(parent)
