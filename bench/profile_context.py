"""Where a context read's CPU goes, in-process: `GET /v1/agents/{id}/context` through Django's test client against a
throwaway SQLite database, for an agent with the default tools after 55 sends (as Letta's yardstick reads it) (prints figures; no assertions).

    .venv/bin/python bench/profile_context.py [--reads 300] [--top 30] [--no-profile]

Prints Python function calls per read (cProfile's total: deterministic, the figure to compare across machines and
versions), CPU per read without the profiler, SQL statements per read, and the functions by cumulative and own time.
"""

import argparse
import cProfile
import io
import os
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agents_ide.settings")

from benchlib import machine_speed_s, throwaway_sqlite  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reads", type=int, default=300)
    p.add_argument("--rounds", type=int, default=5, help="CPU measured in this many rounds of --reads (min shown)")
    p.add_argument("--messages", type=int, default=55, help="sends before the reads (the yardstick's 5 + 50)")
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--no-profile", action="store_true")
    p.add_argument(
        "--cold", action="store_true", help="forget the compiled contexts before each read (a read after a change)"
    )
    args = p.parse_args()

    speed = machine_speed_s()
    throwaway_sqlite("bench-context-")
    from tests.fake_llm import FakeLLM

    llm = FakeLLM(latency=0).start()
    os.environ.update(OPENAI_API_KEY="fake", OPENAI_BASE_URL=llm.base_url)
    from benchlib import django_ready

    django_ready()
    from django.db import connection
    from django.test import Client

    from tests.factories import make_account, make_agent

    account = make_account("bench")
    agent = make_agent(account.org, name="profiled")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {account.token}")
    for i in range(args.messages):
        r = client.post(f"/v1/agents/{agent.id}/messages", {"input": f"hello {i}"}, content_type="application/json")
        assert r.status_code == 200, r.content[:300]
    llm.stop()
    path = f"/v1/agents/{agent.id}/context"

    from core.agents import context

    def read() -> None:
        if args.cold:
            context._compiled.clear()
        r = client.get(path)
        assert r.status_code == 200, r.content[:300]

    for _ in range(20):
        read()
    statements = []
    with connection.execute_wrapper(lambda execute, sql, *rest: statements.append(sql) or execute(sql, *rest)):
        read()
    cpus = []
    for _ in range(args.rounds):
        before = time.process_time()
        for _ in range(args.reads):
            read()
        cpus.append((time.process_time() - before) * 1000 / args.reads)
    print(f"{args.reads} reads x {args.rounds} rounds; machine's loop {speed:.2f} s")
    print(f"CPU per read: min {min(cpus):.3f} ms, rounds {', '.join(f'{c:.3f}' for c in cpus)}")
    print(f"SQL statements per read: {len(statements)}")
    print(f"response bytes: {len(client.get(path).content)}")
    if args.no_profile:
        return
    profile = cProfile.Profile(time.process_time)
    profile.enable()
    for _ in range(args.reads):
        read()
    profile.disable()
    stats = pstats.Stats(profile)
    print(f"Python function calls per read: {stats.total_calls / args.reads:.0f}")
    if os.environ.get("PROFILE_DUMP"):
        stats.dump_stats(os.environ["PROFILE_DUMP"])
    for order in ("cumulative", "tottime"):
        out = io.StringIO()
        stats.stream = out
        stats.sort_stats(order).print_stats(args.top)
        print(out.getvalue())


if __name__ == "__main__":
    main()
