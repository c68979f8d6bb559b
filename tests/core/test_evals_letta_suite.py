"""A Letta Evals suite in Letta's current format (letta-evals 0.25: a letta_code target with model_handles, tool and
model_judge graders, `reward: {kind: metric}`; letta_evals/models/specs.py) and its JSONL run here by `manage.py eval
run` score every sample as Letta's CLI does against this server: its tool graders' rules (graders/builtin.py:
contains ignoring case, exact_match after strip, regex_match by search, 0 without a ground truth), its extractors
(extractors/builtin.py: all_assistant joined by newlines), the judge's {score, rationale}, and the reward as the mean
of the metric_key grader. The samples and their expected scores are those tests/clients/test_letta_evals.py gets
from Letta's CLI itself; exported again, the suite is Letta's current shape."""

import json
import re

import pytest
import yaml
from django.core.management import call_command

from core.evals import suite
from core.models import CaseResult, Dataset
from tests.factories import make_agent
from tests.fake_llm import FakeLLM

pytestmark = pytest.mark.django_db(transaction=True)

# (word the sample asks for, its ground truth): as in the client test, the last is graded against another word
SAMPLES = [("apple", "apple"), ("pear", "pear"), ("plum", "plum"), ("fig", "fig"), ("kiwi", "kiwi"), ("lime", "lemon")]
ASKED = re.compile(r"Reply with the single word (\w+)\.")
SUITE = """\
name: words
dataset: dataset.jsonl
target:
  kind: letta_code
  model_handles: ["openai/fake-model"]
  flags: "--new"
graders:
  exact:
    kind: tool
    function: exact_match
    extractor: last_assistant
  word:
    kind: tool
    function: contains
    extractor: all_assistant
  pattern:
    kind: tool
    function: regex_match
    extractor: last_assistant
  judged:
    kind: model_judge
    prompt: "Expected {ground_truth}; got {submission}"
    model: judge
    provider: openai
reward:
  kind: metric
  metric_key: word
cleanup: false
"""


def _answer(req: dict):
    """The agent says the word asked, capitalised (so exact_match fails where contains and a (?i) regex pass); the
    judge gives 1 when the expected word is in the answer, whatever its case, else 0.25."""
    messages = req.get("messages") or []
    if req.get("model") == "judge":
        expected, got = re.search(r"Expected (.*); got (.*?)\n", messages[-1]["content"]).groups()
        score = 1 if expected.lower() in got.lower() else 0.25
        return FakeLLM.text(json.dumps({"score": score, "rationale": f"{got} for {expected}"}))
    last_user = next((m for m in reversed(messages) if m.get("role") == "user"), {})
    asked = ASKED.search(json.dumps(last_user.get("content")))
    return FakeLLM.text(asked.group(1).capitalize() if asked else "ok")


def test_a_letta_evals_suite_scores_here_as_letta_cli_scores_it(account, fake_llm, tmp_path, capsys):
    agent = make_agent(account.org, name="words", agent_type="letta_v1_agent")
    fake_llm.responder = _answer
    rows = [
        {"id": i, "input": f"Reply with the single word {w}.", "ground_truth": t} for i, (w, t) in enumerate(SAMPLES)
    ]
    rows[2]["ground_truth"] = "(?i)^pl"  # a pattern, for regex_match
    rows.append({"id": len(rows), "input": "Reply with the single word mango."})  # no ground truth
    (tmp_path / "dataset.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "suite.yaml").write_text(SUITE)

    with pytest.raises(SystemExit) as exit_:  # no gate (Letta's has none since 0.9): every case must pass every grader
        call_command("eval", "run", str(tmp_path / "suite.yaml"), agent=agent.id)
    assert exit_.value.code == 1

    dataset = Dataset.objects.get(name="words")
    assert [g["name"] for g in dataset.graders] == ["word", "exact", "pattern", "judged"]  # the reward's first
    results = list(CaseResult.objects.filter(experiment__dataset=dataset).order_by("position"))
    scores = [{s["grader"]: s["score"] for s in r.scores} for r in results]
    assert [s["word"] for s in scores] == [1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0]  # what Letta's CLI gives
    assert [s["exact"] for s in scores] == [0.0] * 7  # "Apple" is not "apple" once stripped
    assert [s["pattern"] for s in scores] == [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]  # "apple" searched in "Apple"...
    assert [s["judged"] for s in scores] == [1.0, 1.0, 0.25, 1.0, 1.0, 0.25, 1.0]  # {ground_truth} is "" if none
    assert all(not s["error"] for r in results for s in r.scores)
    missing = {s["grader"]: s["reason"] for s in results[-1].scores}
    assert missing["word"] == "no ground truth (or value) to compare with"
    printed = capsys.readouterr().out
    assert "reward mean of word = 0.5714" in printed  # 4 of 7, as Letta's `Reward: mean=0.5714`

    exported = yaml.safe_load(suite.suite_export(dataset=dataset))
    assert "gate" not in exported and exported["reward"] == {"kind": "metric", "metric_key": "word"}
    assert exported["target"] == {"kind": "letta_code", "model_handles": ["openai/fake-model"]}
    assert exported["graders"]["word"] == {"kind": "tool", "function": "contains", "extractor": "all_assistant"}
    assert exported["graders"]["judged"]["kind"] == "model_judge" and exported["graders"]["judged"]["model"] == "judge"
    assert exported["agents_ide"] == {"agent_id": agent.id}
