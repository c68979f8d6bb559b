"""Where one send's CPU goes, in-process: the API's sends through Django's test client, profiled function by function
(cProfile with each thread's CPU clock, on every thread that works on them) with their SQL statements counted (prints figures; no assertions).

    .venv/bin/python bench/profile_send.py [--mode sync|async] [--sends 200] [--top 40]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/profile_send.py

Mode `sync`: `POST /v1/agents/{id}/messages` (the run executes on the request's thread). Mode `async` (the
concurrency bench's send): `POST …/messages/async`, then the run on a pool thread, waited for before the next send.
The fake model answers at once, over loopback from a thread of this process (its own CPU is counted too, apart).
A throwaway database: a temp SQLite file, or a `bench_profile_send` PostgreSQL database. Prints CPU per send
(this process, all threads), SQL statements per send by kind, and the functions by cumulative and own time.
Profiling slows Python code about twice, so the profile's shares, not its times, are what to read.
"""

import argparse
import collections
import cProfile
import io
import os
import pstats
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agents_ide.settings")

from benchlib import machine_speed_s, scratch_postgres, throwaway_sqlite  # noqa: E402


def _database() -> None:
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith("postgres"):
        os.environ["DATABASE_URL"] = scratch_postgres("create", admin_url=url, name="bench_profile_send")
        os.environ["REDIS_URL"] = ""
    else:
        throwaway_sqlite("bench-profile-")


class Statements:
    """Counts the SQL statements of every connection opened from now on, by their first word (BEGIN included on
    SQLite, where Django issues it as a statement)."""

    def __init__(self) -> None:
        self.counts: collections.Counter = collections.Counter()
        self.on = False
        self.lock = threading.Lock()
        self.last: list[str] = []  # the statements of the last send, in order, with the thread that ran each

    def __call__(self, execute, sql, params, many, context):
        if self.on:
            with self.lock:
                self.counts[sql.split(None, 1)[0].upper()] += 1
                self.last.append(f"{threading.current_thread().name[:14]:<14} {sql[:150]}")
        return execute(sql, params, many, context)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=["sync", "async"], default="sync")
    p.add_argument("--sends", type=int, default=200)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--top", type=int, default=45)
    p.add_argument("--no-profile", action="store_true", help="CPU and statements only")
    p.add_argument("--dump", metavar="PATH", help="write the merged pstats here")
    p.add_argument("--sql", action="store_true", help="print the statements of the last send")
    args = p.parse_args()

    speed = machine_speed_s()
    _database()
    from tests.fake_llm import FakeLLM

    llm = FakeLLM(latency=0).start()
    os.environ.update(OPENAI_API_KEY="fake", OPENAI_BASE_URL=llm.base_url, RUN_WORKER_THREADS="4")
    from benchlib import django_ready

    django_ready()
    from django.db import connection
    from django.db.backends.signals import connection_created
    from django.test import Client

    from core.models import Run
    from core.runs import executor
    from tests.factories import make_account, make_agent

    statements = Statements()

    def wrap(sender, connection, **kwargs):
        connection.execute_wrappers.append(statements)

    connection_created.connect(wrap)
    connection.close()  # this thread's connection is opened again, wrapped

    account = make_account("bench")
    agent = make_agent(account.org, name="profiled")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {account.token}")
    path = f"/v1/agents/{agent.id}/messages" + ("/async" if args.mode == "async" else "")

    def send(i: int) -> None:
        r = client.post(path, {"input": f"hello {i}"}, content_type="application/json")
        assert r.status_code == 200, r.content[:300]
        if args.mode == "async":
            executor.run_wait(run=Run.objects.get(pk=r.json()["id"]), timeout=30)

    profiles: list[cProfile.Profile] = []
    profiles_lock = threading.Lock()

    def thread_profile(frame, event, arg):  # a thread started from now on profiles itself
        profile = cProfile.Profile(time.thread_time)  # CPU time: a thread waiting on a socket or a lock costs nothing
        with profiles_lock:
            profiles.append(profile)
        profile.enable()

    if not args.no_profile:  # before the warm-up, which starts the pool's threads the sends' runs reuse
        threading.setprofile(thread_profile)
        thread_profile(None, "call", None)
    for i in range(args.warmup):
        send(-1 - i)
    for profile in profiles:  # the threads are idle between sends: what they profiled so far is the warm-up's
        profile.clear()
    cpu_before = time.process_time()
    wall_before = time.perf_counter()
    statements.on = True
    for i in range(args.sends):
        statements.last = []
        send(i)
    statements.on = False
    if profiles:
        profiles[0].disable()
        threading.setprofile(None)
    cpu = time.process_time() - cpu_before
    wall = time.perf_counter() - wall_before
    llm.stop()

    print(f"{args.sends} sends, mode {args.mode}, {connection.vendor}; machine's loop {speed:.2f} s")
    print(
        f"CPU per send (this process, fake model included): {cpu * 1000 / args.sends:.2f} ms; wall {wall * 1000 / args.sends:.2f} ms"
    )
    total = sum(statements.counts.values())
    kinds = ", ".join(f"{k} {v / args.sends:.1f}" for k, v in statements.counts.most_common())
    print(f"SQL statements per send: {total / args.sends:.1f} ({kinds})")
    if args.sql:
        print("the last send's statements (the bench's own wait for the run's end among them):")
        print("\n".join(statements.last))
    if args.no_profile:
        return
    stats = pstats.Stats(profiles[0])
    for profile in profiles[1:]:
        try:
            stats.add(profile)
        except (TypeError, ValueError):  # a thread that never profiled anything
            pass
    if args.dump:
        stats.dump_stats(args.dump)
    for order in ("cumulative", "tottime"):
        out = io.StringIO()
        stats.stream = out
        stats.sort_stats(order).print_stats(args.top)
        print(out.getvalue())


if __name__ == "__main__":
    main()
