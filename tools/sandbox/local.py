"""Local sandbox: each run is a fresh `python -I -S` subprocess in a throwaway directory.

Isolation, in layers:
- environment: the child gets only the tool's env vars plus PATH/HOME/TMPDIR/LANG, never ours;
- identity: when the server runs as root, the child runs as a throwaway uid/gid taken from
  `uid_range` (one per concurrent run, held by a lock file), so it cannot read root's 0700 data
  directory, write outside its own directory or world-writable places, signal the server or other
  runs, and RLIMIT_NPROC (ignored for root) counts only this run's processes;
- resources: RLIMIT_CPU/AS/FSIZE/NPROC/CORE are set by the runner before the tool's source is even
  compiled (not in a `preexec_fn`, which is unsafe in a threaded server); wall time is enforced here;
- lifetime: the child leads its own session; when it exits or times out we kill its process group
  and, when it has its own uid, every process still owned by that uid (daemons that called setsid)
  and every file it left in /tmp, /var/tmp or /dev/shm (the only places outside its directory it
  can write to).

Without root the child runs as the server's user: env, cwd, limits and timeouts still apply, but
file permissions and /proc/<server>/environ do not protect the server. Run the server as root in a
container or use the e2b backend for untrusted tools.
"""

from __future__ import annotations

import hashlib
import json
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

from tools.sandbox.base import (
    RUNNER_PATH,
    SandboxBackend,
    SandboxError,
    SandboxRequest,
    SandboxResult,
    error_result,
    result_from_runner,
    truncate_output,
    validate_request,
)
from tools.sandbox.process import Pump, UidLease, count_uid_tasks, kill_run, kill_uid_processes, owned_dir, remove_uid_files
from tools.sandbox.venvs import Installer, ensure_venv

BASE_PATH = "/usr/local/bin:/usr/bin:/bin"
_SIGNAL_MEANING = {
    signal.SIGXCPU: "CPU time limit exceeded",
    signal.SIGXFSZ: "file size limit exceeded",
    signal.SIGKILL: "killed (CPU hard limit or out of memory)",
    signal.SIGSEGV: "segmentation fault",
}
_PAYLOAD_FORMAT = "marshal"  # see _runner.py: the runner then needn't import json
_RESULT_FD = "fd:RESULT"  # placeholder in argv until the pipe exists


class LocalSandbox(SandboxBackend):
    """Runs tools in local subprocesses (see the module docstring for the isolation it gives)."""

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
    ):
        self.drop_privileges = (os.geteuid() == 0) if drop_privileges is None else drop_privileges
        self.work_root = work_root or tempfile.gettempdir()
        self.python_executable = python_executable or find_interpreter(world_accessible=self.drop_privileges)
        self.uid_range = uid_range
        self.allow_pip_install = allow_pip_install
        self.venv_cache_dir = venv_cache_dir or os.path.join(self.work_root, "agents-ide-tool-venvs")
        self.max_result_bytes = max_result_bytes
        self.installer = installer

    def run(self, request: SandboxRequest) -> SandboxResult:
        """Run the tool in a fresh subprocess (creates and deletes a temp dir; may build a venv)."""
        started = time.monotonic()
        try:
            validate_request(request)
            argv = self._argv(request)
            lease = UidLease.acquire(self.uid_range, self.work_root) if self.drop_privileges else None
        except (SandboxError, OSError) as exc:
            return error_result(backend=self.name, started=started, error_type="SandboxError", message=str(exc))
        workdir = tempfile.mkdtemp(prefix="tool-run-", dir=self.work_root)
        try:
            if lease:
                os.chown(workdir, lease.uid, lease.uid)
            os.chmod(workdir, 0o700)
            return self._spawn_and_collect(request, argv, workdir, lease, started)
        finally:
            if lease:
                kill_uid_processes(lease.uid)
                remove_uid_files(lease.uid)
                lease.release()
            shutil.rmtree(workdir, ignore_errors=True)

    def _argv(self, request: SandboxRequest) -> list[str]:
        runner = _shared_runner_path(self.work_root)
        if not request.pip_requirements:
            return [self.python_executable, "-I", "-S", runner, "fd:0", _RESULT_FD, _PAYLOAD_FORMAT]
        python = ensure_venv(
            interpreter=self.python_executable,
            requirements=request.pip_requirements,
            cache_dir=self.venv_cache_dir,
            allow_install=self.allow_pip_install,
            installer=self.installer,
        )
        return [python, "-I", runner, "fd:0", _RESULT_FD, _PAYLOAD_FORMAT]  # site stays on: the venv's packages

    def _spawn_and_collect(self, request, argv, workdir, lease, started) -> SandboxResult:
        env = {"PATH": BASE_PATH, "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8", **request.env_vars}
        limits = request.limits
        payload = request.payload()
        payload["limits"] = {
            "cpu_s": limits.cpu_s,
            "memory_mb": limits.memory_mb,
            "file_size_mb": limits.file_size_mb,
            # Without our own uid, NPROC counts all of the server user's processes too.
            "nproc": limits.max_processes + (0 if lease else count_uid_tasks(os.getuid())),
        }
        result_r, result_w = os.pipe()
        try:
            proc = subprocess.Popen(
                _fd3_argv(argv, result_w),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(result_w,),
                cwd=workdir,
                env=env,
                start_new_session=True,
                **({"user": lease.uid, "group": lease.uid, "extra_groups": []} if lease else {}),
            )
        except OSError as exc:
            os.close(result_r)
            return error_result(backend=self.name, started=started, error_type="SandboxError",
                                message=f"could not start the sandbox process: {exc}")
        finally:
            os.close(result_w)
        io = Pump(proc, result_r, _encode_payload(payload), limits.max_output_bytes, self.max_result_bytes)
        # The wall clock starts at spawn: building a venv first must not eat the tool's time.
        io.run(deadline=time.monotonic() + request.timeout_s, on_finish=lambda: kill_run(proc, lease))
        return self._result(request, proc, io, started)

    def _result(self, request, proc, io: Pump, started) -> SandboxResult:
        stdout = truncate_output(io.data["stdout"], io.total["stdout"], request.limits.max_output_bytes)
        stderr = truncate_output(io.data["stderr"], io.total["stderr"], request.limits.max_output_bytes)
        common = {"backend": self.name, "started": started, "stdout": stdout, "stderr": stderr}
        if io.timed_out:
            return error_result(**common, error_type="TimeoutError",
                                message=f"tool exceeded the wall-time limit of {request.timeout_s:g} s and was killed")
        if io.total["result"] > self.max_result_bytes:
            return error_result(**common, error_type="ResultTooLarge",
                                message=f"the return value exceeded {self.max_result_bytes} bytes")
        raw = io.data["result"]
        if raw:
            try:
                return result_from_runner(json.loads(raw), **common)
            except ValueError:
                pass
        code = proc.returncode
        if code is not None and code < 0:
            sig = signal.Signals(-code)
            meaning = _SIGNAL_MEANING.get(sig, "killed by a signal")
            return error_result(**common, error_type="SandboxKilled", message=f"{meaning} ({sig.name})")
        return error_result(**common, error_type="NoResult",
                            message=f"the tool process exited (code {code}) without reporting a result")


def _encode_payload(payload: dict) -> bytes:
    try:
        return marshal.dumps(payload, 4)
    except ValueError:  # not plain data (e.g. a datetime in agent_state): send what JSON would
        return marshal.dumps(json.loads(json.dumps(payload, default=str)), 4)


def _fd3_argv(argv: list[str], result_w: int) -> list[str]:
    """Tell the runner the inherited fd number of the result pipe (pass_fds keeps numbers)."""
    return [f"fd:{result_w}" if a == _RESULT_FD else a for a in argv]


_runner_lock = threading.Lock()
_runner_paths: dict[str, str] = {}


def _shared_runner_path(work_root: str) -> str:
    """A world-readable copy of the runner (the child may not be able to read our source tree)."""
    with _runner_lock:
        path = _runner_paths.get(work_root)
        if path and os.path.exists(path):
            return path
        with open(RUNNER_PATH, "rb") as f:
            source = f.read()
        directory = owned_dir(
            os.path.join(work_root, f"agents-ide-runner-{hashlib.sha256(source).hexdigest()[:12]}"), 0o755
        )
        path = os.path.join(directory, "_runner.py")
        fd, tmp = tempfile.mkstemp(dir=directory)
        with os.fdopen(fd, "wb") as f:
            f.write(source)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        _runner_paths[work_root] = path
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
