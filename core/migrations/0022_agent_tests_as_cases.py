"""An agent's tests move from its metadata (`agent_tests`) to cases of a dataset of its own (Dataset.tests_of), each
test's expectations its `expect` grader: one model of a case and its graders (core.evals) for tests and evals."""

from django.db import migrations

from core import ids

KEY = "agent_tests"


def _readable(test) -> bool:
    start = test.get("start") if isinstance(test, dict) else None
    return (
        isinstance(test, dict)
        and isinstance(test.get("id"), str)
        and isinstance(test.get("name"), str)
        and isinstance(test.get("turns"), list)
        and all(isinstance(t, str) for t in test["turns"])
        and isinstance(test.get("expect"), dict)
        and isinstance(start, dict)
        and isinstance(start.get("step_id"), str | None)
    )


def tests_to_cases(apps, schema_editor):
    Agent, Dataset, EvalCase = (apps.get_model("core", m) for m in ("Agent", "Dataset", "EvalCase"))
    for agent in Agent.objects.filter(metadata__has_key=KEY).order_by("created_at"):
        stored = agent.metadata.get(KEY)
        tests = [t for t in stored if _readable(t)] if isinstance(stored, list) else []
        if not tests:
            continue
        dataset = Dataset.objects.create(
            id=ids.new_dataset_id(),
            owner_id=agent.owner_id,
            name=f"Tests · {agent.name}"[:200],
            agent=agent,
            tests_of=agent,
        )
        for position, test in enumerate(tests):
            taken = len(test["id"]) > 64 or EvalCase.objects.filter(pk=test["id"]).exists()
            step_id = test["start"].get("step_id")
            EvalCase.objects.create(
                id=ids.new_case_id() if taken else test["id"],
                dataset=dataset,
                position=position,
                name=test["name"][:200],
                turns=test["turns"],
                graders=[{"name": "expectations", "kind": "expect", "expect": test["expect"]}],
                start={"step_id": step_id, "before": bool(test["start"].get("before"))} if step_id else {},
            )
        left = [t for t in stored if not _readable(t)]  # what it cannot read stays where it was
        agent.metadata = {k: v for k, v in agent.metadata.items() if k != KEY} | ({KEY: left} if left else {})
        agent.save(update_fields=["metadata"])


def cases_to_tests(apps, schema_editor):
    Dataset = apps.get_model("core", "Dataset")
    for dataset in Dataset.objects.filter(tests_of__isnull=False).select_related("tests_of"):
        agent = dataset.tests_of
        tests = [
            {
                "id": case.id,
                "name": case.name,
                "turns": case.turns,
                "expect": next(g["expect"] for g in case.graders if g.get("kind") == "expect"),
                "start": {"step_id": case.start.get("step_id"), "before": bool(case.start.get("before"))},
            }
            for case in dataset.cases.order_by("position")
            if any(g.get("kind") == "expect" for g in case.graders or [])
        ]
        stored = (agent.metadata or {}).get(KEY)
        agent.metadata = {**(agent.metadata or {}), KEY: (stored if isinstance(stored, list) else []) + tests}
        agent.save(update_fields=["metadata"])
        dataset.delete()


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0021_dataset_tests_of"),
    ]

    operations = [migrations.RunPython(tests_to_cases, cases_to_tests)]
