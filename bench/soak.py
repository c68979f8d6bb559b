"""Memory over many sends: the server's resident memory as one agent answers message after message (prints figures).

    .venv/bin/python bench/soak.py [--sends 10000] [--every 1000] [--warm-up 2000] [--agents 1] [--tracemalloc 25]

Starts the server (agents_ide.serve, as scripts/serve does) on a throwaway SQLite database with the fake LLM as its
`openai` provider, and sends `--sends` messages one after another through `POST /v1/agents/{id}/messages` (over
`--agents` agents in turn). It prints the server's RSS after `--warm-up` sends and then every `--every` sends, with
the sends' latency in that stretch. Flat after warm-up is the target: anything that grows with each send (a cache
without a bound, a list kept per run) shows as a steady climb. The warm-up is long enough for the process's bounded
caches to fill: the stored messages' (4 MiB, core/agents/context.py) takes about 2,000 of these sends.

`--tracemalloc N` gives the server a SIGUSR1 handler, loaded from a sitecustomize module this script writes: the
first signal (after warm-up) starts Python's tracemalloc keeping N frames, each later one dumps a snapshot. The
script takes one at the first reading after warm-up and one at the end, and prints where the memory allocated in
between still lives (tracing slows the sends several times; the RSS figures of such a run include its own cost).
"""

import argparse
import os
import signal
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import httpx
from benchlib import ROOT, django_ready, live_server, machine_speed_s, p50_p95, rss_mb, throwaway_sqlite

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

# Loaded by the server's interpreter at start (PYTHONPATH): the first SIGUSR1 starts tracing, each later one collects
# garbage and dumps a snapshot, written under a temporary name and renamed, so the file appears whole.
SITECUSTOMIZE = """
import gc, os, signal, tracemalloc

_taken = [0]


def _on_signal(signum, frame):
    if not tracemalloc.is_tracing():
        tracemalloc.start(int(os.environ["SOAK_TRACEMALLOC_FRAMES"]))
        return
    _taken[0] += 1
    path = os.path.join(os.environ["SOAK_SNAPSHOTS"], f"snapshot-{_taken[0]}")
    gc.collect()  # garbage waiting for the collector is not growth
    tracemalloc.take_snapshot().dump(path + ".part")
    os.rename(path + ".part", path)


signal.signal(signal.SIGUSR1, _on_signal)
"""


def _setup(agents: int):
    """An account and its agents on the fake LLM's model; the token and the agents' ids."""
    django_ready()
    from tests.factories import make_account, make_agent

    account = make_account("soak")
    return account.token, [make_agent(account.org, name=f"soak-{i}").id for i in range(agents)]


def _snapshot(server, directory: Path, number: int) -> tracemalloc.Snapshot:
    server.send_signal(signal.SIGUSR1)
    path = directory / f"snapshot-{number}"
    deadline = time.monotonic() + 600
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"the server wrote no snapshot {path}")
        time.sleep(0.2)
    return tracemalloc.Snapshot.load(str(path))


def _growth(before: tracemalloc.Snapshot, after: tracemalloc.Snapshot, top: int = 25) -> None:
    """Print the places (by the innermost frame of this project, else the innermost frame) holding the most memory
    allocated since `before`."""
    ignore = [
        tracemalloc.Filter(False, tracemalloc.__file__),
        tracemalloc.Filter(False, "<frozen importlib._bootstrap*"),
    ]
    before, after = before.filter_traces(ignore), after.filter_traces(ignore)
    print(
        f"tracemalloc: {sum(s.size for s in before.statistics('filename')) / 1e6:.1f} MB traced at the first "
        f"snapshot, {sum(s.size for s in after.statistics('filename')) / 1e6:.1f} MB at the last"
    )
    for stat in after.compare_to(before, "traceback")[:top]:
        if stat.size_diff <= 0:
            continue
        frames = list(stat.traceback)
        ours = [f for f in frames if str(ROOT) in f.filename and "/.venv/" not in f.filename]
        where = " <- ".join(f"{Path(f.filename).name}:{f.lineno}" for f in (ours or frames)[-3:][::-1])
        inner = frames[-1]
        print(
            f"  {stat.size_diff / 1024:+9.1f} KiB {stat.count_diff:+7d} blocks  "
            f"{inner.filename.split('site-packages/')[-1]}:{inner.lineno}  (ours: {where})"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sends", type=int, default=10_000)
    p.add_argument("--every", type=int, default=1000, help="sends between two readings of the server's memory")
    p.add_argument(
        "--warm-up", type=int, default=2000, help="sends before the first reading (the bounded caches fill meanwhile)"
    )
    p.add_argument("--agents", type=int, default=1, help="agents the sends go to, in turn")
    p.add_argument("--tracemalloc", type=int, default=0, metavar="FRAMES", help="trace the server's allocations")
    args = p.parse_args()

    sys.path.insert(0, str(ROOT))
    from tests.fake_llm import FakeLLM

    speed = machine_speed_s()
    throwaway_sqlite("bench-soak-")
    llm = FakeLLM().start()
    token, agents = _setup(args.agents)
    env = {**os.environ, "OPENAI_API_KEY": "fake", "OPENAI_BASE_URL": llm.base_url}
    snapshots = Path(tempfile.mkdtemp(prefix="bench-soak-snapshots-"))
    if args.tracemalloc:
        (snapshots / "sitecustomize.py").write_text(SITECUSTOMIZE)
        env |= {
            "SOAK_TRACEMALLOC_FRAMES": str(args.tracemalloc),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(snapshots), env.get("PYTHONPATH")])),
            "SOAK_SNAPSHOTS": str(snapshots),
        }
    print(f"machine's loop {speed:.2f} s; {args.sends} sends to {args.agents} agent(s), fake LLM without delay")
    try:
        with (
            live_server(env, "soak") as (base, server),
            httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=120) as client,
        ):
            print(f"server started: RSS {rss_mb(server.pid):.0f} MB")
            times: list[float] = []
            warm = first = None
            for n in range(1, args.sends + 1):
                started = time.perf_counter()
                answer = client.post(f"/v1/agents/{agents[n % len(agents)]}/messages", json={"input": f"note {n}"})
                times.append((time.perf_counter() - started) * 1000)
                answer.raise_for_status()
                if n == args.warm_up or (n > args.warm_up and (n - args.warm_up) % args.every == 0):
                    rss = rss_mb(server.pid)
                    warm = warm or rss
                    print(
                        f"after {n:6d} sends: RSS {rss:7.1f} MB ({rss - warm:+6.1f} since warm-up)  "
                        f"sends {p50_p95(times)}",
                        flush=True,
                    )
                    times.clear()
                    llm.clear()
                    if args.tracemalloc and n == args.warm_up:
                        server.send_signal(signal.SIGUSR1)  # tracing starts
                    elif args.tracemalloc and first is None:
                        first = _snapshot(server, snapshots, 1)
            if first is not None:
                _growth(first, _snapshot(server, snapshots, 2))
    finally:
        llm.stop()


if __name__ == "__main__":
    main()
