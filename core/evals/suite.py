"""Letta Evals' suite YAML read into a dataset and written from one, so one suite runs here and in Letta's CLI.

The shapes are Letta Evals' (letta_evals/models/specs.py): `graders` is a map of metric names to `tool` graders
(function exact_match, contains, regex_match) or `model_judge` graders (an inline `prompt`, a model and provider);
`target` gives `model_handles` (and before 0.9 the `agent_id` of a letta_agent target); `reward: {kind: metric,
metric_key}` (since 0.9) names the grader whose score is a sample's, `gate` (before 0.9, GateSpec) a threshold. What
this server has and Letta's YAML has not (JSON path, tool-call and memory graders) is written as our own kinds, and
the gate and agent of an exported suite under `agents_ide`.
"""

from dataclasses import dataclass, field

import yaml

from core.engine import graders as g
from core.errors import Invalid
from core.evals import datasets
from core.models import Dataset, Organization

MAX_SUITE_BYTES = 1024 * 1024
TARGET_KINDS = ("letta_agent", "letta_code")  # before 0.9 an agent of the server; since, Letta Code driving one
OURS = "agents_ide"  # a top-level key Letta's SuiteSpec ignores: what its format has no place for
_LETTA_NAMES = {v: k for k, v in g.LETTA_FUNCTIONS.items()}


@dataclass
class Suite:
    dataset: Dataset
    model_handles: list[str] = field(default_factory=list)
    agent_id: str | None = None


def _grader_in(name: str, spec) -> dict:
    if not isinstance(spec, dict):
        raise Invalid(f"Grader {name!r} is not an object.")
    common = {"name": name, "extractor": spec.get("extractor") or "last_assistant"}
    if spec.get("extractor_config"):
        common["extractor_config"] = spec["extractor_config"]
    kind = spec.get("kind")
    if kind == "tool":
        function = spec.get("function")
        if function not in g.LETTA_FUNCTIONS:
            known = ", ".join(g.LETTA_FUNCTIONS)
            raise Invalid(f"Grader {name!r}: function {function!r} is not one this server runs ({known}).")
        return {**common, "kind": g.LETTA_FUNCTIONS[function]}
    if kind == "model_judge":
        if spec.get("prompt_path") and not spec.get("prompt"):
            raise Invalid(f"Grader {name!r}: put the rubric inline as `prompt` (a prompt_path file is not uploaded).")
        model = str(spec.get("model") or "gpt-4o-mini")
        handle = model if "/" in model else f"{spec.get('provider') or 'openai'}/{model}"
        judge = {**common, "kind": "rubric", "prompt": spec.get("prompt"), "model": handle}
        return {**judge, "temperature": float(spec.get("temperature", 0.0))}
    if kind in g.KINDS:  # one of ours, exported from here
        return {**spec, "name": name}
    raise Invalid(f"Grader {name!r}: kind {kind!r} is not tool or model_judge.")


def _gate_in(data: dict) -> dict:
    """The gate of a suite written before Letta's 0.9 (`gate`), or ours kept beside a current one's reward."""
    gate = data.get("gate")
    if not isinstance(gate, dict):
        gate = (data.get(OURS) or {}).get("gate") if isinstance(data.get(OURS), dict) else None
    if isinstance(gate, dict):
        keys = ("metric_key", "metric", "op", "value", "pass_op", "pass_value")
        return {k: gate[k] for k in keys if gate.get(k) is not None}
    return {}


def _reward_first(data: dict, graders: list[dict]) -> list[dict]:
    """A current suite's `reward: {kind: metric, metric_key}` names the grader whose score is a sample's reward: it
    goes first, as a case's score is its first grader's when there is no gate. A custom reward composer (Python) is
    not run here."""
    reward = data.get("reward")
    if reward is None:
        return graders
    if not isinstance(reward, dict) or reward.get("kind") != "metric":
        raise Invalid("reward: only {kind: metric, metric_key: <grader>} runs here (a custom composer is Python).")
    key = reward.get("metric_key")
    if key not in [g["name"] for g in graders]:
        raise Invalid(f"reward.metric_key {key!r} names none of the suite's graders.")
    return sorted(graders, key=lambda g: g["name"] != key)


def suite_import(*, owner: Organization, suite_yaml: str, dataset_jsonl: str, agent_id: str | None = None) -> Suite:
    """Create a dataset from a Letta Evals suite and its JSONL dataset (its agent `agent_id`, else the suite's);
    returns it with the target's agent id and model handles. Invalid for a suite this server cannot run, naming
    what."""
    if len(suite_yaml.encode()) > MAX_SUITE_BYTES:
        raise Invalid("A suite file is at most 1 MB.")
    try:
        data = yaml.safe_load(suite_yaml)
    except yaml.YAMLError as exc:
        raise Invalid(f"The suite is not YAML: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        raise Invalid("A suite is a YAML mapping with a name, a dataset, a target and graders.")
    graders = data.get("graders")
    if not isinstance(graders, dict) or not graders:
        raise Invalid("A suite needs graders: a map of metric names to graders.")
    target = data.get("target") if isinstance(data.get("target"), dict) else {}
    if target.get("kind", "letta_agent") not in TARGET_KINDS:
        raise Invalid(f"target.kind {target.get('kind')!r} is not one this server runs ({', '.join(TARGET_KINDS)}).")
    ours = data.get(OURS) if isinstance(data.get(OURS), dict) else {}
    agent_id = agent_id or target.get("agent_id") or ours.get("agent_id") or None
    handles = target.get("model_handles") or []
    if not isinstance(handles, list) or not all(isinstance(h, str) for h in handles):
        raise Invalid("target.model_handles is a list of model handles.")
    dataset = datasets.dataset_create(
        owner=owner,
        name=data["name"],
        description=str(data.get("description") or ""),
        graders=_reward_first(data, [_grader_in(str(name), spec) for name, spec in graders.items()]),
        gate=_gate_in(data),
        agent_id=agent_id,
    )
    datasets.cases_import_jsonl(dataset=dataset, text=dataset_jsonl)
    return Suite(dataset=dataset, model_handles=handles, agent_id=agent_id)


def _grader_out(spec: dict) -> dict:
    kind = spec["kind"]
    extractor = {"extractor": spec.get("extractor") or "last_assistant"}
    if spec.get("extractor_config"):
        extractor["extractor_config"] = spec["extractor_config"]
    if kind in _LETTA_NAMES and "value" not in spec:
        return {"kind": "tool", "function": _LETTA_NAMES[kind], **extractor}
    if kind == "rubric":
        provider, _, model = spec["model"].partition("/")
        judge = {"kind": "model_judge", "prompt": spec["prompt"], "model": model or provider}
        return {**judge, "provider": provider, "temperature": spec.get("temperature", 0.0), **extractor}
    return {k: v for k, v in spec.items() if k != "name"}


def suite_export(*, dataset: Dataset, dataset_file: str = "dataset.jsonl", base_url: str = "") -> str:
    """The dataset's graders, gate and agent as a current Letta Evals suite (its cases: cases_export_jsonl): a
    letta_code target, the reward the gate's grader (else the first); the gate and the agent, which Letta's format
    has no place for (it refuses a top-level `gate` since 0.9), kept under `agents_ide`, which Letta ignores."""
    target: dict = {"kind": "letta_code"}
    if base_url:
        target["base_url"] = base_url
    if dataset.agent_id:
        target["model_handles"] = [dataset.agent.model]
    suite: dict = {"name": dataset.name}
    if dataset.description:
        suite["description"] = dataset.description
    suite.update(
        dataset=dataset_file,
        target=target,
        graders={s["name"]: _grader_out(s) for s in dataset.graders},
    )
    if dataset.graders:
        key = (dataset.gate or {}).get("metric_key") or dataset.graders[0]["name"]
        suite["reward"] = {"kind": "metric", "metric_key": key}
    ours = {k: v for k, v in (("agent_id", dataset.agent_id), ("gate", dataset.gate)) if v}
    if ours:
        suite[OURS] = ours
    return yaml.safe_dump(suite, sort_keys=False, allow_unicode=True)
