"""Two experiments side by side, case by case (reads only): which cases got better, worse or stayed, both replies and
grader reasons next to each other, and the aggregate deltas. One typed value serves the API and the page."""

from dataclasses import asdict, dataclass, field

from core.errors import Invalid
from core.models import CaseResult, Experiment

VERDICTS = ("better", "worse", "same", "only_a", "only_b")


@dataclass(frozen=True)
class CaseSide:
    result_id: int
    status: str
    score: float | None
    passed: bool | None
    output: str
    scores: list[dict]
    run_ids: list[str]
    copy_agent_id: str
    error: str


@dataclass(frozen=True)
class CaseComparison:
    case_id: str | None
    name: str
    verdict: str  # better | worse | same (b against a) | only_a | only_b
    a: CaseSide | None
    b: CaseSide | None
    changes: list[dict] = field(default_factory=list)  # the graders whose verdict moved: why the case changed


@dataclass(frozen=True)
class Comparison:
    a_id: str
    b_id: str
    cases: list[CaseComparison]
    counts: dict[str, int]
    deltas: dict[str, float | None] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def _side(r: CaseResult) -> CaseSide:
    return CaseSide(
        result_id=r.pk,
        status=r.status,
        score=r.score,
        passed=r.passed,
        output=r.output,
        scores=r.scores,
        run_ids=r.run_ids,
        copy_agent_id=r.copy_agent_id,
        error=r.error,
    )


def _rank(side: CaseSide) -> tuple:
    """What 'better' means: passing first, then the gate's score (an error or a missing score is worst)."""
    return (bool(side.passed), side.score if side.score is not None else -1.0)


def _verdict(a: CaseSide | None, b: CaseSide | None) -> str:
    if a is None:
        return "only_b"
    if b is None:
        return "only_a"
    if _rank(b) > _rank(a):
        return "better"
    if _rank(b) < _rank(a):
        return "worse"
    return "same"


def _changes(a: CaseSide | None, b: CaseSide | None) -> list[dict]:
    """Each grader whose score, pass or error differs between the two sides: {grader, a, b, reason} (b's reason, or
    its error)."""
    if a is None or b is None:
        return []
    before = {s.get("grader"): s for s in a.scores or []}
    out = []
    for s in b.scores or []:
        was = before.get(s.get("grader")) or {}
        if (was.get("score"), was.get("passed"), bool(was.get("error"))) != (
            s.get("score"),
            s.get("passed"),
            bool(s.get("error")),
        ):
            reason = s.get("error") or s.get("reason") or ""
            out.append({"grader": s.get("grader"), "a": was.get("score"), "b": s.get("score"), "reason": reason})
    return out


def _delta(a: dict, b: dict, *path: str) -> float | None:
    for key in path:
        a, b = (a or {}).get(key), (b or {}).get(key)
    if a is None or b is None:
        return None
    return round(b - a, 8)


def experiments_compare(*, a: Experiment, b: Experiment, only: str | None = None) -> Comparison:
    """Compare experiment b against a, case by case (cases matched by their dataset case); `only` keeps one verdict
    (e.g. "worse": the regressions). Invalid for experiments of different datasets or an unknown verdict."""
    if a.dataset_id != b.dataset_id:
        raise Invalid("Only experiments of the same dataset can be compared.")
    if only is not None and only not in VERDICTS:
        raise Invalid(f"Filter by one of {', '.join(VERDICTS)}.")
    left = {r.case_id or f"#{r.position}": r for r in a.results.order_by("position")}
    right = {r.case_id or f"#{r.position}": r for r in b.results.order_by("position")}
    cases = []
    for key in list(left) + [k for k in right if k not in left]:
        ra, rb = left.get(key), right.get(key)
        sa, sb = (_side(ra) if ra else None), (_side(rb) if rb else None)
        name = (ra or rb).name
        verdict = _verdict(sa, sb)
        cases.append(
            CaseComparison(case_id=(ra or rb).case_id, name=name, verdict=verdict, a=sa, b=sb, changes=_changes(sa, sb))
        )
    counts = {v: sum(1 for c in cases if c.verdict == v) for v in VERDICTS}
    fa, fb = a.aggregates or {}, b.aggregates or {}
    deltas = {
        "pass_rate": _delta(fa, fb, "pass_rate"),
        "gate": _delta(fa, fb, "gate", "actual"),
        "prompt_tokens": _delta(fa, fb, "prompt_tokens"),
        "completion_tokens": _delta(fa, fb, "completion_tokens"),
        "cost_usd": _delta(fa, fb, "cost_usd"),
        "latency_ms": _delta(fa, fb, "latency_ms", "mean"),
        **{
            f"grader:{name}": _delta(fa, fb, "graders", name, "avg_score")
            for name in sorted(set(fa.get("graders") or {}) | set(fb.get("graders") or {}))
        },
    }
    if only:
        cases = [c for c in cases if c.verdict == only]
    return Comparison(a_id=a.id, b_id=b.id, cases=cases, counts=counts, deltas=deltas)
