"""Documents benchmark: ingest of a 300-page PDF (parse + chunk without embedding, then the whole ingest with the
fake embedder), and semantic_search_files / grep_files p50/p95 for an agent whose folder holds 10,000 chunks, on
SQLite and PostgreSQL.

Uses its own databases: a scratch PostgreSQL database `agents_ide_bench` (created with the vector extension if
missing, emptied at start, dropped afterwards unless --keep) and a temporary SQLite file; never the dev or CI
database. The PDF is written by fpdf2 (the library the tests use): per page a heading, filler sentences and one
codeword. Embeddings come from the tests' fake OpenAI-compatible server over HTTP (a hashed bag of words, 384
dimensions), so the whole ingest path runs: provider calls in batches of 64, passages written in one transaction.
The 10,000 chunks are text files of synthetic words ingested the same way. Searches are the tool functions the
agent's step calls (memory.files.tools), so the timings include the query's embedding call on loopback, the
ranking and reading the hits. It prints the machine's speed (a pure-Python loop of 10 million additions) before and
after, as bench/concurrency.py does: this kind of machine's speed drifts within minutes.

Usage: .venv/bin/python bench/files.py [--backend pg|sqlite|both] [--pages 300] [--chunks 10000] [--queries 200]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

from benchlib import machine_speed_s, scratch_postgres

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PG_ADMIN_URL = os.environ.get("BENCH_PG_ADMIN_URL", "postgres://postgres@127.0.0.1:5432/postgres")
PG_DB = "agents_ide_bench"
EMBEDDING = "openai/text-embedding-3-small"
VOCABULARY = 5000  # synthetic words w0..w4999
CODEWORDS = ("fjord", "amber", "birch", "cobalt", "dahlia", "ember", "garnet")


def _pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def _setup(database_url: str) -> None:
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agents_ide.settings")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    sys.path.insert(0, ROOT)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def pdf_bytes(pages: int) -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=11)
    for n in range(1, pages + 1):
        pdf.add_page()
        pdf.multi_cell(
            0, 8, f"Chapter {n}\nOn page {n} the keeper guards lighthouse {n * 7}.", new_x="LMARGIN", new_y="NEXT"
        )
        for k in range(12):
            pdf.multi_cell(
                0,
                8,
                f"Filler sentence {k} about harbours, tides and ferries on page {n}.",
                new_x="LMARGIN",
                new_y="NEXT",
            )
        pdf.multi_cell(0, 8, f"Codeword: {CODEWORDS[n % len(CODEWORDS)]}.", new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def _owner():
    from core.accounts import org_for_user, user_create

    return org_for_user(user_create(username=f"bench-{time.time_ns()}", password=None))


def bench_ingest(owner, pages: int) -> dict:
    from memory.embedders.selection import embedder_for_handle
    from memory.files import services
    from memory.files.chunk import chunk_lines
    from memory.files.ingest import file_ingest
    from memory.files.lines import numbered_lines
    from memory.files.parse import parse
    from memory.models import FolderFile

    began = time.perf_counter()
    data = pdf_bytes(pages)
    write_s = time.perf_counter() - began
    began = time.perf_counter()
    parsed = parse(data=data, mime="application/pdf", file_name="manual.pdf")
    parse_s = time.perf_counter() - began
    began = time.perf_counter()
    chunks = chunk_lines(numbered_lines(parsed.text), chunk_tokens=300)
    chunk_s = time.perf_counter() - began

    folder = services.folder_create(owner=owner, name="manuals", embedding=EMBEDDING)
    embedder_for_handle(owner=owner, handle=EMBEDDING).embed(["warm"])  # the provider client is made once a process
    file, _ = services.file_upload(folder=folder, file_name="manual.pdf", content_type="application/pdf", data=data)
    began = time.perf_counter()
    status = file_ingest(file_id=file.id)
    ingest_s = time.perf_counter() - began
    file = FolderFile.objects.get(pk=file.pk)
    assert status == "completed", file.error_message
    return {
        "pages": parsed.pages,
        "pdf_bytes": len(data),
        "pdf_write_s": round(write_s, 2),
        "parse_s": round(parse_s, 2),
        "chunk_s": round(chunk_s, 3),
        "parse_chunk_pages_per_s": round(pages / (parse_s + chunk_s), 1),
        "chunks": len(chunks),
        "ingest_with_fake_embedder_s": round(ingest_s, 2),
        "ingest_pages_per_s": round(pages / ingest_s, 1),
        "stored_chunks": file.total_chunks,
    }


def _text_file(rng: random.Random, lines: int, file_no: int) -> bytes:
    out = []
    for i in range(lines):
        words = " ".join(f"w{rng.randrange(VOCABULARY)}" for _ in range(10))
        out.append(f"Record {file_no}.{i}: {words} {CODEWORDS[i % len(CODEWORDS)]}.")
    return "\n".join(out).encode()


def build_corpus(owner, target_chunks: int):
    """A folder whose text files are ingested (fake embedder) until it holds `target_chunks` chunks; an agent with it."""
    from memory.files import services
    from memory.files.ingest import file_ingest
    from memory.models import Passage
    from tests.factories import make_agent

    rng = random.Random(42)
    folder = services.folder_create(owner=owner, name="corpus", embedding=EMBEDDING)
    lines_per_file = 5000  # ~80 characters a line: ~400 chunks of 300 tokens
    began, n = time.perf_counter(), 0
    while (have := Passage.objects.filter(folder=folder).count()) < target_chunks:
        need = target_chunks - have
        lines = lines_per_file if need > 450 else max(20, need * 13)
        file, _ = services.file_upload(
            folder=folder, file_name=f"records{n}.txt", content_type="text/plain", data=_text_file(rng, lines, n)
        )
        assert file_ingest(file_id=file.id) == "completed"
        n += 1
    agent = make_agent(owner, name="reader", context_window_limit=128_000)
    services.folder_attach(agent=agent, folder=folder)
    return agent, {
        "files": n,
        "chunks": Passage.objects.filter(folder=folder).count(),
        "build_s": round(time.perf_counter() - began, 1),
    }


def bench_search(agent, queries: int) -> dict:
    """The tools' p50/p95; semantic search also without its query's embedding call (timed alone per query: the
    store's share, what our code spends; a real provider's call takes 50-300 ms on its own)."""
    from memory.embedders.selection import embedder_for_handle
    from memory.files.tools import grep_files, semantic_search_files

    embedder = embedder_for_handle(owner=agent.owner, handle=EMBEDDING)
    rng = random.Random(7)
    semantic, embeds, grep = [], [], []
    semantic_search_files(agent=agent, query="w1 w2")  # warm: connections, the embedder client, caches
    grep_files(agent=agent, pattern="w1 ")
    for _ in range(queries):
        query = f"w{rng.randrange(VOCABULARY)} w{rng.randrange(VOCABULARY)}"
        t0 = time.perf_counter()
        embedder.embed_one(query)
        embeds.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        answer = semantic_search_files(agent=agent, query=query)
        semantic.append((time.perf_counter() - t0) * 1000)
        assert answer.startswith(("Found", "No semantic")), answer[:200]
    for _ in range(max(20, queries // 4)):
        pattern = rf"w{rng.randrange(VOCABULARY)}\b"
        t0 = time.perf_counter()
        grep_files(agent=agent, pattern=pattern)
        grep.append((time.perf_counter() - t0) * 1000)
    return {
        "semantic_p50_ms": round(statistics.median(semantic), 2),
        "semantic_p95_ms": round(_pct(semantic, 0.95), 2),
        "query_embedding_p50_ms": round(statistics.median(embeds), 2),
        "semantic_store_p50_ms": round(statistics.median([t - e for t, e in zip(semantic, embeds, strict=True)]), 2),
        "semantic_store_p95_ms": round(_pct([t - e for t, e in zip(semantic, embeds, strict=True)], 0.95), 2),
        "grep_p50_ms": round(statistics.median(grep), 2),
        "grep_p95_ms": round(_pct(grep, 0.95), 2),
    }


def run_backend(database_url: str, pages: int, chunks: int, queries: int) -> dict:
    sys.path.insert(0, ROOT)
    from tests.fake_llm import FakeLLM

    fake = FakeLLM().start()
    os.environ["OPENAI_API_KEY"] = "fake-key"
    os.environ["OPENAI_BASE_URL"] = fake.base_url
    os.environ.pop("EMBEDDING_MODEL", None)
    _setup(database_url)
    from django.db import connection

    try:
        owner = _owner()
        result = {"backend": connection.vendor, "ingest": bench_ingest(owner, pages)}
        print(json.dumps(result), file=sys.stderr, flush=True)
        agent, corpus = build_corpus(owner, chunks)
        result["corpus"] = corpus
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE memory_passage")
        result["search"] = bench_search(agent, queries)
        print(json.dumps(result), file=sys.stderr, flush=True)
        return result
    finally:
        fake.stop()


def _pg_database(action: str) -> str:
    return scratch_postgres(action, admin_url=PG_ADMIN_URL, name=PG_DB, extensions=("vector",))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=["pg", "sqlite", "both"], default="both")
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--keep", action="store_true", help="keep the scratch databases")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # one backend per process: Django reads DATABASE_URL once
        print(json.dumps(run_backend(args.child, args.pages, args.chunks, args.queries)))
        return
    targets = []
    if args.backend in ("pg", "both"):
        targets.append(("pg", _pg_database("create")))
    tmp = tempfile.mkdtemp(prefix="aide-bench-files-")
    if args.backend in ("sqlite", "both"):
        targets.append(("sqlite", f"sqlite:///{tmp}/bench.sqlite3"))
    speed_before = machine_speed_s()
    try:
        for name, url in targets:
            command = [
                sys.executable,
                __file__,
                "--child",
                url,
                "--pages",
                str(args.pages),
                "--chunks",
                str(args.chunks),
            ]
            out = subprocess.run(
                [*command, "--queries", str(args.queries)], capture_output=True, text=True, check=False
            )
            if out.returncode != 0:
                print(f"{name} failed:\n{out.stderr[-3000:]}")
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            i, c, s = r["ingest"], r["corpus"], r["search"]
            print(f"\n== {name} ({r['backend']}) ==")
            print(
                f"{i['pages']}-page PDF: parse {i['parse_s']} s + chunk {i['chunk_s']} s "
                f"({i['parse_chunk_pages_per_s']} pages/s, {i['chunks']} chunks) | whole ingest with the fake embedder "
                f"{i['ingest_with_fake_embedder_s']} s ({i['ingest_pages_per_s']} pages/s)"
            )
            print(
                f"{c['chunks']} chunks in {c['files']} files (built in {c['build_s']} s) | semantic_search_files "
                f"p50 {s['semantic_p50_ms']} ms p95 {s['semantic_p95_ms']} ms (its query's embedding call p50 "
                f"{s['query_embedding_p50_ms']} ms; without it p50 {s['semantic_store_p50_ms']} ms p95 "
                f"{s['semantic_store_p95_ms']} ms) | grep_files p50 {s['grep_p50_ms']} ms "
                f"p95 {s['grep_p95_ms']} ms"
            )
        print(
            f"\nmachine speed: a 10-million-addition loop took {speed_before:.2f} s before, {machine_speed_s():.2f} s after"
        )
    finally:
        if not args.keep:
            if args.backend in ("pg", "both"):
                _pg_database("drop")
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
