"""Letta Evals (letta-evals, pinned in evals-requirements.txt, in its own virtualenv: tests/clients/evals_deps.py)
run unchanged against our server: its Letta Code target drives the pinned Letta Code, one shared agent, every sample
a new conversation of it (`--new`), three at once (`--max-concurrent 3`), graded by its own `contains` grader.
Its price table is the one litellm ships, put where letta-evals caches it, so nothing is fetched."""

import json
import re
import shutil
import subprocess
import threading
from pathlib import Path

import litellm
import pytest

from tests.clients import evals_deps
from tests.clients.node_deps import NODE_MODULES
from tests.fake_llm import Reply

MODEL = "openai/fake-model"
# (word the sample asks for, its ground truth): the last one is graded against another word, so it scores 0
SAMPLES = [("apple", "apple"), ("pear", "pear"), ("plum", "plum"), ("fig", "fig"), ("kiwi", "kiwi"), ("lime", "lemon")]
ASKED = re.compile(r"Reply with the single word (\w+)\.")

SUITE = """\
name: shared-agent-threads
dataset: dataset.jsonl
target:
  kind: letta_code
  model_handles: ["{model}"]
  agent_script: agent.py:shared_agent
  flags: "--new"
graders:
  word:
    kind: tool
    function: contains
    extractor: all_assistant
reward:
  kind: metric
  metric_key: word
cleanup: false
"""

AGENT_SCRIPT = '''\
import os


async def shared_agent(client, sample):
    """Every sample runs on the one agent the test made (letta-evals calls this per sample)."""
    return os.environ["SHARED_AGENT_ID"]
'''


@pytest.fixture(scope="session")
def letta_evals_cli():
    try:
        return evals_deps.ensure_installed()
    except evals_deps.EvalsDepsError as exc:
        pytest.fail(f"letta-evals could not be installed: {exc}", pytrace=False)


class Overlap:
    """The fake model's answers to the samples: the word each asks for; the first sample's request waits (at most
    30 s) until a second sample's request is being answered beside it, so `peak` says whether two threads of the
    agent ran at once."""

    def __init__(self):
        self.cond = threading.Condition()
        self.active = 0
        self.peak = 0

    def reply(self, req: dict) -> Reply:
        last_user = next((m for m in reversed(req.get("messages") or []) if m.get("role") == "user"), {})
        asked = ASKED.search(json.dumps(last_user.get("content")))
        if not asked:
            return Reply(content="ok")
        with self.cond:
            self.active += 1
            self.peak = max(self.peak, self.active)
            self.cond.notify_all()
            self.cond.wait_for(lambda: self.peak >= 2, timeout=30)
            self.active -= 1
        return Reply(content=asked.group(1))


def test_letta_evals_scores_samples_run_three_at_once_on_one_shared_agent(
    letta_evals_cli, client_env, daphne_server, fake_llm, api, tmp_path, monkeypatch
):
    overlap = Overlap()
    monkeypatch.setattr(fake_llm, "_next_reply", overlap.reply)
    agent = api.post("/v1/agents/", {"name": "shared-eval-agent", "model": MODEL, "agent_type": "letta_v1_agent"})
    assert agent.status_code == 201, agent.text
    suite = tmp_path / "suite"
    suite.mkdir()
    lines = [
        {"id": i, "input": f"Reply with the single word {w}.", "ground_truth": t} for i, (w, t) in enumerate(SAMPLES)
    ]
    (suite / "dataset.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (suite / "suite.yaml").write_text(SUITE.format(model=MODEL))
    (suite / "agent.py").write_text(AGENT_SCRIPT)
    cache = tmp_path / "evals-cache"  # letta-evals reads its price table here for 30 minutes before refetching
    cache.mkdir()
    shutil.copy(
        Path(litellm.__file__).parent / "model_prices_and_context_window_backup.json", cache / "model_prices.json"
    )
    env = {
        **client_env,
        "PATH": f"{NODE_MODULES / '.bin'}:{client_env['PATH']}",  # the `letta` it runs is the pinned Letta Code
        "SHARED_AGENT_ID": agent.json()["id"],
        "LETTA_EVALS_CACHE_DIR": str(cache),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    out = tmp_path / "results"
    cmd = [
        str(letta_evals_cli),
        "run",
        "suite.yaml",
        "--max-concurrent",
        "3",
        "--output",
        str(out),
        "--display",
        "none",
    ]
    cmd += ["--base-url", client_env["LETTA_BASE_URL"], "--api-key", client_env["LETTA_API_KEY"]]
    done = subprocess.run(cmd, cwd=suite, env=env, capture_output=True, text=True, timeout=600)
    print(f"exit {done.returncode}\nstdout:\n{done.stdout[-4000:]}\nstderr:\n{done.stderr[-4000:]}")

    results = [json.loads(line) for f in sorted(out.glob("*.jsonl")) for line in f.read_text().splitlines() if line]
    assert len(results) == len(SAMPLES), (done.returncode, results)
    assert [r["sample_id"] for r in results if r.get("error")] == [], [r["error"] for r in results if r.get("error")]
    scores = {r["sample_id"]: r["grades"]["word"]["score"] for r in results}
    assert scores == {i: (1.0 if w == t else 0.0) for i, (w, t) in enumerate(SAMPLES)}, scores
    assert overlap.peak >= 2, "no two samples' threads of the agent ran at once"
    conversations = {e["path"].split("/")[3] for e in daphne_server.requests() if "/conversations/conv-" in e["path"]}
    assert len(conversations) == len(SAMPLES), conversations  # each sample its own thread of the one agent
    busy = [e for e in daphne_server.requests() if e["status"] == 409]
    assert not busy, busy
