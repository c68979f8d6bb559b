"""Which process executes a run, and whether that process still exists.

A lease names the process that holds it (`IDENTITY`): the kernel's boot id, the pid namespace and the process's start
time, then host and pid (for people to read). The boot id, the namespace and the start time let another process on the same machine tell for certain
that the holder is gone — its pid no longer exists in the same pid namespace since the same boot, or now belongs to
a process started later — so a restarted server fails the runs its predecessor died holding at once, instead of
waiting for their leases to lapse. Processes on other machines or in other pid namespaces (another container) are
never judged: only their lease says they died. Without /proc (not Linux) the identity is host and pid, and the lease
alone decides.
"""

import os
import socket
from functools import cache
from pathlib import Path

_SEP = "|"


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _start_ticks(pid: int) -> str:
    """The process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat), or "" if it does not exist.
    The command name (field 2) may hold spaces and parentheses, so the fields are counted after its last ')'."""
    stat = _read(f"/proc/{pid}/stat")
    fields = stat[stat.rfind(")") + 2 :].split() if stat else []
    return fields[19] if len(fields) > 19 else ""


@cache  # fixed for the process's life
def _namespace() -> str:
    """This machine since its boot and this pid namespace: where a pid names the same process for everyone."""
    boot = _read("/proc/sys/kernel/random/boot_id")
    try:
        pidns = os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""
    return f"{boot}/{pidns}" if boot else ""


def identity() -> str:
    """This process's identity as a lease records it: `namespace|start|host:pid` where /proc tells the first two, else
    `host:pid`."""
    pid, where = os.getpid(), _namespace()
    start = _start_ticks(pid) if where else ""
    plain = f"{socket.gethostname()}:{pid}"
    return f"{where}{_SEP}{start}{_SEP}{plain}" if start else plain


IDENTITY = identity()


def local_marker() -> str:
    """What the identity of every process in this machine's pid namespace starts with ("" when /proc cannot tell)."""
    where = _namespace()
    return f"{where}{_SEP}" if where else ""


def process_gone(worker: str) -> bool:
    """Whether the process a lease names is known to be dead: it ran in this machine's pid namespace since this boot,
    and its pid now names no process, or one started at another time. False whenever that cannot be known."""
    parts = worker.split(_SEP)
    if len(parts) != 3 or not parts[1] or parts[0] != _namespace():
        return False
    try:
        pid = int(parts[2].rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return False
    return _start_ticks(pid) != parts[1]
