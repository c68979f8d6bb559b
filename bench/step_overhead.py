"""Server-side overhead of agent steps and compile time vs. history size (prints figures; no assertions).

    .venv/bin/python bench/step_overhead.py [--runs 50] [--history 100000]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres .venv/bin/python bench/step_overhead.py

Uses a throwaway database (a temp SQLite file, or a `bench_step_overhead` PostgreSQL database) and the
fake OpenAI-compatible LLM at zero latency. Overhead = a run's wall time minus the time spent inside
the model call (litellm + the fake server, recorded per step as model_ms): load, compile, parse, tool
execution, the step transaction and event delivery.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agents_ide.settings")


def _database() -> None:
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith("postgres"):
        import psycopg

        base = url.rsplit("/", 1)[0]
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP DATABASE IF EXISTS bench_step_overhead")
            conn.execute("CREATE DATABASE bench_step_overhead")
        os.environ["DATABASE_URL"] = f"{base}/bench_step_overhead"
    else:
        os.environ["AGENTS_IDE_DATA_DIR"] = tempfile.mkdtemp(prefix="bench-step-")
        os.environ.pop("DATABASE_URL", None)


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def _summary(name: str, values: list[float], unit: str = "ms") -> str:
    return f"{name:<44} p50 {statistics.median(values):8.2f} {unit}   p90 {pct(values, 0.9):8.2f} {unit}"


def _measure_runs(agent, fake, script, runs: int):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from core.models import Step
    from core.runs.runner import run_agent

    overhead, wall, model, queries, steps = [], [], [], [], []
    for i in range(runs):
        if script:
            fake.script(*script())
        with CaptureQueriesContext(connection) as ctx:
            started = time.perf_counter()
            result = run_agent(
                agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": f"hello {i}"}]
            )
            elapsed = (time.perf_counter() - started) * 1000
        assert result.stop_reason == "end_turn", result
        model_ms = sum(Step.objects.filter(run_id=result.run_id).values_list("model_ms", flat=True))
        n_steps = result.usage["step_count"]
        wall.append(elapsed)
        model.append(model_ms)
        overhead.append(elapsed - model_ms)
        queries.append(len(ctx.captured_queries))
        steps.append(n_steps)
    return overhead, wall, model, queries, steps


def _measure_executor(agent, runs: int, *, queued: bool):
    """Through the run executor: the synchronous POST's path (`run_call`: claimed and leased, executed on the
    caller's thread in a pool slot), or a queued run (claim + enqueue, a pool thread executes it, the caller
    waits), the path of a synchronous caller when every slot is taken."""
    from core.models import Step
    from core.runs import executor
    from core.runs.request import RunRequest

    overhead, wall = [], []
    for i in range(runs):
        started = time.perf_counter()
        inputs = [{"role": "user", "content": f"hey {i}"}]
        request = RunRequest(owner=agent.owner, agent_id=agent.id, input_messages=inputs)
        run = executor.run_wait(run=executor.run_submit(request)) if queued else executor.run_call(request)
        elapsed = (time.perf_counter() - started) * 1000
        assert run.stop_reason == "end_turn", run.error
        model_ms = sum(Step.objects.filter(run_id=run.id).values_list("model_ms", flat=True))
        wall.append(elapsed)
        overhead.append(elapsed - model_ms)
    return overhead, wall


def bench_steps(runs: int) -> None:
    from core.llm import client as llm
    from tests.factories import make_account, make_agent
    from tests.fake_llm import FakeLLM

    fake = FakeLLM().start()
    os.environ["OPENAI_API_KEY"], os.environ["OPENAI_BASE_URL"] = "fake", fake.base_url
    llm.warm_up()
    account = make_account("bench")
    agent = make_agent(account.org, name="reply")
    _measure_runs(agent, fake, None, 5)
    memory_agent = make_agent(account.org, name="memory")

    def memory_script():
        return (
            FakeLLM.tool("core_memory_append", {"label": "human", "content": "likes tea"}, heartbeat=True),
            FakeLLM.tool("send_message", {"message": "noted"}),
        )

    _measure_runs(memory_agent, fake, memory_script, 3)
    floor = []
    for _ in range(runs):
        t = time.perf_counter()
        llm.complete(fake.chat_requests[-1] | {"model": "openai/fake-model"}, api_base=fake.base_url, api_key="fake")
        floor.append((time.perf_counter() - t) * 1000)
    print(_summary("model call alone (our client + fake, replayed)", floor))
    for label, a, script in (
        ("one-step reply", agent, None),
        ("memory edit + reply (2 steps)", memory_agent, memory_script),
    ):
        overhead, wall, model, queries, steps = _measure_runs(a, fake, script, runs)
        print(f"-- {label}: {runs} runs")
        print(_summary("  wall time per run", wall))
        print(_summary("  model call time per run", model))
        print(_summary("  server overhead per run (wall - model)", overhead))
        print(
            f"  {'DB queries per run':<42} p50 {statistics.median(queries):8.0f}       "
            f"per step {statistics.median(queries) / statistics.median(steps):.1f}"
        )
    for queued, label in ((False, "on the caller's thread (run_call)"), (True, "queued to a pool thread")):
        _measure_executor(agent, 5, queued=queued)
        overhead, wall = _measure_executor(agent, runs, queued=queued)
        print(f"-- one-step reply through the run executor, {label}: {runs} runs")
        print(_summary("  wall time per run", wall))
        print(_summary("  server overhead per run (wall - model)", overhead))
    from core.runs import queue

    queue.shutdown()
    fake.stop()


def _history(owner, agent, total: int) -> None:
    from django.db import transaction

    from core.models import Message
    from core.runs.persistence import message_build

    rows = []
    for i in range(1, total):
        role = "user" if i % 2 else "assistant"
        row = message_build(agent=agent, role=role, text=f"history message number {i} about topic {i % 97}")
        row.seq = i
        rows.append(row)
    with transaction.atomic():
        Message.objects.bulk_create(rows, batch_size=2000)


def bench_compile(history: int) -> None:
    from core.agents.context import agent_snapshot, context_compile
    from core.models import Agent, Message
    from tests.factories import make_account, make_agent

    account = make_account("compile")
    for total in (1_000, history):
        agent = make_agent(account.org, name=f"h{total}", context_window_limit=128000)
        _history(agent.owner, agent, total)
        ids = list(Message.objects.filter(agent=agent).order_by("seq").values_list("id", flat=True))
        for window in (10, 100, 1000):
            Agent.objects.filter(pk=agent.pk).update(message_ids=ids[:1] + ids[-window:])
            fresh = Agent.objects.get(pk=agent.pk)
            context_compile(agent_snapshot(agent=fresh))
            load, compile_ = [], []
            for _ in range(20):
                t = time.perf_counter()
                snap = agent_snapshot(agent=fresh)
                t1 = time.perf_counter()
                ctx = context_compile(snap)
                t2 = time.perf_counter()
                load.append((t1 - t) * 1000)
                compile_.append((t2 - t1) * 1000)
            print(
                f"history {total:>7} msgs, {window:>4} in context: load p50 {statistics.median(load):7.2f} ms, "
                f"compile p50 {statistics.median(compile_):7.2f} ms, total {statistics.median(load) + statistics.median(compile_):7.2f} ms "
                f"({ctx.total_tokens} tokens)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--history", type=int, default=100_000)
    args = parser.parse_args()
    _database()
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    print(
        f"database: {settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[-1]}; channel layer: "
        f"{settings.CHANNEL_LAYERS['default']['BACKEND'].rsplit('.', 1)[-1]}"
    )
    bench_steps(args.runs)
    bench_compile(args.history)


if __name__ == "__main__":
    main()
