"""`manage.py eval run SUITE [--dataset FILE] [--agent ID] [--model HANDLE ...] [--junit PATH]`: run a Letta Evals
suite here.

The suite and its JSONL dataset become a dataset (core.evals.suite); one experiment runs per model handle (the
suite's target.model_handles, or --model), on throwaway copies of the target agent, on this process. Exits 1 when
an experiment fails its gate, so a team can gate its agent's changes in CI.
"""

from pathlib import Path
from xml.etree import ElementTree as ET

import yaml
from django.core.management.base import BaseCommand, CommandError

from core.errors import DomainError
from core.evals import experiments, suite
from core.models import Agent
from core.runs import queue


class Command(BaseCommand):
    help = "Run a Letta Evals suite against an agent of this server; exit 1 if the gate fails."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        run = sub.add_parser("run", help="run a suite")
        run.add_argument("suite", help="the suite YAML file")
        run.add_argument("--dataset", default="", help="its JSONL dataset (default: the suite's `dataset`)")
        run.add_argument("--agent", default="", help="the agent to run on (default: the suite's target.agent_id)")
        run.add_argument("--model", action="append", default=[], help="a model handle to run on (repeatable)")
        run.add_argument("--concurrency", type=int, default=1, help="cases at once")
        run.add_argument("--junit", default="", help="write the results as JUnit XML to this file")

    def handle(self, *args, action="run", **options):
        path = Path(options["suite"])
        if not path.is_file():
            raise CommandError(f"No suite file {path}")
        text = path.read_text()
        agent = self._agent(options["agent"] or _target_agent(text))
        data_path = Path(options["dataset"]) if options["dataset"] else path.parent / _dataset_name(text)
        if not data_path.is_file():
            raise CommandError(f"No dataset file {data_path}")
        try:
            loaded = suite.suite_import(
                owner=agent.owner, suite_yaml=text, dataset_jsonl=data_path.read_text(), agent_id=agent.id
            )
            models = options["model"] or loaded.model_handles or [""]
            ran = []
            for model in models:
                experiment = experiments.experiment_start(
                    owner=agent.owner,
                    dataset=loaded.dataset,
                    agent=agent,
                    model=model,
                    concurrency=options["concurrency"],
                    queued=False,
                )
                experiments.experiment_execute(experiment_id=experiment.id)
                experiment.refresh_from_db()
                ran.append(experiment)
                self._print(experiment)
        except DomainError as exc:
            raise CommandError(exc.message) from None
        finally:
            queue.shutdown()
        if options["junit"]:
            _junit(ran).write(options["junit"], encoding="utf-8", xml_declaration=True)
        if not all(e.gate_passed for e in ran):
            raise SystemExit(1)

    def _agent(self, agent_id: str) -> Agent:
        if not agent_id:
            raise CommandError("Name the agent: --agent ID, or target.agent_id in the suite.")
        agent = Agent.objects.filter(id=agent_id).select_related("owner").first()
        if agent is None:
            raise CommandError(f"No agent {agent_id}")
        return agent

    def _print(self, experiment) -> None:
        for r in experiments.results_list(experiment=experiment):
            mark = "PASS" if r.passed else "FAIL"
            self.stdout.write(f"{mark} {experiment.name} :: {r.name}")
            for s in r.scores:
                verdict = s["error"] or f"{s['score']} {s['reason']}"
                self.stdout.write(f"    {s['grader']}: {verdict}")
            if r.error:
                self.stdout.write(f"    error: {r.error}")
        gate = (experiment.aggregates or {}).get("gate")
        figures = experiment.aggregates or {}
        summary = f"{figures.get('passed', 0)}/{figures.get('done', 0)} cases passed"
        if gate:
            summary += (
                f"; gate {gate['metric']} of {gate['metric_key']} = {gate['actual']} {gate['op']} {gate['value']}"
            )
        key = experiment.graders[0]["name"] if experiment.graders else None
        reward = ((figures.get("graders") or {}).get(key) or {}).get("avg_score")
        if not gate and reward is not None:  # Letta Evals' summary line since 0.9: the mean of the reward's grader
            summary += f"; reward mean of {key} = {reward}"
        self.stdout.write(f"{'PASSED' if experiment.gate_passed else 'FAILED'} {experiment.name}: {summary}")


def _suite_field(text: str, *keys: str):
    try:
        node = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise CommandError(f"The suite is not YAML: {exc}") from None
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node


def _dataset_name(text: str) -> str:
    name = _suite_field(text, "dataset")
    if not isinstance(name, str) or not name:
        raise CommandError("The suite names no dataset file; pass --dataset.")
    return name


def _target_agent(text: str) -> str:
    found = _suite_field(text, "target", "agent_id") or _suite_field(text, suite.OURS, "agent_id")
    return found if isinstance(found, str) else ""


def _junit(ran) -> ET.ElementTree:
    root = ET.Element("testsuites")
    for experiment in ran:
        results = experiments.results_list(experiment=experiment)
        suite_node = ET.SubElement(
            root,
            "testsuite",
            name=experiment.name,
            tests=str(len(results)),
            failures=str(sum(1 for r in results if not r.passed and not r.error)),
            errors=str(sum(1 for r in results if r.error)),
        )
        for r in results:
            seconds = f"{(r.latency_ms or 0) / 1000:.3f}"
            case = ET.SubElement(suite_node, "testcase", classname=experiment.id, name=r.name, time=seconds)
            for s in r.scores:
                if s["error"]:
                    ET.SubElement(case, "error", message=f"{s['grader']}: {s['error']}")
                elif not s["passed"]:
                    node = ET.SubElement(case, "failure", message=f"{s['grader']}: score {s['score']}")
                    node.text = s["reason"]
            if r.error:
                ET.SubElement(case, "error", message=r.error)
    return ET.ElementTree(root)
