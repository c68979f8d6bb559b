"""Documents parsed in a process of their own (memory.files.parse_child), so a hostile file costs that process,
never the server's threads, memory or lock turns: it runs under memory (RLIMIT_AS), CPU (RLIMIT_CPU) and file-size
limits at a lower priority, and its parent kills it past the wall-clock limit or as soon as `wanted()` says the
file is no longer wanted (deleted). At most FOLDER_PARSE_PROCESSES of them run at once per server process.

A zip-based document's declared listing is checked here first, so an obvious bomb never starts a process; plain
text (bounded by the upload limit, nothing to unpack) is read in this process.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from memory.files import types
from memory.files.archive import ArchiveRefused, archive_listing_check
from memory.files.limits import ParseLimits
from memory.files.parse import ZIPPED, Parsed, ParseError, parse, text_bounded
from memory.files.parse_child import text_file_cap

POLL_S = 0.2  # how soon a deleted file's parser is stopped
ROOT = Path(__file__).resolve().parents[2]  # `python -m memory.files.parse_child` runs from here

_running: dict[str, int] = {}
_running_lock = threading.Lock()
_slots: threading.BoundedSemaphore | None = None


class Cancelled(Exception):
    """The file stopped being wanted (deleted) while it was parsed; its parser was killed."""


def parse_processes() -> dict[str, int]:
    """The parser processes this process runs now: the key each was started for → its pid."""
    with _running_lock:
        return dict(_running)


def _parse_slots() -> threading.BoundedSemaphore:
    global _slots
    if _slots is None:
        from django.conf import settings  # lazy: read when first needed, never at import

        _slots = threading.BoundedSemaphore(max(1, int(getattr(settings, "FOLDER_PARSE_PROCESSES", 2))))
    return _slots


def parse_isolated(
    *, data: bytes, mime: str, file_name: str, limits: ParseLimits, wanted: Callable[[], bool], key: str
) -> Parsed:
    """The text of an upload, parsed in a limited process of its own; ParseError with the reason (a limit passed
    among them), Cancelled when `wanted()` turns false meanwhile (checked every POLL_S; the process is killed)."""
    if types.is_plain(mime):
        return parse(data=data, mime=mime, file_name=file_name, limits=limits)
    if mime in ZIPPED:
        try:
            archive_listing_check(data, limits=limits.archive)
        except ArchiveRefused as exc:
            raise ParseError(str(exc)) from None
    slots = _parse_slots()
    while not slots.acquire(timeout=POLL_S):
        if not wanted():
            raise Cancelled
    try:
        with tempfile.TemporaryDirectory(prefix="aide-parse-") as work:
            return _run(Path(work), data=data, mime=mime, file_name=file_name, limits=limits, wanted=wanted, key=key)
    finally:
        slots.release()


def _run(work: Path, *, data, mime, file_name, limits: ParseLimits, wanted, key: str) -> Parsed:
    (work / "input").write_bytes(data)
    request = {"mime": mime, "file_name": file_name, "limits": limits.to_dict()}
    (work / "request.json").write_text(json.dumps(request))
    with open(work / "stderr", "wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-E", "-s", "-m", "memory.files.parse_child", str(work)],
            cwd=ROOT,
            env=_child_env(work),  # none of the server's secrets: the parser reads hostile input
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    with _running_lock:
        _running[key] = process.pid
    try:
        _wait(process, limits, wanted)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        with _running_lock:
            _running.pop(key, None)
    return _result(work, process.returncode, limits)


def _child_env(work: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": str(work),
        "TMPDIR": str(work),
        "HF_HUB_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
    }


def _wait(process: subprocess.Popen, limits: ParseLimits, wanted: Callable[[], bool]) -> None:
    deadline = time.monotonic() + limits.timeout_s
    while True:
        try:
            process.wait(timeout=POLL_S)
            return
        except subprocess.TimeoutExpired:
            pass
        if not wanted():
            raise Cancelled
        if time.monotonic() > deadline:
            raise ParseError(f"Parsing the file took longer than {limits.timeout_s:g} s")


def _result(work: Path, returncode: int, limits: ParseLimits) -> Parsed:
    if returncode != 0:
        raise ParseError(_stopped(returncode, limits, work / "stderr"))
    result = json.loads((work / "result.json").read_text())
    if "error" in result:
        raise ParseError(result["error"])
    text_path = work / "text"
    if text_path.stat().st_size > text_file_cap(limits):
        raise ParseError(f"The file's text is longer than {limits.max_chars:,} characters")
    text = text_bounded(text_path.read_text(encoding="utf-8", errors="surrogatepass"), limits=limits)
    return Parsed(text=text, pages=int(result["pages"]))


def _stopped(returncode: int, limits: ParseLimits, stderr: Path) -> str:
    """Why the parser's process ended without a result, for a person."""
    if returncode == -signal.SIGXCPU:
        return f"Parsing the file used more than {limits.cpu_s} s of CPU"
    if returncode == -signal.SIGKILL:  # past the hard CPU limit, or the machine's out-of-memory killer
        return f"The parser was killed: more than {limits.cpu_s} s of CPU, or the machine ran out of memory"
    if returncode == -signal.SIGXFSZ:
        return f"The file's text is longer than {limits.max_chars:,} characters"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = str(-returncode)
        return f"The parser stopped on signal {name} (the file may need more than {limits.memory_mb} MB of memory)"
    tail = stderr.read_bytes()[-2000:].decode("utf-8", "replace").strip().splitlines()
    # Out of memory, Python may print more after the MemoryError's traceback (an "Exception ignored in ..." of a
    # finalizer that could not run): any MemoryError in the tail says why.
    if any("MemoryError" in line for line in tail):
        return f"Parsing the file needs more than {limits.memory_mb} MB of memory"
    return f"The parser failed: {tail[-1][:300] if tail else f'exit status {returncode}'}"
