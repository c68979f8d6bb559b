"""A hostile grep and another account's requests, through the real HTTP API (prints figures).

    .venv/bin/python bench/redos.py [--line-a 100000] [--lines 80] [--greps 20] [--requests 200]

Starts a daphne server on a throwaway SQLite database. Bob's agent has a folder with a text file of `--lines` lines,
each `--line-a` a's and a "!", the input on which `(a+)+$` makes Python's backtracking `re` take about 2**n steps
(issue 51: 28 a's took 20.8 s and Alice's `GET /v1/agents/` waited 16.8 s). Bob runs grep_files with that pattern
through `POST /v1/agents/{id}/tools/grep_files/run`, `--greps` times in a row, while Alice lists her agents over and
over: the figures are each grep's time and Alice's p50/p95 before and during the greps. For scale, the time Python's
`re` takes on 22 and 24 a's is printed too (it doubles with each more a).
"""

import argparse
import os
import re
import statistics
import time

import httpx
from benchlib import bystander, django_ready, live_server, machine_speed_s, p50_p95, throwaway_sqlite, timed_gets

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
PATTERN = "(a+)+$"


def _setup(line_a: int, lines: int):
    """Bob (an agent, its folder holding the hostile file, processed) and Alice (one agent); their tokens."""
    django_ready()
    from memory.files import services
    from memory.files.ingest import file_ingest
    from tests.factories import make_account, make_agent

    bob, alice = make_account("bob"), make_account("alice")
    agent = make_agent(bob.org, name="grepper")
    make_agent(alice.org, name="bystander")
    folder = services.folder_create(owner=bob.org, name="bombs")
    data = ("\n".join(["a" * line_a + "!"] * lines)).encode()
    file, _ = services.file_upload(folder=folder, file_name="bomb.txt", content_type="text/plain", data=data)
    status = file_ingest(file_id=file.id)
    assert status == "completed", type(file).objects.get(pk=file.pk).error_message
    return bob.token, alice.token, agent.id, folder.id, len(data)


def _python_re_s(n: int) -> float:
    started = time.perf_counter()
    re.search(PATTERN, "a" * n + "!")  # the backtracking this bench is about, on a small n
    return time.perf_counter() - started


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--line-a", type=int, default=100_000, help="a's on each line of the hostile file")
    p.add_argument("--lines", type=int, default=80)
    p.add_argument("--greps", type=int, default=20)
    p.add_argument("--requests", type=int, default=200, help="Alice's requests before the greps")
    args = p.parse_args()

    speed = machine_speed_s()
    throwaway_sqlite("bench-redos-")
    bob, alice, agent_id, folder_id, size = _setup(args.line_a, args.lines)
    with live_server({**os.environ, "OPENAI_API_KEY": "fake"}, "redos") as (base, _server):
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {bob}"}, timeout=600) as client:
            client.patch(f"/v1/agents/{agent_id}/folders/attach/{folder_id}").raise_for_status()
            grep = f"/v1/agents/{agent_id}/tools/grep_files/run"
            first = client.post(grep, json={"args": {"pattern": PATTERN}}).json()  # warm: the file's lines numbered
            assert first["status"] == "success", first
            before = timed_gets(base, alice, args.requests)
            greps = []
            with bystander(base, alice) as during:
                for _ in range(args.greps):
                    started = time.perf_counter()
                    answer = client.post(grep, json={"args": {"pattern": PATTERN}}).json()
                    greps.append((time.perf_counter() - started) * 1000)
                    assert answer["func_return"].startswith("No matches found"), answer
    print(f"machine's loop {speed:.2f} s; hostile file {size / 1e6:.1f} MB ({args.lines} lines of {args.line_a} a's)")
    print(f"Python's re on {PATTERN} (for scale): 22 a's {_python_re_s(22):.2f} s, 24 a's {_python_re_s(24):.2f} s")
    print(
        f"grep_files {PATTERN} over the file, {len(greps)} calls: p50 {statistics.median(greps):.0f} ms, "
        f"max {max(greps):.0f} ms"
    )
    print(
        f"Alice's GET /v1/agents/: before {p50_p95(before)}; during the greps ({len(during)} requests) {p50_p95(during)}"
    )


if __name__ == "__main__":
    main()
