"""Warm sandboxes: a run's process started ahead, so a run need not wait for bwrap and Python to start.

A warm sandbox is exactly the process a run would start — same namespaces (or, in the weak mode, the same
throwaway directory and uid), mounts, interpreter and limits-to-be — blocked reading its payload: the tool's
source, arguments, environment and limits all arrive there. Each is used by ONE run and then discarded (a
process is never reused between runs or tenants); when a run takes one, replacements are started in the
background for the same profile (command line), by a few long-lived threads. At most `size` wait per
profile (`SANDBOX_WARM_POOL`, default 2), for the last `max_keys` profiles used; a run that finds none
waiting but one starting waits for that one rather than starting another. Waiting sandboxes die with the
server: namespaced ones through bwrap's --die-with-parent, all of them when their payload pipe closes
(the runner exits on an empty payload), and at interpreter exit they are killed (`clear`).
"""

from __future__ import annotations

import atexit
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from tools.sandbox.base import SandboxError
from tools.sandbox.process import UidLease, kill_uid_processes

DEFAULT_SIZE = 2  # sandboxes kept waiting per profile (SANDBOX_WARM_POOL)
MAX_WORKERS = 4  # threads starting sandboxes at once, at most
TAKE_WAIT_S = 10.0  # how long a run waits for a sandbox already starting before it starts its own


@dataclass
class Spawned:
    """A started sandbox process that has not been given its payload yet."""

    proc: subprocess.Popen
    result_r: int  # read end of the result pipe
    lease: UidLease | None  # the throwaway uid it runs as (root servers)
    workdir: str | None = None  # its private host directory (weak mode), removed with it

    def discard(self) -> None:
        """Kill it unused and release what it holds."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            f.close()
        os.close(self.result_r)
        self.proc.wait()
        if self.workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        if self.lease:
            kill_uid_processes(self.lease.uid)
            self.lease.release()


class WarmSandboxes:
    """Ready-started sandboxes keyed by profile (thread-safe; refilled by background threads)."""

    def __init__(self, max_keys: int = 4):
        self.max_keys = max_keys
        self._init()

    def _init(self) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._ready: OrderedDict[tuple, list[Spawned]] = OrderedDict()
        self._filling: dict[tuple, int] = {}
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._workers: list[threading.Thread] = []
        self._idle = 0  # workers waiting for a job
        self._closed = False

    def take(self, key: tuple, wait_s: float = TAKE_WAIT_S) -> Spawned | None:
        """A waiting sandbox for `key`, still alive (it is now the caller's); if none waits but one is being
        started, the caller waits for it up to `wait_s` (it is ready sooner than one started now would be)."""
        deadline = time.monotonic() + wait_s
        while True:
            with self._changed:
                while not self._ready.get(key) and self._filling.get(key) and not self._closed:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._changed.wait(remaining)
                waiting = self._ready.get(key)
                spawned = waiting.pop(0) if waiting else None
            if spawned is None:
                return None
            if spawned.proc.poll() is None:
                return spawned
            spawned.discard()  # died while waiting (killed from outside): try the next

    def refill(self, key: tuple, spawn: Callable[[], Spawned], size: int = DEFAULT_SIZE) -> None:
        """Start sandboxes for `key` in the background until `size` wait or are being started."""
        with self._lock:
            if self._closed:
                return
            missing = size - len(self._ready.get(key, ())) - self._filling.get(key, 0)
            if missing <= 0:
                return
            self._filling[key] = self._filling.get(key, 0) + missing
            # Threads that live as long as the process: bwrap --die-with-parent kills a sandbox when the thread
            # that started it ends, so a thread per refill would kill what it started.
            wanted = min(MAX_WORKERS, len(self._workers) + missing - self._idle)
            while len(self._workers) < wanted:
                worker = threading.Thread(target=self._work, name="warm-sandboxes", daemon=True)
                self._workers.append(worker)
                worker.start()
        for _ in range(missing):
            self._jobs.put((key, spawn))

    def _work(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            job = self._jobs.get()
            with self._lock:
                self._idle -= 1
            self._fill(*job)

    def _fill(self, key: tuple, spawn: Callable[[], Spawned]) -> None:
        try:
            spawned = None if self._closed else spawn()
        except (OSError, SandboxError):
            spawned = None  # the next run starts its own and reports why
        evicted = []
        with self._changed:
            left = self._filling.get(key, 1) - 1
            if left > 0:
                self._filling[key] = left
            else:
                self._filling.pop(key, None)
            if spawned is not None and self._closed:
                evicted.append(spawned)
            elif spawned is not None:
                self._ready.setdefault(key, []).append(spawned)
                self._ready.move_to_end(key)
                while len(self._ready) > self.max_keys:
                    evicted += self._ready.popitem(last=False)[1]
            self._changed.notify_all()
        for old in evicted:
            old.discard()

    def waiting(self) -> int:
        """How many sandboxes wait now (all profiles)."""
        with self._lock:
            return sum(len(v) for v in self._ready.values())

    def _after_fork(self) -> None:
        # A forked server process has neither the worker threads nor the parent's sandboxes: start afresh.
        self._init()

    def clear(self) -> None:
        """Discard every waiting sandbox."""
        with self._changed:
            waiting = [s for v in self._ready.values() for s in v]
            self._ready = OrderedDict()
            self._changed.notify_all()
        for spawned in waiting:
            spawned.discard()

    def close(self) -> None:
        """Discard every waiting sandbox and start no more (at interpreter exit)."""
        with self._lock:
            self._closed = True
        self.clear()


WARM = WarmSandboxes()
os.register_at_fork(after_in_child=WARM._after_fork)
atexit.register(WARM.close)
