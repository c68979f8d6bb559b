"""Local sandbox latency: p50/p90 wall time per run for a trivial tool and a stdlib-importing tool.

Usage: .venv/bin/python bench/sandbox.py [--n 50] [--isolation namespaces|weak] [--network] [--cold] [--pool 2]
                                         [--gap-ms 0]

Runs go back to back unless --gap-ms spaces them (as an agent's LLM calls do), which gives the sandboxes started
ahead (tools/sandbox/warm.py, --pool of them per profile, SANDBOX_WARM_POOL in a server) time to start; --cold
starts every sandbox on demand. Besides wall time it prints the CPU a run costs: this process's and the sandbox
processes' (reaped children), the latter mostly Python's start-up.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from benchlib import machine_speed_s  # noqa: E402

from tools.sandbox.base import SandboxRequest  # noqa: E402
from tools.sandbox.selection import get_backend  # noqa: E402

TRIVIAL = '''
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: First.
        b: Second.
    """
    return a + b
'''

STDLIB = '''
import collections, datetime, json, math, re

def summarise(text: str) -> str:
    """Count words.

    Args:
        text: Input.
    """
    words = re.findall(r"\\w+", text.lower())
    top = collections.Counter(words).most_common(3)
    return json.dumps({"top": top, "sqrt": math.sqrt(len(words)), "at": datetime.date(2024, 1, 1).isoformat()})
'''

CASES = [
    ("trivial", TRIVIAL, "add", {"a": 1, "b": 2}),
    ("stdlib imports", STDLIB, "summarise", {"text": "the cat and the hat and the bat"}),
]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=50, help="runs per case (after 3 warm-up runs)")
    parser.add_argument(
        "--isolation",
        choices=["namespaces", "weak"],
        default=None,
        help="force one mode (default: namespaces where user namespaces work)",
    )
    parser.add_argument("--network", action="store_true", help="runs allowed the network (no network namespace)")
    parser.add_argument("--cold", action="store_true", help="no warm sandboxes: start each one on demand")
    parser.add_argument("--pool", type=int, default=2, help="sandboxes kept started ahead per profile")
    parser.add_argument("--gap-ms", type=float, default=0.0, help="pause between runs (not measured)")
    opts = parser.parse_args()
    backend = get_backend("local", isolation=opts.isolation, warm=0 if opts.cold else opts.pool)
    mode, reason = backend.isolation_status()
    print(
        f"local sandbox: isolation={mode}{f' ({reason})' if reason else ''} network={opts.network} "
        f"warm={0 if opts.cold else opts.pool} gap={opts.gap_ms:g} ms python={backend.python_executable} "
        f"drop_privileges={backend.drop_privileges} n={opts.n}; machine's loop {machine_speed_s():.2f} s"
    )
    for label, source, fn, args in CASES:
        request = SandboxRequest(source_code=source, function_name=fn, args=args, allow_network=opts.network)
        for _ in range(3):
            backend.run(request)
            time.sleep(opts.gap_ms / 1000)
        wall = []
        time.sleep(0.5)  # the warm-up's teardown
        cpu, children = time.process_time(), _children_cpu()
        for _ in range(opts.n):
            time.sleep(opts.gap_ms / 1000)
            t0 = time.perf_counter()
            result = backend.run(request)
            wall.append((time.perf_counter() - t0) * 1000)
            if result.status != "success":
                raise SystemExit(f"{label}: run failed: {result.error_type}: {result.error_message}")
        cpu = (time.process_time() - cpu) * 1000 / opts.n
        time.sleep(0.5)  # the last runs' teardown, so their CPU is counted
        children = (_children_cpu() - children) * 1000 / opts.n
        print(
            f"{label:15s} p50={percentile(wall, 0.5):6.1f} ms  p90={percentile(wall, 0.9):6.1f} ms  "
            f"mean={statistics.fmean(wall):6.1f} ms  max={max(wall):6.1f} ms  "
            f"cpu/run: this process {cpu:.1f} ms, sandbox processes {children:.1f} ms"
        )


if __name__ == "__main__":
    main()
