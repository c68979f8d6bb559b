"""An experiment's figures from its case results, pure: scores per grader, pass rate against the gate, tokens, cost
and latency. The gate is Letta Evals' (letta_evals/models.py before 0.9: GateSpec): an aggregate of one grader's
scores — avg_score, or accuracy, the share of cases whose score passes — compared with a value."""

import statistics

OPS = {
    "gt": lambda a, b: a > b,
    "gte": lambda a, b: a >= b,
    "lt": lambda a, b: a < b,
    "lte": lambda a, b: a <= b,
    "eq": lambda a, b: a == b,
}
METRICS = ("avg_score", "accuracy")


def gate_problems(gate) -> list[str]:
    """What is wrong with a gate (empty: fine, or no gate)."""
    if not gate:
        return []
    if not isinstance(gate, dict):
        return ["the gate is an object: {metric_key, metric, op, value}"]
    problems = []
    if gate.get("metric", "avg_score") not in METRICS:
        problems.append("gate.metric is avg_score or accuracy")
    for key in ("op", "pass_op"):
        if gate.get(key, "gte") not in OPS:
            problems.append(f"gate.{key} is one of {', '.join(OPS)}")
    for key in ("value", "pass_value"):
        value = gate.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int | float):
            problems.append(f"gate.{key} is a number")
    if "value" not in gate:
        problems.append("gate.value is needed")
    return problems


def case_score(scores: list[dict], gate: dict) -> float | None:
    """The score the gate looks at for one case: its metric_key grader's (the first grader's without one)."""
    if not scores:
        return None
    key = (gate or {}).get("metric_key")
    chosen = next((s for s in scores if s["grader"] == key), None) if key else scores[0]
    return None if chosen is None else chosen["score"]


def case_passed(scores: list[dict], gate: dict) -> bool:
    """A case passes when its gate score passes the per-case threshold (pass_op/pass_value, else the gate's own);
    without a gate, when every grader passed."""
    if not gate:
        return bool(scores) and all(s["passed"] for s in scores)
    score = case_score(scores, gate)
    if score is None:
        return False
    op = OPS[gate.get("pass_op") or gate.get("op", "gte")]
    threshold = gate.get("pass_value", gate.get("value") if gate.get("metric", "avg_score") == "avg_score" else 1.0)
    return op(score, threshold)


def _graders(results: list[dict]) -> dict:
    out: dict[str, dict] = {}
    for result in results:
        for s in result["scores"]:
            row = out.setdefault(s["grader"], {"kind": s["kind"], "scores": [], "passed": 0, "errors": 0, "n": 0})
            row["n"] += 1
            row["errors"] += bool(s.get("error"))
            row["passed"] += bool(s.get("passed"))
            row["scores"].append(s["score"] if s["score"] is not None else 0.0)  # an error counts as 0, and is shown
    return {
        name: {
            "kind": row["kind"],
            "avg_score": round(statistics.fmean(row["scores"]), 4) if row["scores"] else None,
            "pass_rate": round(row["passed"] / row["n"], 4) if row["n"] else None,
            "errors": row["errors"],
            "n": row["n"],
        }
        for name, row in out.items()
    }


def aggregates(results: list[dict], gate: dict) -> dict:
    """The experiment's figures from its finished case results ({scores, passed, tokens, cost, latency, error})."""
    done = [r for r in results if r["status"] in ("done", "error")]
    graders = _graders(done)
    passed = sum(1 for r in done if r["passed"])
    latencies = sorted(r["latency_ms"] for r in done if r["latency_ms"] is not None)
    costs = [r["cost_usd"] for r in done]
    out = {
        "cases": len(results),
        "done": len(done),
        "passed": passed,
        "errors": sum(1 for r in done if r["error"]),
        "pass_rate": round(passed / len(done), 4) if done else None,
        "graders": graders,
        "prompt_tokens": sum(r["prompt_tokens"] for r in done),
        "completion_tokens": sum(r["completion_tokens"] for r in done),
        "cost_usd": None if any(c is None for c in costs) else round(sum(costs), 8),
        "latency_ms": {
            "mean": round(statistics.fmean(latencies), 1) if latencies else None,
            "p50": latencies[len(latencies) // 2] if latencies else None,
            "max": latencies[-1] if latencies else None,
        },
        "gate": None,
    }
    if gate and done:
        key = gate.get("metric_key") or next(iter(graders), None)
        metric = gate.get("metric", "avg_score")
        if metric == "accuracy":
            actual = round(passed / len(done), 4)
        else:
            scores = [case_score(r["scores"], gate) for r in done]
            actual = round(statistics.fmean(s or 0.0 for s in scores), 4) if scores else 0.0
        out["gate"] = {
            "metric_key": key,
            "metric": metric,
            "op": gate.get("op", "gte"),
            "value": gate["value"],
            "actual": actual,
            "passed": OPS[gate.get("op", "gte")](actual, gate["value"]),
        }
    return out


def gate_passed(figures: dict) -> bool:
    """Whether the experiment passes: its gate when it has one, else every case passed."""
    if figures["gate"] is not None:
        return figures["gate"]["passed"]
    return figures["done"] > 0 and figures["passed"] == figures["done"]
