"""Warm sandboxes: the next namespaced run's process started ahead, so a run need not wait for bwrap and Python.

A warm sandbox is exactly the process a run would start — same namespaces, mounts, interpreter and uid —
blocked reading its payload (the tool's source, arguments, environment and limits all arrive there). Each
is used by one run and never again; when a run takes one, the next is started in the background for the
same command line, by one long-lived thread. At most one waits per command line, for the last few used.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from tools.sandbox.base import SandboxError
from tools.sandbox.process import UidLease, kill_uid_processes


@dataclass
class Spawned:
    """A started sandbox process that has not been given its payload yet."""

    proc: subprocess.Popen
    result_r: int  # read end of the result pipe
    lease: UidLease | None  # the throwaway uid it runs as (root servers)

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
        if self.lease:
            kill_uid_processes(self.lease.uid)
            self.lease.release()


class WarmSandboxes:
    """Ready-started sandboxes keyed by command line (thread-safe; refills in background threads)."""

    def __init__(self, max_keys: int = 4):
        self.max_keys = max_keys
        self._lock = threading.Lock()
        self._ready: OrderedDict[tuple, Spawned] = OrderedDict()
        self._filling: set[tuple] = set()
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._worker: threading.Thread | None = None

    def take(self, key: tuple) -> Spawned | None:
        """The waiting sandbox for `key`, if there is one still alive (it is now the caller's)."""
        with self._lock:
            spawned = self._ready.pop(key, None)
        if spawned is not None and spawned.proc.poll() is not None:
            spawned.discard()
            return None
        return spawned

    def refill(self, key: tuple, spawn: Callable[[], Spawned]) -> None:
        """Start a sandbox for `key` in the background unless one is waiting or being started."""
        with self._lock:
            if key in self._ready or key in self._filling:
                return
            self._filling.add(key)
            if self._worker is None:
                # One thread for the process's lifetime: bwrap --die-with-parent kills a sandbox when the
                # thread that started it ends, so a thread per refill would kill what it started.
                self._worker = threading.Thread(target=self._work, name="warm-sandboxes", daemon=True)
                self._worker.start()
        self._jobs.put((key, spawn))

    def _work(self) -> None:
        while True:
            self._fill(*self._jobs.get())

    def _fill(self, key: tuple, spawn: Callable[[], Spawned]) -> None:
        try:
            spawned = spawn()
        except (OSError, SandboxError):
            spawned = None  # the next run starts its own and reports why
        evicted = []
        with self._lock:
            self._filling.discard(key)
            if spawned is not None:
                self._ready[key] = spawned
                while len(self._ready) > self.max_keys:
                    evicted.append(self._ready.popitem(last=False)[1])
        for old in evicted:
            old.discard()

    def _after_fork(self) -> None:
        # A forked server process has neither the worker thread nor the parent's sandboxes: start afresh.
        self._lock = threading.Lock()
        self._ready, self._filling = OrderedDict(), set()
        self._jobs, self._worker = queue.SimpleQueue(), None

    def clear(self) -> None:
        """Discard every waiting sandbox."""
        with self._lock:
            waiting, self._ready = list(self._ready.values()), OrderedDict()
        for spawned in waiting:
            spawned.discard()


WARM = WarmSandboxes()
os.register_at_fork(after_in_child=WARM._after_fork)
