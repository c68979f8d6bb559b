"""The parser's own process: `python -m memory.files.parse_child DIR` limits itself, parses DIR/input as
DIR/request.json says and writes DIR/text and DIR/result.json (memory.files.isolate starts it and reads them).

It limits its address space (RLIMIT_AS), CPU time (RLIMIT_CPU, then SIGKILL past the hard limit), the files it writes
(RLIMIT_FSIZE: the text's limit) and core dumps before reading the input, lowers its priority so the server's requests
come first, parses XML with the standard library defused (entity expansion and external references refused:
mammoth reads DOCX with minidom), and exits when its parent is gone. No Django here.
"""

import json
import os
import resource
import sys
import threading
import time
from pathlib import Path

from memory.files.limits import MB, ParseLimits
from memory.files.parse import ParseError, parse

PARENT_POLL_S = 1.0
NICENESS = 10


def _limit(limits: ParseLimits) -> None:
    memory = limits.memory_mb * MB
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 5))
    written = text_file_cap(limits)
    resource.setrlimit(resource.RLIMIT_FSIZE, (written, written))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.nice(NICENESS)


def text_file_cap(limits: ParseLimits) -> int:
    """The most bytes the text file may hold: four per character (UTF-8) and room for the result."""
    return limits.max_chars * 4 + 64 * 1024


def _watch_parent(parent: int) -> None:
    # Orphaned (the server was killed), nobody will read the result: stop rather than burn the CPU limit.
    while True:
        time.sleep(PARENT_POLL_S)
        if os.getppid() != parent:
            os._exit(3)


def _parse(work: Path, request: dict, limits: ParseLimits) -> dict:
    import defusedxml  # after the limits: nothing of the input is read before them

    defusedxml.defuse_stdlib()
    try:
        parsed = parse(
            data=(work / "input").read_bytes(), mime=request["mime"], file_name=request["file_name"], limits=limits
        )
    except ParseError as exc:
        return {"error": str(exc)}
    except MemoryError:
        return {"error": f"Parsing the file needs more than {limits.memory_mb} MB of memory"}
    (work / "text").write_text(parsed.text, encoding="utf-8", errors="surrogatepass")
    return {"pages": parsed.pages}


def main(directory: str) -> None:
    work = Path(directory)
    request = json.loads((work / "request.json").read_text())
    limits = ParseLimits.from_dict(request["limits"])
    _limit(limits)
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    result = _parse(work, request, limits)
    (work / "result.tmp").write_text(json.dumps(result))
    os.replace(work / "result.tmp", work / "result.json")  # whole or absent: the parent never reads half of it


if __name__ == "__main__":
    main(sys.argv[1])
