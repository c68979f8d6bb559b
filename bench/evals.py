"""The server's own overhead per eval case beyond the model calls (prints figures; no assertions; target <= 20 ms).

    .venv/bin/python bench/evals.py [--cases 40] [--sql] [--profile [--top 40]]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/evals.py

Uses a throwaway database (a temp SQLite file, or a `bench_evals` PostgreSQL database) and the fake OpenAI-compatible
model at zero latency, in a process of its own, as the agent's model and as the rubric judge. A case here is one user
turn answered in one step, graded by contains and a tool-call check, and by a rubric judged by the model. Overhead =
the case's wall time (copy the agent, run the turn through the executor, gather what happened, grade, store) minus
the agent's model calls (model_ms of its steps) and the judge's model call (the model client's call alone: building
the judge's request, resolving its model, pricing and parsing its answer are overhead), each phase timed apart. The
server process's CPU time per case (every thread's; the fake model's is not in it) is printed too: on a machine shared
with other work it moves far less than wall time. `--sql` prints the SQL statements per case by phase (the run's
pool threads counted in the phase that waits for them) and one case's statements in order; `--profile` profiles the
cases on this thread (the copy, the bookkeeping, the grading; not the run's pool threads) by CPU time.
"""

import argparse
import collections
import cProfile
import io
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agents_ide.settings")

from benchlib import machine_speed_s, scratch_postgres  # noqa: E402 - after the path is set


def _database() -> str | None:
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith("postgres"):
        admin = url.rsplit("/", 1)[0] + "/postgres"
        os.environ["DATABASE_URL"] = scratch_postgres("create", admin_url=admin, name="bench_evals")
        return admin
    os.environ["AGENTS_IDE_DATA_DIR"] = tempfile.mkdtemp(prefix="bench-evals-")
    os.environ.pop("DATABASE_URL", None)
    return None


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


JUDGE_ANSWER = '{"score": 1, "rationale": "fine"}'
FAKE_MODEL = f"""
import sys
from tests.fake_llm import FakeLLM
fake = FakeLLM()
fake.by_model = {{"judge": FakeLLM.text({JUDGE_ANSWER!r})}}
print(fake.start().base_url, flush=True)
sys.stdin.read()  # until the bench closes it
"""


def fake_model() -> tuple[subprocess.Popen, str]:
    """The fake model server in a process of its own (its CPU is the model's, not the server's); returns it and its
    base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-c", FAKE_MODEL], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    return proc, proc.stdout.readline().strip()


class Judged:
    """Wraps the rubric grader and keeps, per call, its whole time, its model call's (the usage it returns) and the
    CPU time of the thread that ran it (the model client's included)."""

    def __init__(self, fn):
        self.fn, self.ms, self.call_ms, self.cpu_ms = fn, [], [], []

    def __call__(self, *args, **kwargs):
        started, cpu_started = time.perf_counter(), time.thread_time()
        grade, usage = self.fn(*args, **kwargs)
        self.cpu_ms.append((time.thread_time() - cpu_started) * 1000)
        self.ms.append((time.perf_counter() - started) * 1000)
        self.call_ms.append(usage["latency_ms"])
        return grade, usage


class Statements:
    """Counts the SQL statements of every connection opened from now on by the phase they ran in (`phase`, set by
    the Timed wrappers; "rest" otherwise) and keeps the statements of the current case in order."""

    def __init__(self) -> None:
        self.counts: collections.Counter = collections.Counter()
        self.phase, self.on, self.last = "rest", False, []
        self.lock = threading.Lock()

    def __call__(self, execute, sql, params, many, context):
        if self.on:
            with self.lock:
                self.counts[self.phase] += 1
                self.last.append(f"{self.phase:<6} {threading.current_thread().name[:10]:<10} {sql[:140]}")
        return execute(sql, params, many, context)


STATEMENTS = Statements()


class Timed:
    """Wraps a function and keeps the milliseconds of each call; its statements count in `phase`."""

    def __init__(self, fn, phase: str):
        self.fn, self.ms, self.phase = fn, [], phase

    def __call__(self, *args, **kwargs):
        started = time.perf_counter()
        STATEMENTS.phase = self.phase
        try:
            return self.fn(*args, **kwargs)
        finally:
            STATEMENTS.phase = "rest"
            self.ms.append((time.perf_counter() - started) * 1000)


def bench(cases: int, with_judge: bool, profile: cProfile.Profile | None = None) -> dict:
    from core.evals import datasets, experiments, runner
    from core.llm import client as llm
    from core.models import CaseResult, Step
    from tests.factories import make_account, make_agent
    from tests.fake_llm import DEFAULT_TEXT

    fake, base_url = fake_model()
    os.environ["OPENAI_API_KEY"], os.environ["OPENAI_BASE_URL"] = "fake", base_url
    llm.warm_up()
    account = make_account(f"bench{int(with_judge)}{os.getpid()}{time.monotonic_ns()}")
    agent = make_agent(account.org, name="barista")
    graders = [
        {"name": "answer", "kind": "contains", "value": DEFAULT_TEXT[:12]},
        {"name": "tools", "kind": "tool_calls", "calls": [{"name": "send_message"}]},
    ]
    if with_judge:
        graders.append({"name": "quality", "kind": "rubric", "model": "openai/judge", "prompt": "Judge {submission}"})
    dataset = datasets.dataset_create(owner=account.org, name="bench", graders=graders)
    datasets.cases_add(dataset=dataset, cases=[{"turns": [f"hello {i}"]} for i in range(cases + 3)])
    copy = runner.case_copy = Timed(runner.case_copy, "copy")
    judge = runner.rubric_grade = Judged(runner.rubric_grade)
    turns = runner.turns_run = Timed(runner.turns_run, "run")
    experiment = experiments.experiment_start(
        owner=account.org, dataset=dataset, agent=agent, concurrency=1, queued=False
    )
    wall, model, cpu, judges = [], [], [], {}  # judges, starts: shared by the run's cases, as in experiment_execute
    skip = 3  # warm-up cases: first imports and connections
    results = list(CaseResult.objects.filter(experiment=experiment).select_related("case").order_by("position"))
    starts = experiments.starts_for(experiment=experiment, results=results)  # as experiment_execute does
    for i, result in enumerate(results):
        STATEMENTS.on, STATEMENTS.last = i >= skip, []
        if profile is not None and i >= skip:
            profile.enable()
        started, cpu_started = time.perf_counter(), time.process_time()
        experiments.case_execute(experiment=experiment, result=result, judges=judges, starts=starts)
        wall.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - cpu_started) * 1000)
        if profile is not None:
            profile.disable()
        STATEMENTS.on = False
        result.refresh_from_db()
        assert result.status == "done" and result.passed, (result.error, result.scores)
        model.append(sum(Step.objects.filter(run_id__in=result.run_ids).values_list("model_ms", flat=True)))
    fake.stdin.close()
    fake.wait()
    judged = judge.call_ms[skip:] if with_judge else [0.0] * cases
    grader = [a - b for a, b in zip(judge.ms[skip:], judged, strict=True)] if with_judge else [0.0] * cases
    overhead = [w - m - j for w, m, j in zip(wall[skip:], model[skip:], judged, strict=True)]
    runs = [t - m for t, m in zip(turns.ms[skip:], model[skip:], strict=True)]
    rest = [o - c - r for o, c, r in zip(overhead, copy.ms[skip:], runs, strict=True)]
    return {
        "wall": wall[skip:],
        "model": model[skip:],
        "judge": judged,
        "grader": grader,
        "grader_cpu": judge.cpu_ms[skip:] if with_judge else [0.0] * cases,
        "copy": copy.ms[skip:],
        "runs": runs,
        "rest": rest,
        "overhead": overhead,
        "cpu": cpu[skip:],
    }


def _line(name: str, values: list[float]) -> str:
    return f"{name:<46} p50 {statistics.median(values):8.2f} ms   p90 {pct(values, 0.9):8.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=40)
    parser.add_argument("--sql", action="store_true", help="statements per case by phase, and one case's in order")
    parser.add_argument("--profile", action="store_true", help="profile the cases on this thread (CPU time)")
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    admin = _database()
    import django
    from django.conf import settings
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from django.db import connection
    from django.db.backends.signals import connection_created

    connection_created.connect(
        lambda sender, connection, **kw: connection.execute_wrappers.append(STATEMENTS), weak=False
    )
    connection.close()  # this thread's connection is opened again, counted
    print(f"database: {settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[-1]}   cases: {args.cases}")
    print(f"machine's loop: {machine_speed_s():.2f} s")
    try:
        for with_judge in (False, True):
            profile = cProfile.Profile(time.thread_time) if args.profile else None
            STATEMENTS.counts.clear()
            f = bench(args.cases, with_judge, profile)
            print(f"-- graders: contains, tool_calls{', rubric (judged by the fake model)' if with_judge else ''}")
            print(_line("case wall time", f["wall"]))
            print(_line("  agent's model calls (model_ms)", f["model"]))
            if with_judge:
                print(_line("  judge's model call", f["judge"]))
            print(_line("  overhead: the agent's copy", f["copy"]))
            print(_line("  overhead: the run (executor, step) w/o model", f["runs"]))
            print(_line("  overhead: gather, grade, store", f["rest"]))
            if with_judge:
                print(_line("    of which the rubric grader beyond its call", f["grader"]))
            print(_line("server overhead per case (target <= 20 ms)", f["overhead"]))
            print(_line("  CPU per case, the server's threads", f["cpu"]))
            if with_judge:
                print(_line("    of which the rubric grader, its call's too", f["grader_cpu"]))
            if args.sql:
                counts = STATEMENTS.counts
                each = ", ".join(f"{k} {counts[k] / args.cases:.1f}" for k in ("copy", "run", "rest"))
                print(f"SQL statements per case: {sum(counts.values()) / args.cases:.1f} ({each})")
                print("the last case's statements:")
                print("\n".join(STATEMENTS.last))
            if profile is not None:
                out = io.StringIO()
                stats = pstats.Stats(profile, stream=out).sort_stats("cumulative")
                stats.print_stats(args.top)
                stats.print_callees("observed_gather|case_execute|_case_body")
                print(out.getvalue())
    finally:
        from core.runs import queue

        queue.shutdown()
        if admin:
            import psycopg

            with psycopg.connect(admin, autocommit=True) as conn:  # FORCE: the run pool's threads hold connections
                conn.execute("DROP DATABASE IF EXISTS bench_evals WITH (FORCE)")


if __name__ == "__main__":
    main()
