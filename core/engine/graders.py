"""Eval graders, pure: what is extracted from a case's run and how it is scored (Letta Evals' extractor → grader).

`observed` is the plain data an agent test gathers after its turns ran (core.evals.runner.observed_gather), so a
deterministic grader is an agent test's expectation: `tool_calls`, `memory_block`, `stop_reason`, `max_tokens` and
`max_cost` are checked by core.engine.expectations itself, and an `expect` grader takes a whole agent test's spec.
Text graders (`exact`, `contains`, `regex`, `json_path`) compare an extractor's output with a value or the case's
ground truth. A `rubric` grader is judged by a model: this module builds the judge's prompt and parses its answer
strictly; the call itself is core.evals.judge's.
"""

from __future__ import annotations

import json
import math
import string
from dataclasses import dataclass
from typing import Any

from core.engine import expectations

EXTRACTORS = (
    "last_assistant",
    "first_assistant",
    "all_assistant",
    "last_turn",
    "tool_output",
    "tool_arguments",
    "memory_block",
)
TEXT_KINDS = ("exact", "contains", "regex", "json_path")
EXPECT_KINDS = ("tool_calls", "memory_block", "stop_reason", "max_tokens", "max_cost", "expect")
KINDS = (*TEXT_KINDS, *EXPECT_KINDS, "rubric")
# Letta Evals' tool-grader function names, read on import.
LETTA_FUNCTIONS = {"exact_match": "exact", "contains": "contains", "regex_match": "regex"}
RESERVED_VARS = ("input", "ground_truth", "submission")
MAX_JUDGE_ANSWER = 20_000


@dataclass(frozen=True)
class Grade:
    """One grader's verdict on one case: a score in [0, 1] and why, or the error that kept it from grading."""

    grader: str
    kind: str
    score: float | None
    passed: bool | None
    reason: str
    error: str = ""
    failures: tuple = ()  # a deterministic grader's failed expectations (core.engine.expectations), each with its step

    def as_dict(self) -> dict:
        out = {
            "grader": self.grader,
            "kind": self.kind,
            "score": self.score,
            "passed": self.passed,
            "reason": self.reason,
            "error": self.error,
        }
        return out | ({"failures": list(self.failures)} if self.failures else {})


class JudgeAnswerError(ValueError):
    """The judge's answer is not {"score": number in [0, 1], "rationale": text}."""


# --------------------------------------------------------------------------- extractors


def extract(spec: dict, observed: dict) -> str:
    """The text the grader judges, taken from the observed run by the spec's extractor (default last_assistant)."""
    name = spec.get("extractor") or "last_assistant"
    config = spec.get("extractor_config") or {}
    replies = observed.get("replies") or []
    if name == "last_assistant":
        return replies[-1] if replies else ""
    if name == "first_assistant":
        return replies[0] if replies else ""
    if name == "all_assistant":
        return "\n".join(replies)
    if name == "last_turn":
        turns = observed.get("turn_replies") or []
        return "\n".join(turns[-1]) if turns else ""
    if name in ("tool_output", "tool_arguments"):
        wanted = config.get("tool_name")
        calls = [c for c in observed.get("tool_returns") or [] if not wanted or c["name"] == wanted]
        if not calls:
            return ""
        if name == "tool_output":
            return str(calls[-1].get("output") or "")
        return json.dumps(calls[-1].get("arguments") or {}, sort_keys=True)
    if name == "memory_block":
        return (observed.get("blocks") or {}).get(config.get("block_label") or "", "")
    raise ValueError(f"unknown extractor {name!r}")


# --------------------------------------------------------------------------- deterministic graders


def _expected_value(spec: dict, ground_truth) -> Any:
    if "value" in spec:
        return spec["value"]
    if isinstance(ground_truth, list):
        return ground_truth[-1] if ground_truth else None
    return ground_truth


def _json_path(document: Any, path: str) -> Any:
    """The value at a simple JSON path (`$.a.b[0]`, `a.b.0`); KeyError when it is not there."""
    node = document
    for part in path.removeprefix("$").replace("[", ".").replace("]", "").split("."):
        if not part:
            continue
        if isinstance(node, list) and part.lstrip("-").isdigit():
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise KeyError(part)
    return node


def _text_grade(name: str, spec: dict, output: str, ground_truth) -> Grade:
    kind = spec["kind"]
    expected = _expected_value(spec, ground_truth)
    if kind == "json_path":
        try:
            found = _json_path(json.loads(output), spec["path"])
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            return Grade(name, kind, 0.0, False, f"no value at {spec['path']} in the output ({type(exc).__name__})")
        ok = found == expected
        return Grade(name, kind, float(ok), ok, f"{spec['path']} is {found!r}, expected {expected!r}")
    if expected is None:
        # Letta Evals' tool graders score a sample without a ground truth 0, saying so (graders/builtin.py)
        return Grade(name, kind, 0.0, False, "no ground truth (or value) to compare with")
    expected = str(expected)
    if kind == "exact":
        ok = output.strip() == expected.strip()
    elif kind == "contains":
        ok = expected.lower() in output.lower()  # Letta Evals' contains ignores case
    else:
        ok = not expectations.evaluate({"reply": {"matches": expected}}, {"reply": output})
    verb = {"exact": ("equals", "equal"), "contains": ("contains", "contain"), "regex": ("matches", "match")}[kind]
    reason = f"output {verb[0]} {expected!r}" if ok else f"output does not {verb[1]} {expected!r}"
    return Grade(name, kind, float(ok), ok, reason)


def expect_spec(spec: dict) -> dict:
    """The agent-test expectations a deterministic grader stands for."""
    kind = spec["kind"]
    if kind == "expect":
        return spec["expect"]
    if kind == "tool_calls":
        return {"tools": {"calls": spec["calls"], "order": spec.get("order", "sequence")}}
    if kind == "memory_block":
        check = next(k for k in expectations.TEXT_KINDS if k in spec)
        return {"blocks": [{"label": spec["label"], check: spec[check]}]}
    if kind == "stop_reason":
        return {"stop_reason": spec["value"]}
    if kind == "max_tokens":
        return {"max_prompt_tokens_per_step": spec["value"]}
    return {"max_cost_usd": spec["value"]}


def _failure_text(failure: dict) -> str:
    step = f" (step {failure['step_id']})" if failure.get("step_id") else ""
    return f"{failure['expectation']}: expected {failure['expected']!r}, got {failure['actual']!r}{step}"


def grade_deterministic(name: str, spec: dict, observed: dict, ground_truth=None) -> Grade:
    """Score one deterministic grader: 1 when it holds, 0 with the failed checks as the reason."""
    if spec["kind"] in TEXT_KINDS:
        return _text_grade(name, spec, extract(spec, observed), ground_truth)
    failures = expectations.evaluate(expect_spec(spec), observed)
    if spec["kind"] == "max_tokens" and not failures and "total" in spec:
        total = observed.get("tokens", {}).get("total", 0)
        if total > spec["total"]:
            failures = [{"expectation": "tokens at most", "expected": spec["total"], "actual": total}]
    if failures:
        reason = "; ".join(_failure_text(f) for f in failures)
        return Grade(name, spec["kind"], 0.0, False, reason, failures=tuple(failures))
    return Grade(name, spec["kind"], 1.0, True, "every expectation held")


# --------------------------------------------------------------------------- rubric graders


def judge_prompt(rubric: str, *, turns: list[str], ground_truth, submission: str, rubric_vars: dict) -> str:
    """The rubric with Letta Evals' placeholders filled ({input}, {ground_truth}, {submission}, rubric_vars); the
    judge is told to answer in JSON. KeyError for a placeholder nothing fills."""
    values = {
        "input": turns[0] if len(turns) == 1 else str(turns),
        "ground_truth": "" if ground_truth is None else str(ground_truth),
        "submission": submission,
        **{k: str(v) for k, v in (rubric_vars or {}).items() if k not in RESERVED_VARS},
    }
    text = string.Formatter().vformat(rubric, (), values)
    if "{submission}" not in rubric:
        text += f"\n\nSubmission:\n{submission}"
    return (
        text
        + '\n\nAnswer with only a JSON object: {"score": <a number from 0.0 to 1.0>, "rationale": "<why, briefly>"}'
    )


def judge_parse(content: str | None) -> tuple[float, str]:
    """The judge's score and rationale, read strictly: one JSON object (a ```json fence allowed) with a numeric score
    in [0, 1] and a string rationale; JudgeAnswerError otherwise, never a silent 0."""
    text = (content or "").strip()
    if not text:
        raise JudgeAnswerError("the judge answered nothing")
    if len(text) > MAX_JUDGE_ANSWER:
        raise JudgeAnswerError(f"the judge's answer is over {MAX_JUDGE_ANSWER} characters")
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    try:
        answer = json.loads(text)
    except ValueError:
        raise JudgeAnswerError(f"the judge's answer is not JSON: {text[:200]!r}") from None
    if not isinstance(answer, dict):
        raise JudgeAnswerError("the judge's answer is not a JSON object")
    score = answer.get("score")
    if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
        raise JudgeAnswerError(f"the judge's score is not a number: {score!r}")
    if not 0 <= score <= 1:
        raise JudgeAnswerError(f"the judge's score {score} is outside 0 to 1")
    rationale = answer.get("rationale", answer.get("reason", ""))
    if not isinstance(rationale, str):
        raise JudgeAnswerError("the judge's rationale is not text")
    return float(score), rationale


# --------------------------------------------------------------------------- specs


def grader_problems(spec) -> list[str]:
    """What is wrong with a grader spec, as readable problems (empty: it can be run)."""
    if not isinstance(spec, dict) or spec.get("kind") not in KINDS:
        return [f"a grader is an object with a kind, one of {', '.join(KINDS)}"]
    kind, problems = spec["kind"], []
    if not isinstance(spec.get("name", ""), str) or len(spec.get("name", "")) > 100:
        problems.append("a grader's name is text of at most 100 characters")
    if (spec.get("extractor") or "last_assistant") not in EXTRACTORS:
        problems.append(f"unknown extractor {spec.get('extractor')!r} (known: {', '.join(EXTRACTORS)})")
    if spec.get("extractor_config") is not None and not isinstance(spec["extractor_config"], dict):
        problems.append('extractor_config is an object, such as {"tool_name": "..."}')
    if kind == "regex" and isinstance(spec.get("value"), str):
        problems += expectations.validate({"reply": {"matches": spec["value"]}})
    if kind == "json_path" and not isinstance(spec.get("path"), str):
        problems.append('a json_path grader needs a path, such as "$.answer"')
    if kind in EXPECT_KINDS:
        if kind == "memory_block" and not any(k in spec for k in expectations.TEXT_KINDS):
            return problems + ["a memory_block grader needs a label and one of contains, matches, equals"]
        if kind in ("stop_reason", "max_tokens", "max_cost") and "value" not in spec:
            return problems + [f"a {kind} grader needs a value"]
        if kind == "expect" and not isinstance(spec.get("expect"), dict):
            return problems + ["an expect grader needs the agent test's expectations under 'expect'"]
        problems += expectations.validate(expect_spec(spec))
    if kind == "rubric":
        if not isinstance(spec.get("prompt"), str) or not spec["prompt"].strip():
            problems.append("a rubric grader needs a prompt (the rubric)")
        if not isinstance(spec.get("model"), str) or not spec["model"]:
            problems.append("a rubric grader needs the judge's model handle, such as openai/gpt-4o-mini")
    return problems


def grader_name(spec: dict, index: int) -> str:
    return spec.get("name") or f"{spec['kind']}{index + 1 if index else ''}"
