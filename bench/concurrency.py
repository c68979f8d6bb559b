"""Concurrent runs through the real HTTP API: N agents x M messages at once, fake LLM at 200 ms (prints figures).

    .venv/bin/python bench/concurrency.py [--agents 32] [--messages 5] [--latency 0.2]
    .venv/bin/python bench/concurrency.py --postgres --workers 2      # PostgreSQL + Redis, RUNS_IN_WORKER
    .venv/bin/python bench/concurrency.py --mode sync                  # blocking POST /messages instead
    .venv/bin/python bench/concurrency.py --trace                      # tracing on, to a local OTLP receiver
    .venv/bin/python bench/concurrency.py --profile /tmp/conc.prof     # sample the server's stacks (bench/sampler.py)

Starts a daphne server (and worker processes with --workers) on a throwaway database (a temp SQLite file,
or a `bench_concurrency` PostgreSQL database with Redis db 13), creates the agents, and drives each agent
with its messages one after another, all agents at once. Mode `async` (default): POST /messages/async,
then wait on the agent's websocket for the run's final run_status. Mode `sync`: POST /messages.

Ideal: every message costs exactly one model call (the fake LLM's latency) and all agents run in
parallel, so ideal throughput = agents / latency and ideal latency = latency.
"""

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import (
    APPLICATION,
    SERVER,
    cpu_split,
    free_port,
    machine_speed_s,
    pct,
    spawn,
    stop_all,
    wait_healthy,
    wait_idle,
)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agents_ide.settings")
REDIS = "redis://127.0.0.1:6379/13"


def _database(postgres: bool) -> None:
    if postgres:
        import psycopg

        url = os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/postgres"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("DROP DATABASE IF EXISTS bench_concurrency WITH (FORCE)")
            conn.execute("CREATE DATABASE bench_concurrency")
        os.environ["DATABASE_URL"] = f"{url.rsplit('/', 1)[0]}/bench_concurrency"
        os.environ["REDIS_URL"] = REDIS
        import redis

        redis.Redis.from_url(REDIS).flushdb()
    else:
        os.environ["AGENTS_IDE_DATA_DIR"] = tempfile.mkdtemp(prefix="bench-conc-")
        os.environ.pop("DATABASE_URL", None)
        os.environ["REDIS_URL"] = ""


def _setup(n_agents: int):
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from django.conf import settings
    from django.test import Client

    from tests.factories import make_account, make_agent

    account = make_account("bench")
    agents = [make_agent(account.org, name=f"a{i}").id for i in range(n_agents)]
    client = Client()
    client.force_login(account.user)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    return account.token, agents, cookie


async def _agent_async(session, base, ws_base, token, cookie, agent_id, m, out, socket_counts):
    import aiohttp

    headers = {"Authorization": f"Bearer {token}"}
    # Watched as the IDE's page watches (batch=1: a frame holds a batch of events)
    url = f"{ws_base}/ws/agents/{agent_id}/?batch=1"
    async with session.ws_connect(url, headers={"Cookie": cookie, "Origin": base}) as ws:
        for i in range(m):
            started = time.perf_counter()
            async with session.post(
                f"{base}/v1/agents/{agent_id}/messages/async", json={"input": f"msg {i}"}, headers=headers
            ) as r:
                if r.status != 200:
                    out.append(("error", r.status, await r.text()))
                    continue
                run_id = (await r.json())["id"]
            ended = None
            while ended is None:
                msg = await ws.receive(timeout=120)
                if msg.type != aiohttp.WSMsgType.TEXT:
                    raise RuntimeError(f"websocket closed: {msg}")
                events = json.loads(msg.data)
                socket_counts["frames"] += 1
                socket_counts["events"] += len(events)
                for ev in events:
                    if (
                        ev.get("message_type") == "run_status"
                        and ev.get("run_id") == run_id
                        and ev["status"] not in ("created", "running")
                    ):
                        ended = ev["status"]
            out.append((ended, time.perf_counter() - started))


async def _agent_sync(session, base, token, agent_id, m, out):
    headers = {"Authorization": f"Bearer {token}"}
    for i in range(m):
        started = time.perf_counter()
        async with session.post(
            f"{base}/v1/agents/{agent_id}/messages", json={"input": f"msg {i}"}, headers=headers
        ) as r:
            body = await r.text()
            out.append(
                ("completed" if r.status == 200 else "error", time.perf_counter() - started)
                if r.status == 200
                else ("error", r.status, body[:200])
            )


async def _drive(mode, base, token, cookie, agents, m):
    import aiohttp

    out: list = []
    socket_counts = {"frames": 0, "events": 0}
    conn = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=600)) as session:
        ws_base = base.replace("http", "ws")
        started = time.perf_counter()
        if mode == "async":
            await asyncio.gather(
                *[_agent_async(session, base, ws_base, token, cookie, a, m, out, socket_counts) for a in agents]
            )
        else:
            await asyncio.gather(*[_agent_sync(session, base, token, a, m, out) for a in agents])
        return time.perf_counter() - started, out, socket_counts


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--agents", type=int, default=32)
    p.add_argument("--messages", type=int, default=5)
    p.add_argument("--latency", type=float, default=0.2)
    p.add_argument("--postgres", action="store_true", help="PostgreSQL + Redis instead of the embedded SQLite default")
    p.add_argument("--workers", type=int, default=0, help="run worker processes (sets RUNS_IN_WORKER)")
    p.add_argument("--threads", type=int, default=32, help="run threads per process (RUN_WORKER_THREADS)")
    p.add_argument("--mode", choices=["async", "sync"], default="async")
    p.add_argument("--trace", action="store_true", help="export traces over OTLP/HTTP to a receiver in this process")
    p.add_argument(
        "--profile",
        metavar="OUT",
        help="sample the server's (and workers') running threads during the measured part: OUT[.name] and .txt",
    )
    args = p.parse_args()

    speed_before = machine_speed_s()
    _database(args.postgres)
    from tests.fake_llm import FakeLLM

    llm = FakeLLM(latency=args.latency).start()
    token, agents, cookie = _setup(args.agents)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "OPENAI_API_KEY": "fake",
        "OPENAI_BASE_URL": llm.base_url,
        "RUN_WORKER_THREADS": str(args.threads),
        "RUNS_IN_WORKER": "true" if args.workers else "",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "RUN_POLL_S": "0.05",
    }
    receiver = None
    if args.trace:
        from tests.telemetry.otlp_receiver import OTLPReceiver

        receiver = OTLPReceiver().start()
        env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = receiver.endpoint
    procs: list[subprocess.Popen] = []
    try:

        def sampled(argv: list[str], name: str) -> list[str]:
            if not args.profile:
                return argv
            out = args.profile if name == "web" else f"{args.profile}.{name}"
            if argv[0] == "-m":
                return ["bench/sampler.py", out, *argv]
            return ["bench/sampler.py", out, "-m", "manage", *argv[1:]]

        spawn(sampled([*SERVER, "-p", str(port), APPLICATION], "web"), env, "web", procs)
        for i in range(args.workers):
            worker = ["manage.py", "run_worker", "--threads", str(args.threads)]
            spawn(sampled(worker, f"worker{i}"), env, f"worker{i}", procs)
        wait_healthy(base)
        print(f"server start-up work done after another {wait_idle(procs):.1f} s", flush=True)
        asyncio.run(_drive(args.mode, base, token, cookie, agents[:2], 1))  # warm-up: first calls pay lazy imports
        llm.clear()
        split_before = [cpu_split(p.pid) for p in procs]
        if args.profile:
            for proc in procs:
                proc.send_signal(signal.SIGUSR1)
        wall, out, socket_counts = asyncio.run(_drive(args.mode, base, token, cookie, agents, args.messages))
        if args.profile:
            for proc in procs:
                proc.send_signal(signal.SIGUSR2)
            time.sleep(1)
        split = [
            (u - u0, s - s0) for (u, s), (u0, s0) in zip((cpu_split(p.pid) for p in procs), split_before, strict=True)
        ]
        cpu = [u + s for u, s in split]
    finally:
        stop_all(procs)
        llm.stop()
        if receiver is not None:
            receiver.stop()
    speed_after = machine_speed_s()
    ok = [r[1] for r in out if r[0] == "completed"]
    bad = [r for r in out if r[0] != "completed"]
    total = args.agents * args.messages
    ideal_tput = args.agents / args.latency
    tput = len(ok) / wall
    db = "PostgreSQL + Redis" if args.postgres else "SQLite (embedded)"
    where = f"{args.workers} worker process(es)" if args.workers else "in the server process"
    print(
        f"{args.agents} agents x {args.messages} messages, fake LLM {args.latency * 1000:.0f} ms, {db}, runs {where}, "
        f"{args.threads} threads, mode {args.mode}, tracing {'on' if args.trace else 'off'}"
    )
    if receiver is not None:
        print(f"traces: {len(receiver.spans)} spans received in {receiver.requests} OTLP requests")
    print(f"completed {len(ok)}/{total} in {wall:.2f} s; failures {len(bad)} {bad[:3] if bad else ''}")
    print(f"machine speed: a 10-million-addition loop took {speed_before:.2f} s before, {speed_after:.2f} s after")
    print(f"throughput {tput:.1f} msg/s   ideal {ideal_tput:.1f} msg/s   = {100 * tput / ideal_tput:.0f}% of ideal")
    if ok:
        per = " + ".join(f"{c * 1000 / len(ok):.1f}" for c in cpu)
        print(
            f"server CPU per message {sum(cpu) * 1000 / len(ok):.1f} ms ({per}: web{', workers' if args.workers else ''}); "
            f"a core's worth at ideal throughput is {1000 / ideal_tput:.1f} ms"
        )
        user, system = (sum(part[i] for part in split) * 1000 / len(ok) for i in (0, 1))
        print(f"  of which user {user:.1f} ms, system (kernel: sockets, thread wake-ups) {system:.1f} ms")
        print(
            f"latency p50 {statistics.median(ok) * 1000:.0f} ms   p90 {pct(ok, 0.9) * 1000:.0f} ms   "
            f"ideal {args.latency * 1000:.0f} ms"
        )
        if socket_counts["frames"]:
            print(
                f"websocket per message: {socket_counts['frames'] / len(ok):.1f} frames holding "
                f"{socket_counts['events'] / len(ok):.1f} events"
            )


if __name__ == "__main__":
    main()
