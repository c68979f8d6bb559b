"""`manage.py agent_test [AGENT_ID ...|--all] [--model HANDLE] [--junit-xml FILE]`: run agents' regression tests.

Exits 1 when any test fails (or cannot run), so a team can run its agents' tests in its own CI against a
model of its choice. Each test runs on a throwaway copy of its agent, through the run executor; each agent's run
of its tests is recorded as any other (an experiment of its tests dataset), so the IDE shows it too.
"""

from xml.etree import ElementTree as ET

from django.core.management.base import BaseCommand, CommandError

from core.agents import agent_tests
from core.evals import agent_tests as test_runs
from core.models import Agent
from core.runs import queue


class Command(BaseCommand):
    help = "Run agents' regression tests; exit 1 if any fails."

    def add_arguments(self, parser):
        parser.add_argument("agent_ids", nargs="*", help="agents whose tests to run")
        parser.add_argument("--all", action="store_true", help="every agent that has tests")
        parser.add_argument("--model", default="", help="run on this model handle instead of each agent's")
        parser.add_argument("--junit-xml", default="", help="write the results as JUnit XML to this file")
        parser.add_argument("--keep", action="store_true", help="keep each test's copy of its agent")

    def handle(self, *args, agent_ids=(), all=False, model="", junit_xml="", keep=False, **options):
        if not agent_ids and not all:
            raise CommandError("Name agents, or pass --all.")
        agents = (
            list(Agent.objects.filter(id__in=agent_ids))
            if agent_ids
            else [a for a in Agent.objects.order_by("created_at") if agent_tests.tests_list(agent=a)]
        )
        missing = set(agent_ids) - {a.id for a in agents}
        if missing:
            raise CommandError(f"No agent {', '.join(sorted(missing))}")
        suites = []
        try:
            for agent in agents:
                results = _run(agent, model, keep)
                suites.append((agent, results))
                for r in results:
                    mark = "PASS" if r["passed"] else "FAIL"
                    self.stdout.write(f"{mark} {agent.name} :: {r['name']} ({r['duration_ms'] or 0:.0f} ms)")
                    for f in r["failures"]:
                        self.stdout.write(
                            f"    {f['expectation']}: expected {f['expected']!r}, got {f['actual']!r}"
                            + (f" (step {f['step_id']})" if f.get("step_id") else "")
                        )
                    if r.get("error"):
                        self.stdout.write(f"    could not run: {r['error']}")
        finally:
            queue.shutdown()
        if junit_xml:
            _junit(suites).write(junit_xml, encoding="utf-8", xml_declaration=True)
        failed = sum(1 for _, results in suites for r in results if not r["passed"])
        total = sum(len(results) for _, results in suites)
        self.stdout.write(f"{total - failed} passed, {failed} failed")
        if failed:
            raise SystemExit(1)


def _run(agent: Agent, model: str, keep: bool) -> list[dict]:
    """Run the agent's tests here, one after another (none: no results); returns each test's result."""
    if not agent_tests.tests_list(agent=agent):
        return []
    run = test_runs.tests_start(owner=agent.owner, agent=agent, model=model, keep=keep, queued=False)
    test_runs.tests_execute(test_run_id=run.id)
    return agent_tests.test_run_out(agent_tests.test_run_get(agent=agent, run_id=run.id))["results"]


def _junit(suites) -> ET.ElementTree:
    root = ET.Element("testsuites")
    for agent, results in suites:
        suite = ET.SubElement(
            root,
            "testsuite",
            name=agent.name,
            tests=str(len(results)),
            failures=str(sum(1 for r in results if r["failures"])),
            errors=str(sum(1 for r in results if r.get("error"))),
        )
        for r in results:
            case = ET.SubElement(
                suite, "testcase", classname=agent.id, name=r["name"], time=f"{(r['duration_ms'] or 0) / 1000:.3f}"
            )
            for f in r["failures"]:
                node = ET.SubElement(case, "failure", message=f"{f['expectation']}: expected {f['expected']!r}")
                node.text = f"actual: {f['actual']!r}" + (f"\nstep: {f['step_id']}" if f.get("step_id") else "")
            if r.get("error"):
                ET.SubElement(case, "error", message=r["error"])
    return ET.ElementTree(root)
