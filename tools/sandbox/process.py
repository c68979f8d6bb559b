"""Process plumbing for the local sandbox: the I/O pump, throwaway-uid leases, killing leftovers and reaping."""

from __future__ import annotations

import fcntl
import os
import queue
import random
import selectors
import shutil
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tools.sandbox.base import SandboxError

GRACE_S = 2.0  # after exit/timeout, how long to keep draining pipes once everything is killed


@dataclass
class Pump:
    """Feeds the payload to stdin and drains stdout/stderr/result with caps until the run is over."""

    proc: subprocess.Popen
    result_fd: int
    payload: bytes
    max_output: int
    max_result: int
    data: dict = field(default_factory=lambda: {"stdout": bytearray(), "stderr": bytearray(), "result": bytearray()})
    total: dict = field(default_factory=lambda: {"stdout": 0, "stderr": 0, "result": 0})
    timed_out: bool = False
    # Stop as soon as the result's final newline arrives (killing the run) instead of waiting for the
    # process to exit; `result_complete` then says the process may still be dying.
    early: bool = False
    result_complete: bool = False
    # Given what the tool writes to stdout/stderr as it arrives (within the cap), for a page that follows the run.
    on_output: Callable[[str, bytes], None] | None = None
    # How to stop the run once its result is complete (`early`); default: `on_finish`.
    on_complete: Callable[[], None] | None = None

    def run(self, *, deadline: float, on_finish: Callable[[], None]) -> None:
        sel = selectors.DefaultSelector()
        readers = {self.proc.stdout.fileno(): "stdout", self.proc.stderr.fileno(): "stderr", self.result_fd: "result"}
        for fd, name in readers.items():
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ, name)
        stdin_fd = self.proc.stdin.fileno()
        os.set_blocking(stdin_fd, False)
        sel.register(stdin_fd, selectors.EVENT_WRITE, "stdin")
        pidfd = os.pidfd_open(self.proc.pid)
        sel.register(pidfd, selectors.EVENT_READ, "exit")
        pending, finished = memoryview(self.payload), False
        try:
            while sel.get_map():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    if finished:
                        break  # something survived the kill and still holds a pipe: give up on it
                    self.timed_out, finished = True, True
                    on_finish()
                    deadline = time.monotonic() + GRACE_S
                    continue
                for key, _ in sel.select(remaining):
                    name = key.data
                    if name == "stdin":
                        pending = self._write(sel, stdin_fd, pending)
                    elif name == "exit":
                        sel.unregister(pidfd)
                        if not finished:
                            finished = True
                            on_finish()
                            deadline = min(deadline, time.monotonic() + GRACE_S)
                    else:
                        self._read(sel, key.fd, name)
                        if name == "result" and self.early and self.data[name].endswith(b"\n"):
                            # The runner flushed stdout/stderr before writing its result: take what they hold.
                            self._drain(sel)
                            if not finished:
                                (self.on_complete or on_finish)()
                            self.result_complete = finished = True
                            return
        finally:
            sel.close()
            os.close(pidfd)
            for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                f.close()
            os.close(self.result_fd)
            if not finished:
                on_finish()
            if not self.result_complete:
                self.proc.wait()

    def _drain(self, sel) -> None:
        for key in list(sel.get_map().values()):
            if key.data in ("stdout", "stderr"):
                while key.fd in sel.get_map() and self._read(sel, key.fd, key.data):
                    pass

    def _write(self, sel, fd, pending: memoryview) -> memoryview:
        try:
            pending = pending[os.write(fd, pending) :]
        except (BrokenPipeError, OSError):
            pending = pending[:0]
        if not pending:
            sel.unregister(fd)
            self.proc.stdin.close()
        return pending

    def _read(self, sel, fd, name) -> bool:
        """Read one chunk; False when there is nothing (more) to read now."""
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return False
        except OSError:
            chunk = b""
        if not chunk:
            sel.unregister(fd)
            return False
        cap = self.max_result + 1 if name == "result" else self.max_output
        self.total[name] += len(chunk)
        if len(self.data[name]) < cap:
            kept = chunk[: cap - len(self.data[name])]
            self.data[name] += kept
            if self.on_output is not None and name != "result":
                self.on_output(name, kept)
        return True


def kill_run(proc: subprocess.Popen, lease: UidLease | None) -> None:
    """Kill the run's process group (the child is a zombie or alive, so the group id is still ours)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if lease:
        kill_uid_processes(lease.uid)


def reap(proc: subprocess.Popen, lease: UidLease | None, workdir: str | None = None) -> None:
    """Wait for a killed run's process to be gone, then free its uid (sweeping anything left of it: its processes,
    and for a run without namespaces, `workdir` and its files in the shared temporary directories)."""
    proc.wait()
    if lease:
        kill_uid_processes(lease.uid)
        if workdir:
            remove_uid_files(lease.uid)
    if workdir:
        shutil.rmtree(workdir, ignore_errors=True)
    if lease:
        lease.release()


class Reaper:
    """Reaps killed runs on one background thread, so a result needn't wait for its sandbox's teardown."""

    def __init__(self):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None
        os.register_at_fork(after_in_child=self._after_fork)

    def reap(self, proc: subprocess.Popen, lease: UidLease | None, workdir: str | None = None) -> None:
        with self._lock:
            if self._worker is None:
                self._worker = threading.Thread(target=self._work, name="sandbox-reaper", daemon=True)
                self._worker.start()
        self._jobs.put((proc, lease, workdir))

    def _work(self) -> None:
        while True:
            reap(*self._jobs.get())

    def _after_fork(self) -> None:
        self._jobs, self._lock, self._worker = queue.SimpleQueue(), threading.Lock(), None


REAPER = Reaper()


def _uid_pids(uid: int):
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    yield int(entry)
            except FileNotFoundError:
                continue


def count_uid_tasks(uid: int) -> int:
    """Processes plus threads of `uid`: what RLIMIT_NPROC counts."""
    total = 0
    for pid in _uid_pids(uid):
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                total += int(f.read().rsplit(b")", 1)[1].split()[17])
        except (FileNotFoundError, IndexError, ValueError):
            continue
    return total


def kill_uid_processes(uid: int, rounds: int = 50) -> None:
    """SIGKILL every live process owned by `uid` (repeat: a fork bomb may fork while we kill)."""
    if uid == 0 or uid == os.getuid():
        raise SandboxError("refusing to kill processes of the server's own user")
    for _ in range(rounds):
        alive = [pid for pid in _uid_pids(uid) if not _is_zombie(pid)]
        if not alive:
            return
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.005)


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except (FileNotFoundError, IndexError, ProcessLookupError):
        return True


class UidLease:
    """Exclusive use of one uid from the range, across threads and server processes (flock)."""

    def __init__(self, uid: int, lock_file):
        self.uid, self._lock_file = uid, lock_file

    @classmethod
    def acquire(cls, uid_range: tuple[int, int], work_root: str) -> UidLease:
        lock_dir = owned_dir(os.path.join(work_root, "agents-ide-sandbox-uids"))
        low, high = uid_range
        for _ in range(200):
            uid = random.randint(low, high)
            f = open(os.path.join(lock_dir, str(uid)), "w")
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                f.close()
                continue
            if next(_uid_pids(uid), None) is not None:
                # Leftovers (e.g. zombies an init that doesn't reap still holds) would eat the NPROC budget.
                f.close()
                continue
            return cls(uid, f)
        raise SandboxError(f"no free sandbox uid in {low}-{high}; too many concurrent runs")

    def release(self) -> None:
        self._lock_file.close()


def owned_dir(path: str, mode: int = 0o700) -> str:
    """Create (or verify) a directory only we can write; /tmp is shared, so refuse one someone else planted."""
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise SandboxError(f"{path} is not a directory owned by the server user and closed to others")
    os.chmod(path, mode)  # mkdir's mode is filtered by the umask
    return path


SHARED_WRITABLE_DIRS = ("/tmp", "/var/tmp", "/dev/shm")


def remove_uid_files(uid: int, dirs: tuple[str, ...] = SHARED_WRITABLE_DIRS) -> None:
    """Delete what a finished run left in world-writable directories (its processes are already dead)."""
    if uid == 0 or uid == os.getuid():
        raise SandboxError("refusing to delete files of the server's own user")
    for directory in dirs:
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    os.unlink(entry.path)
            except OSError:
                continue
