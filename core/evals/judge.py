"""Rubric graders: a model judges a case's extracted output against a rubric (network I/O, one model call)."""

import time

from django.conf import settings

from core.engine.graders import Grade, JudgeAnswerError, judge_parse, judge_prompt
from core.engine.tokens import step_cost
from core.errors import DomainError
from core.llm import client as llm
from core.models import Organization
from core.providers import ResolvedModel, model_resolve


def judge_model(*, owner: Organization, handle: str, judges: dict[str, ResolvedModel] | None = None) -> ResolvedModel:
    """The judge's model resolved (reads the owner's providers); `judges`, when given, keeps it for the next case of
    the same experiment run, so each judge is resolved once a run (a provider changed meanwhile applies from the
    next run). NotConfigured as model_resolve."""
    found = judges.get(handle) if judges is not None else None
    if found is None:
        found = model_resolve(owner=owner, handle=handle)
        if judges is not None:
            judges[handle] = found
    return found


def rubric_grade(
    *,
    owner: Organization,
    name: str,
    spec: dict,
    case: dict,
    submission: str,
    judges: dict[str, ResolvedModel] | None = None,
) -> tuple[Grade, dict]:
    """Ask the spec's judge model (resolved through `judges`, judge_model) to score the submission; returns the grade
    and the call's usage ({prompt_tokens, completion_tokens, cost_usd, latency_ms}). Never raises: a judge that cannot
    be reached or whose answer is not the strict JSON asked for is a grade with its error and no score."""
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0, "latency_ms": 0.0}
    try:
        prompt = judge_prompt(
            spec["prompt"],
            turns=case["turns"],
            ground_truth=case.get("ground_truth"),
            submission=submission,
            rubric_vars=case.get("rubric_vars") or {},
        )
    except (KeyError, ValueError, IndexError) as exc:
        return Grade(name, "rubric", None, None, "", error=f"the rubric cannot be filled: {exc}"), usage
    try:
        resolved = judge_model(owner=owner, handle=spec["model"], judges=judges)
        started = time.perf_counter()
        result = llm.complete(
            {
                "model": resolved.litellm_model,
                "messages": [{"role": "user", "content": prompt}],
                "temperature": float(spec.get("temperature", 0.0)),
            },
            api_base=resolved.api_base,
            api_key=resolved.api_key,
            timeout=float(spec.get("timeout") or settings.LLM_TIMEOUT_S),
            guarded=resolved.guarded,
        )
        usage["latency_ms"] = round((time.perf_counter() - started) * 1000, 3)
    except (llm.LLMError, DomainError) as exc:
        return Grade(name, "rubric", None, None, "", error=f"the judge could not be called: {exc.message}"), usage
    tokens = {"prompt_tokens": result.usage.prompt_tokens, "completion_tokens": result.usage.completion_tokens}
    usage.update(tokens, cost_usd=step_cost(spec["model"], tokens))
    try:
        score, rationale = judge_parse(result.content)
    except JudgeAnswerError as exc:
        return Grade(name, "rubric", None, None, "", error=f"malformed judge answer: {exc}"), usage
    threshold = float(spec.get("pass_value", 0.5))
    return Grade(name, "rubric", score, score >= threshold, rationale), usage
