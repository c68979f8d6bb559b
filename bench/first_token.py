"""Time to first token through the whole stack (prints figures; no assertions).

    .venv/bin/python bench/first_token.py [--runs 30] [--chunk-ms 40]

Starts the IDE (daphne, embedded default: SQLite, in-process channel layer, run pool) against a throwaway
database and the fake OpenAI-compatible LLM, which streams its reply one chunk every --chunk-ms. A
websocket client (a browser tab's connection) sends each message and timestamps every chunk event it
receives. What the server adds = when a chunk event reached the tab minus when the fake model wrote the
chunk it carries (one clock: the model and the tab are both in this process). Also printed: the time from
sending the message to the first chunk at the tab (queueing, compiling, the model call's start).
"""

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def _line(name, values):
    return f"{name:<58} p50 {statistics.median(values):7.2f} ms   p90 {_pct(values, 0.9):7.2f} ms   max {max(values):7.2f} ms"


async def _one(ws, text: str, fake, chunks_expected: int):
    """Send one message; return (ms from send to first chunk, [ms the server added per chunk])."""
    start_chunks = len(fake.chunk_times)
    sent_at = time.time()
    await ws.send_str(json.dumps({"type": "user_message", "text": text}))
    arrivals = []
    while True:
        msg = await asyncio.wait_for(ws.receive(), timeout=60)
        event = json.loads(msg.data)
        if event.get("delta") and event["message_type"] == "reasoning_message":
            arrivals.append((time.time(), event["reasoning"]))
        if event.get("message_type") == "run_status" and event.get("status") not in ("created", "running"):
            break
    # The fake's chunk 0 is the role header; reasoning chunks follow, one per fake chunk, in order.
    written = fake.chunk_times[start_chunks + 1 : start_chunks + 1 + chunks_expected]
    added = [(got - wrote) * 1000 for (got, _), wrote in zip(arrivals, written, strict=False)]
    return (arrivals[0][0] - sent_at) * 1000, added


async def _drive(url, cookie, agent_id, fake, runs, reasoning):
    import aiohttp

    from tests.fake_llm import FakeLLM

    n_chunks = -(-len(reasoning) // fake.stream_chunk_chars)
    firsts, first_added, all_added = [], [], []
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(
            url.replace("http", "ws") + f"/ws/agents/{agent_id}/", headers={"Cookie": cookie, "Origin": url}
        ) as ws:
            for i in range(runs + 2):
                fake.script(FakeLLM.reasoning(reasoning, "send_message", {"message": "done"}))
                first, added = await _one(ws, f"message {i}", fake, n_chunks)
                if i >= 2:  # the first runs warm up imports and connections
                    firsts.append(first)
                    first_added.append(added[0])
                    all_added.extend(added)
    return firsts, first_added, all_added


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--chunk-ms", type=float, default=40.0)
    args = parser.parse_args()
    data = tempfile.mkdtemp(prefix="bench-ttft-")
    env = {
        **os.environ,
        "AGENTS_IDE_DATA_DIR": data,
        "DJANGO_SETTINGS_MODULE": "agents_ide.settings",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "HF_HUB_OFFLINE": "1",
        "REDIS_URL": "",
        "RUNS_IN_WORKER": "",
    }
    env.pop("DATABASE_URL", None)
    os.environ.update({k: v for k, v in env.items() if k != "DATABASE_URL"})
    os.environ.pop("DATABASE_URL", None)

    from tests.fake_llm import FakeLLM
    from tests.helpers import free_port

    fake = FakeLLM(stream_chunk_chars=4).start()
    env.update(OPENAI_API_KEY="fake", OPENAI_BASE_URL=fake.base_url, ALLOWED_HOSTS="127.0.0.1")
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    import django

    django.setup()
    from django.conf import settings
    from django.test import Client

    from tests.factories import make_account, make_agent

    account = make_account("bench")
    agent = make_agent(account.org, name="ttft")
    client = Client()
    client.force_login(account.user)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env["CSRF_TRUSTED_ORIGINS"] = url
    server = subprocess.Popen(
        [sys.executable, "-m", "agents_ide.serve", "-b", "127.0.0.1", "-p", str(port), "agents_ide.asgi:application"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        import urllib.request

        for _ in range(300):
            try:
                urllib.request.urlopen(url + "/healthz", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        reasoning = "Let me think about this step by step before answering the question."
        _patch_pacing(fake, args.chunk_ms / 1000)
        firsts, first_added, all_added = asyncio.run(_drive(url, cookie, agent.id, fake, args.runs, reasoning))
    finally:
        server.terminate()
        server.wait(10)
        fake.stop()
    print(
        f"fake model: one chunk every {args.chunk_ms:g} ms; {args.runs} runs; embedded default (SQLite, in-process layer)"
    )
    print(_line("first chunk: server time added (model wrote → tab got)", first_added))
    print(_line("every chunk: server time added (model wrote → tab got)", all_added))
    print(_line("message sent → first chunk at the tab", firsts))


def _patch_pacing(fake, chunk_s: float) -> None:
    """Pace every scripted reply's stream (FakeLLM.reasoning builds replies without pacing)."""
    import dataclasses

    original = fake.script

    def script(*replies):
        return original(*[dataclasses.replace(r, chunk_s=chunk_s) for r in replies])

    fake.script = script


if __name__ == "__main__":
    main()
