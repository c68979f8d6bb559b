"""A run's cases that start alike share their starting state, read once (core.evals.starts): the first case's copy is
made the thorough way, the next ones are written from what it read — and are the same agent, row for row, as the
first: settings, tools, tags, secrets, history with its times, blocks, passages, a version whose hash is the one
recording it anew would give. The agent under edit is never changed."""

from collections import Counter

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.agents import versions
from core.agents.services import agent_update
from core.evals import datasets, experiments, runner
from core.evals.starts import Starts
from core.models import Agent, AgentVersion, Experiment, Message, Run, Step
from memory.models import Block, Passage, PassageTag
from memory.selectors import agent_blocks
from memory.services import passage_insert
from tests.factories import make_agent
from tests.fake_llm import FakeLLM
from tests.helpers import until

pytestmark = pytest.mark.django_db(transaction=True)

SKIP = ("id", "name", "metadata", "message_ids", "created_at", "updated_at")


def _state(agent: Agent) -> dict:
    """An agent's state as a copy carries it: everything but its id, name, marker and the rows' own ids."""
    agent = Agent.objects.get(pk=agent.pk)
    fields = {f.attname: getattr(agent, f.attname) for f in Agent._meta.concrete_fields if f.attname not in SKIP}
    messages = list(Message.objects.filter(agent=agent, run__isnull=True).order_by("seq"))
    seqs = {m.id: m.seq for m in messages}
    message_fields = ("seq", "role", "content", "text", "tool_calls", "tool_call_id", "name", "kind", "created_at")
    return {
        **fields,
        "window": [seqs.get(i) for i in agent.message_ids],
        "metadata": {k: v for k, v in agent.metadata.items() if k != experiments.COPY_KEY},
        "tags": sorted(agent.tag_rows.values_list("tag", flat=True)),
        "tools": sorted(agent.tools.values_list("name", flat=True)),
        "messages": [tuple(getattr(m, f) for f in message_fields) for m in messages],
        "blocks": [
            (b.label, b.value, b.limit, b.description, b.read_only, b.metadata, b.version, b.updated_at)
            for b in agent_blocks(agent=agent)
        ],
        "passages": [
            (p.text, p.tags, p.created_at, p.embedding_model, sorted(p.tag_rows.values_list("tag", flat=True)))
            for p in Passage.objects.filter(agent=agent).order_by("created_at")
        ],
    }


def _source(org, fake_llm) -> Agent:
    """An agent with history, a passage with tags, tags, a secret, and two versions (the second a new description)."""
    agent = make_agent(org, name="barista", tags=["cafe", "eval"], secrets={"API_KEY": "s3cret"})
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Hello!"}))
    [run] = runner.turns_run(owner=org, agent=agent, turns=["hi"])
    assert run.status == "completed"
    passage_insert(agent=agent, text="The user likes tea.", tags=["drinks", "likes"])
    agent_update(agent=Agent.objects.get(pk=agent.pk), changes={"description": "v2 description"})
    assert versions.latest_number(agent=agent) == 2
    return Agent.objects.get(pk=agent.pk)


def test_copies_from_a_read_start_are_the_thorough_copy_row_for_row(account, fake_llm):
    org = account.org
    agent = _source(org, fake_llm)
    before = (_state(agent), versions.latest_number(agent=agent), Message.objects.filter(agent=agent).count())
    dataset = datasets.dataset_create(owner=org, name="tea", graders=[{"name": "m", "kind": "contains", "value": "x"}])
    cases = datasets.cases_add(dataset=dataset, cases=[{"name": f"case {i}", "turns": ["hi"]} for i in range(3)])
    target = runner.Target(
        agent=agent,
        version=1,
        model="openai/other",
        overrides={"system": "You are a judge of tea.", "blocks": {"human": "The user's name is Bob."}},
    )
    starts = Starts(Counter(runner.start_key(c, target) for c in cases))
    copies = []
    for case in cases:
        marker = {experiments.COPY_KEY: {"experiment_id": "exp-1", "case_id": case.id}}
        with CaptureQueriesContext(connection) as queries:
            copies.append(
                runner.case_copy(owner=org, case=case, target=target, marker=marker, label="eval", starts=starts)
            )
    first, *rest = copies
    # the thorough copy has the version, the model and the overrides; the others are the same agent
    state = _state(first)
    assert state["model"] == "openai/other" and state["system"] == "You are a judge of tea."
    assert state["description"] == "" and ("human", "The user's name is Bob.") in [b[:2] for b in state["blocks"]]
    assert state["secrets"] == {"API_KEY": "s3cret"} and state["tags"] == ["cafe", "eval"]
    assert len(state["messages"]) >= 4 and state["passages"][0][4] == ["drinks", "likes"]
    for copy in rest:
        assert _state(copy) == state
    assert [c.name for c in copies] == [f"barista · eval case {i}" for i in range(3)]
    assert [c.metadata[experiments.COPY_KEY]["case_id"] for c in copies] == [c.id for c in cases]
    assert len({c.id for c in copies}) == 3 and len(set(Block.objects.filter(agentblock__agent__in=copies))) == 6
    assert PassageTag.objects.filter(agent__in=copies).count() == 6
    # each copy's one version is what recording it anew would write
    for copy in copies:
        [version] = AgentVersion.objects.filter(agent=copy)
        assert version.content_hash == versions.definition_hash(versions.agent_definition(agent=copy))
        assert (
            version.definition["name"] == copy.name and version.blocks == AgentVersion.objects.get(agent=first).blocks
        )
    # the last copy was written, not read: one INSERT a table, in one transaction
    statements = [q["sql"].split(None, 1)[0].upper() for q in queries]
    assert "SELECT" not in statements and statements.count("INSERT") == 9
    # the agent under edit is as it was
    after = (_state(agent), versions.latest_number(agent=agent), Message.objects.filter(agent=agent).count())
    assert after == before


def test_an_experiment_shares_a_fork_start_between_cases_running_at_once(account, fake_llm):
    org = account.org
    agent = _source(org, fake_llm)
    step = Step.objects.filter(agent=agent, kind="agent").order_by("created_at").first()
    dataset = datasets.dataset_create(owner=org, name="fork", graders=[{"name": "m", "kind": "contains"}])
    start = {"agent_id": agent.id, "step_id": step.id, "before": True}
    datasets.cases_add(
        dataset=dataset,
        cases=[{"turns": ["What do I drink?"], "ground_truth": "tea", "start": start} for _ in range(3)],
    )
    fake_llm.by_model = {"fake-model": FakeLLM.tool("send_message", {"message": "You drink tea."})}
    started = experiments.experiment_start(owner=org, dataset=dataset, agent=agent, concurrency=3)
    done = until(lambda: (e := Experiment.objects.get(pk=started.id)).status == "completed" and e, what="the run")
    results = experiments.results_list(experiment=done)
    assert [r.passed for r in results] == [True] * 3 and done.done == 3
    copies = [Agent.objects.get(pk=r.copy_agent_id) for r in results]
    assert all(c.metadata["forked_from"]["step_id"] == step.id for c in copies)
    assert [c.metadata[experiments.COPY_KEY]["case_id"] for c in copies] == [r.case_id for r in results]
    states = [{**_state(c), "last_run_completion": None} for c in copies]  # each ran its case
    assert states[1] == states[0] and states[2] == states[0]
    for copy, result in zip(copies, results, strict=True):
        [version] = AgentVersion.objects.filter(agent=copy)
        assert Run.objects.get(pk=result.run_ids[0]).agent_version_id == version.pk
        assert Message.objects.filter(agent=copy, run_id=result.run_ids[0]).exists()
    experiments.experiment_delete(experiment=done)
    assert not Agent.objects.filter(pk__in=[c.pk for c in copies]).exists()
    assert not Block.objects.filter(agentblock__isnull=True, owner=org).exists()
