"""Where archival insert and search spend their CPU, in-process: Letta's yardstick requests
(`POST /v1/agents/{id}/archival-memory` {"text"}, `GET /v1/agents/{id}/archival-memory/search?query=&top_k=5`, as
../shared/bench/letta_overhead.py sends them) through Django's test client, each embedded through the agent's
embedding model served by the tests' fake OpenAI-compatible server on a thread of this process (its CPU is not
counted: the figures are the request thread's CPU clock). Prints figures; no assertions.

    .venv/bin/python bench/profile_archival.py [--requests 300] [--rounds 3] [--profile] [--sql]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/profile_archival.py

Inserts go to one agent, searches to another holding --passages passages (the yardstick's 55). Per kind of request: CPU of the request's thread per request (rounds of inserts and searches in turns, median
round), SQL statements per request by first word, and with --profile the Python function calls per request
(cProfile's total) and the functions by cumulative time. The agents have their own embedding handle, as the
yardstick's `embedding_config` gives them (`--embedding env` leaves it empty and sets EMBEDDING_MODEL instead).
A throwaway database: a temp SQLite file, or a `bench_profile_archival` PostgreSQL database.
"""

import argparse
import collections
import cProfile
import io
import logging
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agents_ide.settings")

from benchlib import machine_speed_s, scratch_postgres, throwaway_sqlite  # noqa: E402

EMBEDDING = "openai/fake-embedding"


def _database() -> str:
    """The admin URL of the PostgreSQL server the scratch database is on ("" on SQLite)."""
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith("postgres"):
        os.environ["DATABASE_URL"] = scratch_postgres(
            "create", admin_url=url, name="bench_profile_archival", extensions=("vector",)
        )
        os.environ["REDIS_URL"] = ""
        return url
    throwaway_sqlite("bench-profile-archival-")
    return ""


class Statements:
    """Counts this process's SQL statements by first word while `on` (BEGIN included on SQLite)."""

    def __init__(self) -> None:
        self.counts: collections.Counter = collections.Counter()
        self.on = False
        self.last: list[str] = []

    def __call__(self, execute, sql, params, many, context):
        if self.on:
            self.counts[sql.split(None, 1)[0].upper()] += 1
            self.last.append(sql[:160])
        return execute(sql, params, many, context)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=300, help="of each kind, per round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--passages", type=int, default=55, help="in the searched agent's archival memory")
    p.add_argument("--embedding", choices=["env", "agent"], default="agent")
    p.add_argument("--dim", type=int, default=1536, help="the fake's embedding size (the yardstick's fake: 1536)")
    p.add_argument("--profile", action="store_true", help="cProfile one more round of each kind")
    p.add_argument("--top", type=int, default=40)
    p.add_argument("--dump", metavar="PREFIX", help="write each kind's pstats to PREFIX.<kind>.pstats")
    p.add_argument("--sql", action="store_true", help="print the last request's statements of each kind")
    args = p.parse_args()

    speed = machine_speed_s()
    admin_url = _database()
    from tests.fake_llm import FakeLLM

    llm = FakeLLM(latency=0, embedding_dim=args.dim).start()
    os.environ.update(OPENAI_API_KEY="fake", OPENAI_BASE_URL=llm.base_url)
    if args.embedding == "env":
        os.environ["EMBEDDING_MODEL"] = EMBEDDING
    else:
        os.environ.pop("EMBEDDING_MODEL", None)
    from benchlib import django_ready

    django_ready()
    from django.db import connection, connections
    from django.db.backends.signals import connection_created
    from django.test import Client

    from tests.factories import make_account, make_agent

    statements = Statements()

    def wrap(sender, connection, **kwargs):  # a pooled connection's wrapper is handed out again: wrap it once
        if statements not in connection.execute_wrappers:
            connection.execute_wrappers.append(statements)

    connection_created.connect(wrap)
    connection.close()  # this thread's connection is opened again, wrapped
    logging.getLogger("agents_ide.requests").setLevel(logging.WARNING)

    account = make_account("bench")
    embedding = EMBEDDING if args.embedding == "agent" else ""
    writer = make_agent(account.org, name="archival-writer", embedding=embedding)
    reader = make_agent(account.org, name="archival-reader", embedding=embedding)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {account.token}")
    counter = iter(range(10**9))

    def insert(agent=writer) -> None:
        i = next(counter)
        body = {"text": f"archival fact number {i}: the sky was color {i % 7} on day {i}."}
        r = client.post(f"/v1/agents/{agent.id}/archival-memory", body, content_type="application/json")
        assert r.status_code == 200, r.content[:300]

    def search() -> None:
        i = next(counter)
        query = {"query": f"what color was the sky on day {i % 50}", "top_k": 5}
        r = client.get(f"/v1/agents/{reader.id}/archival-memory/search", query)
        assert r.status_code == 200, r.content[:300]

    for _ in range(args.passages):  # the yardstick searches the passages it inserted: 5 warm-ups and 50
        insert(reader)

    kinds = {"insert": insert, "search": search}
    for _ in range(args.warmup):
        insert()
        search()
    cpu: dict[str, list[float]] = {k: [] for k in kinds}
    sql: dict[str, collections.Counter] = {k: collections.Counter() for k in kinds}
    last_sql: dict[str, list[str]] = {}
    for _ in range(args.rounds):
        for name, call in kinds.items():
            statements.counts = sql[name]
            statements.on = True
            began = time.thread_time()
            for _ in range(args.requests):
                statements.last = []
                call()
            cpu[name].append((time.thread_time() - began) * 1000 / args.requests)
            statements.on = False
            last_sql[name] = statements.last
    calls: dict[str, float] = {}
    profiles: dict[str, pstats.Stats] = {}
    if args.profile:
        for name, call in kinds.items():
            profile = cProfile.Profile(time.thread_time)
            profile.enable()
            for _ in range(args.requests):
                call()
            profile.disable()
            stats = pstats.Stats(profile)
            calls[name] = stats.total_calls / args.requests
            profiles[name] = stats
            if args.dump:
                stats.dump_stats(f"{args.dump}.{name}.pstats")
    llm.stop()
    from memory.models import Passage

    total = Passage.objects.filter(agent=reader).count()
    print(
        f"{connection.vendor}, embedding from {args.embedding}; machine's loop {speed:.2f} s; "
        f"{args.rounds} rounds of {args.requests} of each; {total} passages searched"
    )
    for name in kinds:
        n = args.rounds * args.requests
        kinds_sql = ", ".join(f"{k} {v / n:.1f}" for k, v in sql[name].most_common())
        line = (
            f"{name:>6}: CPU {statistics.median(cpu[name]):.3f} ms a request (rounds "
            f"{', '.join(f'{c:.3f}' for c in cpu[name])}); SQL {sum(sql[name].values()) / n:.1f} ({kinds_sql})"
        )
        if name in calls:
            line += f"; Python calls {calls[name]:.0f}"
        print(line)
        if args.sql:
            print("   " + "\n   ".join(last_sql[name]))
    for name, stats in profiles.items():
        out = io.StringIO()
        stats.stream = out
        stats.sort_stats("cumulative").print_stats(args.top)
        print(f"== {name}, by cumulative time ==")
        print(out.getvalue())
    if admin_url:
        for alias in connections:
            if getattr(connections[alias], "pool", None) is not None:
                connections[alias].close_pool()
            connections[alias].close()
        scratch_postgres("drop", admin_url=admin_url, name="bench_profile_archival")


if __name__ == "__main__":
    main()
