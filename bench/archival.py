"""Archival memory benchmark: insert throughput, vector search p50/p90 and recall@10 against exact search, at 10k and
100k passages, on PostgreSQL (pgvector HNSW) and SQLite (numpy over a cached matrix); full-text search p50 too.

Uses its own databases: a scratch PostgreSQL database `aide_bench` (created if missing, dropped afterwards unless
--keep) and a temporary SQLite file. Never touches the dev database. Embeddings are deterministic random unit
vectors inserted directly (no LLM), drawn around 2,000 random topic centres (cosine ~0.7 to their centre) because
real embeddings cluster; queries are stored vectors plus noise (cosine ~0.9). Recall is also reported for
uniformly random queries, the adversarial case. On PostgreSQL the first size is inserted row by row into the live
HNSW index (what agents do); growing past --pg-bulk-above drops the index and rebuilds it in one pass (what a bulk
import should do), and the time reported includes the rebuild.

Usage: .venv/bin/python bench/archival.py [--backend pg|sqlite|both] [--sizes 10000 100000] [--queries 200]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import scratch_postgres

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PG_ADMIN_URL = os.environ.get("BENCH_PG_ADMIN_URL", "postgres://postgres@127.0.0.1:5432/postgres")
PG_DB = "aide_bench"
DIM = 384
MODEL = "bench/random-384"
N_TOPICS = 2000
VOCABULARY = 5000  # synthetic words w0..w4999; each text draws 8, so a word occurs in ~0.16% of passages


def _unit(rows):
    import numpy as np

    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def _vectors(rng, n: int, centers):
    """Passages about topics: each a topic centre plus noise (cosine ~0.7 to its centre), as real embeddings cluster."""
    import numpy as np

    picks = rng.integers(0, len(centers), n)
    return _unit(centers[picks] + rng.standard_normal((n, DIM)).astype(np.float32) * (1.0 / np.sqrt(DIM)))


def _pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def _setup_django(database_url: str) -> None:
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agents_ide.settings")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.path.insert(0, ROOT)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _make_agent():
    from core.accounts import org_for_user, user_create
    from core.agents.services import agent_create

    user = user_create(username=f"bench-{time.time_ns()}", password=None)
    return agent_create(
        owner=org_for_user(user),
        name="bench",
        model="openai/fake-model",
        include_base_tools=False,
        context_window_limit=8000,
    )


def _insert(agent, vectors, rng, start: int) -> float:
    """Insert through memory.services.passages_insert in batches; returns passages per second."""
    from memory.services import passages_insert

    batch = 1000
    began = time.perf_counter()
    for i in range(0, len(vectors), batch):
        chunk = vectors[i : i + batch]
        texts = [
            " ".join(f"w{w}" for w in rng.integers(0, VOCABULARY, 8)) + f" #{start + i + j}" for j in range(len(chunk))
        ]
        passages_insert(agent=agent, texts=texts, embeddings=chunk, embedding_model=MODEL, source="import")
    return len(vectors) / (time.perf_counter() - began)


def _nearest(agent, vendor: str, query, k: int = 10) -> list[str]:
    from memory.models import Passage
    from memory.search import vectors

    if vendor == "postgresql":
        qs = Passage.objects.filter(agent=agent, embedding_model=MODEL)
        return [pid for pid, _ in vectors.pg_nearest(queryset=qs, vector=query, limit=k)]
    return [
        pid for pid, _ in vectors.matrix_nearest(using="default", agent_id=agent.id, model=MODEL, vector=query, limit=k)
    ]


def _measure(agent, vendor, ids, data, queries, random_queries) -> dict:
    import numpy as np

    from memory.models import Passage
    from memory.search.fulltext import ranked_ids

    began = time.perf_counter()
    _nearest(agent, vendor, queries[0])  # warm: first SQLite call loads the matrix; first PG call warms the cache
    warm_ms = (time.perf_counter() - began) * 1000
    times, recalls = [], []
    for q in queries:
        t0 = time.perf_counter()
        got = _nearest(agent, vendor, q)
        times.append((time.perf_counter() - t0) * 1000)
        exact = {ids[i] for i in np.argpartition(-(data @ q), 10)[:10]}
        recalls.append(len(exact & set(got)) / 10)
    hard = []
    for q in random_queries:
        exact = {ids[i] for i in np.argpartition(-(data @ q), 10)[:10]}
        hard.append(len(exact & set(_nearest(agent, vendor, q))) / 10)
    text_times = []
    qs = Passage.objects.filter(agent=agent)
    rng = np.random.default_rng(7)
    for _ in range(min(50, len(queries))):
        query = " ".join(f"w{w}" for w in rng.integers(0, VOCABULARY, 2))
        t0 = time.perf_counter()
        ranked_ids(queryset=qs, query=query, limit=10)
        text_times.append((time.perf_counter() - t0) * 1000)
    return {
        "first_search_ms": round(warm_ms, 1),
        "p50_ms": round(statistics.median(times), 2),
        "p90_ms": round(_pct(times, 0.9), 2),
        "recall_at_10": round(float(np.mean(recalls)), 4),
        "recall_at_10_random_queries": round(float(np.mean(hard)), 4),
        "fulltext_p50_ms": round(statistics.median(text_times), 2),
        "fulltext_p90_ms": round(_pct(text_times, 0.9), 2),
    }


def _plan(agent, query) -> str:
    from django.db import connection

    if connection.vendor != "postgresql":
        return "numpy matrix"
    from django.db.models import FloatField
    from django.db.models.expressions import RawSQL

    from memory.models import Passage
    from memory.search.vectors import vector_literal

    distance = RawSQL(
        f'"memory_passage"."embedding"::vector({DIM}) <=> %s::vector({DIM})',
        (vector_literal(query),),
        output_field=FloatField(),
    )
    qs = (
        Passage.objects.filter(agent=agent, embedding_model=MODEL, embedding_dim=DIM)
        .annotate(_d=distance)
        .order_by("_d")
        .values_list("id", "_d")[:10]
    )
    sql, params = qs.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql, params)
        plan = " ".join(row[0] for row in cursor.fetchall())
    return "hnsw index" if "passage_embedding_hnsw" in plan else "NO INDEX: " + plan[:200]


def _drop_hnsw(connection) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS passage_embedding_hnsw_{DIM}")


def _create_hnsw(connection) -> None:
    """The same index migration 0002 creates, built in one pass (far faster than row-by-row inserts)."""
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '1GB'")
        cursor.execute(
            f"CREATE INDEX passage_embedding_hnsw_{DIM} ON memory_passage USING hnsw "
            f"((embedding::vector({DIM})) vector_cosine_ops) WHERE embedding_dim = {DIM}"
        )
        cursor.execute("ANALYZE memory_passage")


def _sweep(agent, ids, data, queries) -> dict:
    """recall@10 and p50 for several ef_search values (the shipped default is vectors.EF_SEARCH)."""
    import numpy as np

    from memory.search import vectors

    shipped, out = vectors.EF_SEARCH, {}
    try:
        for ef in (40, 100, 200):
            vectors.EF_SEARCH = ef
            times, recalls = [], []
            for q in queries[:100]:
                t0 = time.perf_counter()
                got = set(_nearest(agent, "postgresql", q))
                times.append((time.perf_counter() - t0) * 1000)
                exact = {ids[i] for i in np.argpartition(-(data @ q), 10)[:10]}
                recalls.append(len(exact & got) / 10)
            out[ef] = {"recall_at_10": round(float(np.mean(recalls)), 4), "p50_ms": round(statistics.median(times), 2)}
    finally:
        vectors.EF_SEARCH = shipped
    return out


def run_backend(database_url: str, sizes: list[int], n_queries: int, bulk_above: int) -> dict:
    import numpy as np

    _setup_django(database_url)
    from django.db import connection

    from memory.models import Passage

    vendor = connection.vendor
    rng = np.random.default_rng(42)
    agent = _make_agent()
    centers = _unit(rng.standard_normal((N_TOPICS, DIM)))
    data = np.zeros((0, DIM), dtype=np.float32)
    results = {"backend": vendor, "sizes": []}
    for size in sorted(sizes):
        new = _vectors(rng, size - len(data), centers)
        bulk = vendor == "postgresql" and len(data) >= bulk_above
        began = time.perf_counter()
        if bulk:
            _drop_hnsw(connection)
        _insert(agent, new, rng, len(data))
        if bulk:
            _create_hnsw(connection)
        build_s = time.perf_counter() - began
        data = np.vstack([data, new])
        if vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE memory_passage")
        text_index = {
            int(t.rsplit("#", 1)[1]): pid for pid, t in Passage.objects.filter(agent=agent).values_list("id", "text")
        }
        ids = [text_index[i] for i in range(len(data))]  # row i of `data` is the passage tagged #i
        picks = rng.choice(len(data), n_queries, replace=False)
        queries = _unit(data[picks] + rng.standard_normal((n_queries, DIM)).astype(np.float32) * (0.5 / np.sqrt(DIM)))
        random_queries = _unit(rng.standard_normal((min(50, n_queries), DIM)))
        row = {
            "passages": len(data),
            "insert_per_s": round(len(new) / build_s),
            "insert_s": round(build_s, 1),
            "insert_mode": "bulk, index rebuilt" if bulk else "incremental",
            "plan": _plan(agent, queries[0]),
        }
        row.update(_measure(agent, vendor, ids, data, queries, random_queries))
        if vendor == "postgresql":
            row["ef_search_sweep"] = _sweep(agent, ids, data, queries)
        results["sizes"].append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    return results


def _pg_database(action: str) -> str:
    return scratch_postgres(action, admin_url=PG_ADMIN_URL, name=PG_DB)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["pg", "sqlite", "both"], default="both")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--keep", action="store_true", help="keep the scratch databases")
    parser.add_argument(
        "--pg-bulk-above",
        type=int,
        default=10_000,
        help="on PostgreSQL, grow past this many passages with the HNSW index dropped and rebuilt",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # one backend per process: Django reads DATABASE_URL once
        print(json.dumps(run_backend(args.child, args.sizes, args.queries, args.pg_bulk_above)))
        return
    targets = []
    if args.backend in ("pg", "both"):
        targets.append(("pg", _pg_database("create")))
    tmp = tempfile.mkdtemp(prefix="aide-bench-")
    if args.backend in ("sqlite", "both"):
        targets.append(("sqlite", f"sqlite:///{tmp}/bench.sqlite3"))
    try:
        for name, url in targets:
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    url,
                    "--sizes",
                    *map(str, args.sizes),
                    "--queries",
                    str(args.queries),
                    "--pg-bulk-above",
                    str(args.pg_bulk_above),
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if out.returncode != 0:
                print(f"{name} failed:\n{out.stderr[-3000:]}")
                continue
            report = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"\n== {name} ({report['backend']}) ==")
            for row in report["sizes"]:
                print(
                    f"{row['passages']:>7} passages | insert {row['insert_per_s']:>6}/s ({row['insert_s']} s) | "
                    f"vector p50 {row['p50_ms']} ms p90 {row['p90_ms']} ms (first {row['first_search_ms']} ms, "
                    f"{row['plan']}) | recall@10 {row['recall_at_10']} (random queries {row['recall_at_10_random_queries']}) | "
                    f"full text p50 {row['fulltext_p50_ms']} ms p90 {row['fulltext_p90_ms']} ms | {row['insert_mode']}"
                )
                if "ef_search_sweep" in row:
                    print(f"          ef_search sweep: {row['ef_search_sweep']}")
    finally:
        if not args.keep:
            if args.backend in ("pg", "both"):
                _pg_database("drop")
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
