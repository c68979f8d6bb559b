"""core.prepared: a read compiled once gives what the ORM gives (fields through their converters, annotations),
for each call's values, and refuses what it cannot stand for."""

import pytest
from django.db import connection
from django.db.models import Count, Exists, F, Value
from django.db.models.functions import Upper
from django.utils import timezone

from core import prepared
from core.agents.context import with_memory_counts
from core.models import Agent, Message, Run
from core.prepared import Prepared
from memory.models import Block
from memory.selectors import agent_blocks
from tests.factories import make_agent
from tools.models import Tool

pytestmark = pytest.mark.django_db


def _fields(obj) -> dict:
    return {f.attname: getattr(obj, f.attname) for f in type(obj)._meta.concrete_fields}


def test_rows_and_annotations_equal_the_orms_for_each_calls_values(account):
    one = make_agent(account.org, name="one", tags=["x"])
    two = make_agent(account.org, name="two")
    Agent.objects.filter(pk=one.pk).update(model_settings={"temperature": 0.2, "nested": ["a", 1]})
    run = Run.objects.create(owner=account.org, agent=two, cancel_requested=True)
    built = []

    def build(p):
        built.append(p)
        flagged = Exists(Run.objects.filter(pk=p.run_id, cancel_requested=True))
        return with_memory_counts(Agent.objects.annotate(cancelled=flagged)).filter(owner_id=p.owner_id, id=p.agent_id)

    prepared = Prepared(build)
    for agent, run_id in ((one, "run-none"), (two, run.id), (one, run.id)):
        got = prepared.first(owner_id=account.org.pk, agent_id=agent.pk, run_id=run_id)
        orm = (
            with_memory_counts(
                Agent.objects.annotate(cancelled=Exists(Run.objects.filter(pk=run_id, cancel_requested=True)))
            )
            .filter(owner=account.org, id=agent.pk)
            .get()
        )
        assert _fields(got) == _fields(orm) and got._state.adding is False and got._state.db == "default"
        assert (got.snapshot_max_seq, got.snapshot_archival, got.cancelled) == (
            orm.snapshot_max_seq,
            orm.snapshot_archival,
            orm.cancelled,
        )
    assert len(built) == 1  # compiled once
    assert prepared.first(owner_id=account.org.pk, agent_id=one.pk, run_id="x").model_settings["nested"] == ["a", 1]
    assert prepared.first(owner_id="org-other", agent_id=one.pk, run_id="x") is None
    assert prepared(owner_id=account.org.pk, agent_id="agent-none", run_id="x") == []


def test_each_call_reads_the_rows_as_they_are_now(account):
    agent = make_agent(account.org)
    before = agent_blocks(agent=agent)
    assert [b.label for b in before] == [
        b.label
        for b in Block.objects.filter(agentblock__agent=agent).order_by("agentblock__position", "agentblock__id")
    ]
    Block.objects.filter(pk=before[0].pk).update(value="changed")
    Message.objects.create(owner=account.org, agent=agent, seq=99, role="user", text="hi")
    after = agent_blocks(agent=agent)
    assert after[0].value == "changed" and after[0].updated_at == Block.objects.get(pk=before[0].pk).updated_at
    counted = Prepared(lambda p: with_memory_counts(Agent.objects.filter(pk=p.agent_id)))
    assert counted.first(agent_id=agent.pk).snapshot_max_seq == 99


def test_many_to_many_rows_in_order(account):
    agent = make_agent(account.org)
    prepared = Prepared(lambda p: Tool.objects.filter(agents__id=p.agent_id).order_by("name"))
    got = prepared(agent_id=agent.pk)
    assert got and [_fields(t) for t in got] == [_fields(t) for t in agent.tools.all().order_by("name")]


def test_refuses_what_a_placeholder_cannot_stand_for(account):
    make_agent(account.org)
    with pytest.raises(ValueError, match="prefetch_related"):
        Prepared(lambda p: Agent.objects.prefetch_related("tools").filter(pk=p.agent_id))(agent_id="x")
    with pytest.raises(ValueError, match="whole value"):
        Prepared(lambda p: Agent.objects.filter(name__contains=p.name))(name="x")
    grouped = Prepared(lambda p: Agent.objects.filter(owner_id=p.owner_id).annotate(n=Count("runs")).order_by("name"))
    assert [a.n for a in grouped(owner_id=account.org.pk)] == [0]


def test_select_related_rows_come_with_their_related_objects(account, django_assert_num_queries):
    agent = make_agent(account.org)
    run = Run.objects.create(owner=account.org, agent=agent)
    read = Prepared(lambda p: Run.objects.select_related("owner", "agent").filter(pk=p.run_id))
    read(run_id=run.pk)  # compiled
    with django_assert_num_queries(1):
        got = read.first(run_id=run.pk)
        assert got.agent.name == agent.name and got.owner.name == account.org.name
    orm = Run.objects.select_related("owner", "agent").get(pk=run.pk)
    assert _fields(got) == _fields(orm) and _fields(got.agent) == _fields(orm.agent)


def test_update_writes_what_the_querysets_update_writes(account):
    agent = make_agent(account.org)
    run = Run.objects.create(owner=account.org, agent=agent)
    twin = Run.objects.create(owner=account.org, agent=agent)
    when = timezone.now()
    values = {"status": "completed", "usage": {"steps": [1, {"a": None}]}, "error": "", "completed_at": when}
    assert prepared.update(Run, {"pk": run.pk, "status": "created"}, **values) == 1
    Run.objects.filter(pk=twin.pk, status="created").update(**values)
    got, orm = Run.objects.get(pk=run.pk), Run.objects.get(pk=twin.pk)
    assert {k: getattr(got, k) for k in values} == {k: getattr(orm, k) for k in values} == values
    assert prepared.update(Run, {"pk": run.pk, "status": "created"}, status="failed") == 0  # the filter holds
    assert prepared.update(Agent, {"pk": agent.pk}, message_ids=["m-1"], last_stop_reason="end_turn") == 1
    assert Agent.objects.get(pk=agent.pk).message_ids == ["m-1"]
    with pytest.raises(ValueError, match="expressions"):
        prepared.update(Run, {"pk": run.pk}, max_steps=F("max_steps") + 1)
    with pytest.raises(ValueError, match="concrete fields of Agent"):  # a reverse relation is not a column
        prepared.update(Agent, {"pk": agent.pk}, messages=[])
    with pytest.raises(ValueError, match="concrete fields of Run"):
        prepared.update(Run, {"steps": "x"}, status="failed")
    assert Run.objects.get(pk=run.pk).status == "completed"  # nothing written by the refused updates


def _message(account, agent, seq, **extra):
    return Message(owner=account.org, agent=agent, seq=seq, role="assistant", **extra)


def test_insert_writes_what_bulk_create_writes(account):
    agent = make_agent(account.org)
    run = Run.objects.create(owner=account.org, agent=agent)
    extra = {
        "content": [{"type": "text", "text": "hi \\u0000 there"}],
        "text": "nul \x00 and a lone \ud800 surrogate",  # cleaned by the storable fields, as on the ORM's path
        "tool_calls": [{"id": "c1", "name": "send_message", "arguments": '{"message": "hi"}'}],
        "tool_return": {"status": "success", "nested": [1, None, {"a": "b"}]},
    }
    ours = [_message(account, agent, 100 + i, run=run, **extra) for i in range(3)]
    theirs = [_message(account, agent, 200 + i, run=run, **extra) for i in range(3)]
    prepared.insert(ours)
    Message.objects.bulk_create(theirs)
    assert all(m.created_at is not None and not m._state.adding and m._state.db == "default" for m in ours)
    skip = {"id", "seq", "created_at"}
    for mine, orm in zip(ours, theirs, strict=True):
        got, want = _fields(Message.objects.get(pk=mine.pk)), _fields(Message.objects.get(pk=orm.pk))
        assert {k: v for k, v in got.items() if k not in skip} == {k: v for k, v in want.items() if k not in skip}
        assert got["created_at"] == mine.created_at and got["run_id"] == run.pk
    assert Message.objects.get(pk=ours[0].pk).text == "nul \ufffd and a lone \ufffd surrogate"
    ours[0].text = "edited"
    ours[0].save()  # a saved row: save() updates it rather than inserting a second
    assert Message.objects.get(pk=ours[0].pk).text == "edited"


def test_insert_one_row_and_rows_in_batches(account, monkeypatch, django_assert_num_queries):
    agent = make_agent(account.org)
    run = Run(owner=account.org, agent=agent, input_messages=[{"role": "user", "content": "x"}])
    with django_assert_num_queries(1):
        prepared.insert([run])
    assert Run.objects.get(pk=run.pk).input_messages == [{"role": "user", "content": "x"}]
    assert Run.objects.get(pk=run.pk).status == "created"  # the field's default, set when the object was made
    monkeypatch.setattr(connection.ops, "bulk_batch_size", lambda fields, objs: 2)
    rows = [_message(account, agent, 300 + i, text=f"m{i}") for i in range(5)]
    with django_assert_num_queries(3):
        prepared.insert(rows)
    assert list(Message.objects.filter(seq__gte=300).order_by("seq").values_list("text", flat=True)) == [
        f"m{i}" for i in range(5)
    ]


def test_insert_refuses_rows_it_cannot_write(account):
    from django.contrib.auth.models import Group

    agent = make_agent(account.org)
    with pytest.raises(ValueError, match="primary key set"):  # a sequence the database assigns
        prepared.insert([Group(name="g")])
    with pytest.raises(ValueError, match="one model at a time"):
        prepared.insert([Run(owner=account.org, agent=agent), _message(account, agent, 1)])
    prepared.insert([])
    assert not Run.objects.filter(agent=agent).exists() and not Group.objects.exists()  # nothing written


def test_insert_refuses_expressions_and_wrapped_columns_before_writing_any_row(account, monkeypatch):
    agent = make_agent(account.org)
    monkeypatch.setattr(connection.ops, "bulk_batch_size", lambda fields, objs: 1)  # the good row is a batch alone
    good, bad = _message(account, agent, 400, text="kept out"), _message(account, agent, 401, text=Upper(Value("x")))
    with pytest.raises(ValueError, match="plain values, not expressions"):
        prepared.insert([good, bad])
    assert not Message.objects.filter(seq__in=[400, 401]).exists() and good._state.adding  # the first row neither

    monkeypatch.setattr(prepared, "_insert_fields", {})  # a fresh shape: the columns are checked when it is built
    monkeypatch.setattr(Run._meta.get_field("error"), "get_placeholder", lambda *a: "UPPER(%s)", raising=False)
    with pytest.raises(ValueError, match="concrete fields of Run bound as plain %s parameters only"):
        prepared.insert([Run(owner=account.org, agent=agent)])
    with pytest.raises(ValueError, match="concrete fields of Run"):
        prepared.update(Run, {"agent_id": agent.pk}, error="x")
    assert not Run.objects.filter(agent=agent).exists()


def test_a_runs_whole_reply_read_is_the_paged_reads_rows_in_seq_order(account):
    from core.agents import history

    agent = make_agent(account.org)
    run, other = Run.objects.create(owner=account.org, agent=agent), Run.objects.create(owner=account.org, agent=agent)
    for seq in (503, 501, 502):  # written out of order
        _message(account, agent, seq, run=run, text=f"m{seq}").save()
    _message(account, agent, 504, run=other).save()
    whole = history.run_messages(run=run)  # the prepared read
    assert [m.seq for m in whole] == [501, 502, 503] and [m.text for m in whole] == ["m501", "m502", "m503"]
    assert [m.pk for m in whole] == [m.pk for m in history.run_messages(run=run, limit=100)]  # the paged read
    assert whole[0].run_id == run.pk and whole[0].created_at is not None and not whole[0]._state.adding
    assert [m.seq for m in history.run_messages(run=run, order="desc")] == [503, 502, 501]
