"""A run of an agent's tests becomes an experiment of its tests dataset (one table for runs of cases, not two): each
AgentTestRun moves to an Experiment with its id, one CaseResult a test (its expectations' failures the expect grade's,
the copy kept or not as it was), and the version it ran against on Experiment.version_at_start; then AgentTestRun
goes. An experiment's existing results learn their case's id (case_key). Migrated back, the experiments of tests
datasets become test runs again."""

from django.db import migrations, models

from core import ids

STATUS = {"created": "queued", "running": "running", "passed": "completed", "failed": "completed"}


def _name(agent, model: str) -> str:
    return (f"Tests · {agent.name}" + (f" · {model}" if model else ""))[:200]


def _score(result: dict) -> dict:
    passed, failures = bool(result.get("passed")), result.get("failures") or []
    reason = "every expectation held" if passed else "; ".join(str(f.get("expectation")) for f in failures)
    grade = {"grader": "expectations", "kind": "expect", "score": float(passed), "passed": passed, "reason": reason}
    return grade | {"error": ""} | ({"failures": failures} if failures else {})


def _case_result(experiment, position: int, test_id: str, result: dict | None, case, done_at) -> dict:
    row = {"experiment": experiment, "case": case, "case_key": test_id[:64], "position": position}
    if result is None:
        return row | {"name": case.name if case else test_id[:200], "status": "pending"}
    error = result.get("error") or ""
    return row | {
        "name": (result.get("name") or (case.name if case else test_id))[:200],
        "status": "error" if error else "done",
        "run_ids": result.get("run_ids") or [],
        "copy_agent_id": result.get("copy_agent_id") or "",
        "scores": [] if error else [_score(result)],
        "score": None if error else float(bool(result.get("passed"))),
        "passed": bool(result.get("passed")) and not error,
        "steps": result.get("steps"),
        "cost_usd": result.get("cost_usd"),
        "latency_ms": result.get("duration_ms"),
        "error": error,
        "completed_at": done_at,
    }


def _aggregates(rows: list[dict]) -> dict:
    """The figures core.evals.aggregate computes, for results that carry no tokens."""
    done = [r for r in rows if r["status"] in ("done", "error")]
    passed = sum(1 for r in done if r["passed"])
    graded = [r for r in done if r["scores"]]
    latencies = sorted(r["latency_ms"] for r in done if r.get("latency_ms") is not None)
    costs = [r.get("cost_usd") for r in done]
    return {
        "cases": len(rows),
        "done": len(done),
        "passed": passed,
        "errors": sum(1 for r in done if r["error"]),
        "pass_rate": round(passed / len(done), 4) if done else None,
        "graders": {
            "expectations": {
                "kind": "expect",
                "avg_score": round(sum(r["score"] for r in graded) / len(graded), 4),
                "pass_rate": round(sum(1 for r in graded if r["passed"]) / len(graded), 4),
                "errors": 0,
                "n": len(graded),
            }
        }
        if graded
        else {},
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "cost_usd": None if any(c is None for c in costs) else round(sum(costs), 8),
        "latency_ms": {
            "mean": round(sum(latencies) / len(latencies), 1) if latencies else None,
            "p50": latencies[len(latencies) // 2] if latencies else None,
            "max": latencies[-1] if latencies else None,
        },
        "gate": None,
    }


def runs_to_experiments(apps, schema_editor):
    AgentTestRun, Dataset, EvalCase, Experiment, CaseResult = (
        apps.get_model("core", m) for m in ("AgentTestRun", "Dataset", "EvalCase", "Experiment", "CaseResult")
    )
    CaseResult.objects.filter(case__isnull=False).update(case_key=models.F("case_id"))
    for run in AgentTestRun.objects.select_related("agent", "agent_version").order_by("created_at").iterator():
        agent = run.agent
        dataset = Dataset.objects.filter(tests_of=agent).first() or Dataset.objects.create(
            id=ids.new_dataset_id(),
            owner_id=agent.owner_id,
            name=f"Tests · {agent.name}"[:200],
            agent=agent,
            tests_of=agent,
        )
        test_ids = [t for t in run.test_ids or [] if isinstance(t, str)]
        results = {
            r["test_id"]: r for r in run.results or [] if isinstance(r, dict) and isinstance(r.get("test_id"), str)
        }
        cases = EvalCase.objects.in_bulk([t for t in test_ids if len(t) <= 64])
        experiment = Experiment.objects.create(
            id=run.id,
            owner_id=run.owner_id,
            dataset=dataset,
            name=_name(agent, run.model),
            agent=agent,
            model=run.model,
            concurrency=1,
            keep_copies=run.keep,
            status=STATUS.get(run.status, "completed"),
            total=len(test_ids),
            done=sum(1 for t in test_ids if t in results),
            gate_passed={"passed": True, "failed": False}.get(run.status),
            version_at_start=run.agent_version.number if run.agent_version else None,
            started_at=run.started_at,
            completed_at=run.completed_at,
        )
        rows = [
            _case_result(experiment, i, t, results.get(t), cases.get(t), run.completed_at)
            for i, t in enumerate(test_ids)
        ]
        CaseResult.objects.bulk_create(CaseResult(**row) for row in rows)
        figures = _aggregates([{"scores": [], "score": None, "error": "", "passed": None, **r} for r in rows])
        Experiment.objects.filter(pk=experiment.pk).update(created_at=run.created_at, aggregates=figures)


def _result(row) -> dict:
    expect = next((s for s in row.scores or [] if s.get("kind") == "expect"), {})
    error = row.error if row.status == "error" else next((s["error"] for s in row.scores or [] if s.get("error")), "")
    failures = [] if error else list(expect.get("failures") or [])
    if row.status == "done" and row.error and not failures and not error:
        failures = [
            {
                "expectation": "the run completes",
                "expected": "completed",
                "actual": row.error.removeprefix("run "),
                "step_id": None,
            }
        ]
    return {
        "test_id": row.case_key,
        "name": row.name,
        "passed": bool(row.passed) and not error,
        "failures": failures,
        "run_ids": row.run_ids,
        "copy_agent_id": row.copy_agent_id or None,
        "error": error or None,
        "cost_usd": row.cost_usd,
        "steps": row.steps,
        "duration_ms": row.latency_ms,
    }


def experiments_to_runs(apps, schema_editor):
    AgentTestRun, AgentVersion, Experiment = (
        apps.get_model("core", m) for m in ("AgentTestRun", "AgentVersion", "Experiment")
    )
    for experiment in Experiment.objects.filter(dataset__tests_of__isnull=False).select_related("dataset"):
        rows = list(experiment.results.order_by("position"))
        agent_id = experiment.dataset.tests_of_id
        if experiment.status == "completed":
            status = "passed" if experiment.gate_passed else "failed"
        else:
            status = {"queued": "created", "running": "running"}.get(experiment.status, "failed")
        run = AgentTestRun.objects.create(
            id=experiment.id,
            owner_id=experiment.owner_id,
            agent_id=agent_id,
            status=status,
            test_ids=[r.case_key for r in rows],
            model=experiment.model,
            keep=experiment.keep_copies,
            results=[_result(r) for r in rows if r.status in ("done", "error")],
            started_at=experiment.started_at,
            completed_at=experiment.completed_at,
            agent_version=AgentVersion.objects.filter(agent_id=agent_id, number=experiment.version_at_start).first()
            if experiment.version_at_start is not None
            else None,
        )
        AgentTestRun.objects.filter(pk=run.pk).update(created_at=experiment.created_at)
        experiment.delete()


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0024_experiment_test_run_fields"),
    ]

    operations = [
        migrations.RunPython(runs_to_experiments, experiments_to_runs),
        migrations.DeleteModel(
            name="AgentTestRun",
        ),
    ]
