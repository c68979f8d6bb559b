"""Export → import gives the same agent: blocks, tools, rules, messages, window and compiled context."""

import json
from datetime import UTC, datetime

import pytest

from core import mapping
from core.agents.agentfile.exporter import agentfile_export
from core.agents.agentfile.importer import ImportOptions, agentfile_import
from core.agents.agentfile.parse import parse_agent_file
from core.engine.context import compile_context
from core.engine.types import MemoryStats
from core.models import Agent, Message
from memory.selectors import agent_blocks
from memory.services import passages_insert
from tests.core.agentfile_docs import dumps, v2_doc

pytestmark = pytest.mark.django_db


def _import(owner, raw: bytes, **options) -> Agent:
    result = agentfile_import(owner=owner, parsed=parse_agent_file(raw), options=ImportOptions(**options))
    return Agent.objects.get(id=result.agent_ids[0])


def _round_trip(agent: Agent, **export_options) -> Agent:
    data = agentfile_export(agent=agent, **export_options)
    return _import(agent.owner, json.dumps(data).encode())


def _window(agent: Agent) -> list[Message]:
    rows = {m.id: m for m in Message.objects.filter(agent=agent)}
    return [rows[i] for i in agent.message_ids]


def _compiled(agent: Agent):
    return compile_context(
        mapping.agent_spec(agent),
        [mapping.block_spec(b) for b in agent_blocks(agent=agent)],
        [mapping.message(m) for m in _window(agent)[1:]],
        [mapping.tool_spec(t) for t in agent.tools.order_by("name")],
        mapping.tool_rules(agent),
        MemoryStats(),
        now=datetime(2025, 1, 1, tzinfo=UTC),
    )


def _message_view(agent: Agent) -> list[tuple]:
    return [
        (m.role, m.text, m.reasoning, m.tool_calls, m.tool_call_id, m.name, m.tool_return.get("status"))
        for m in Message.objects.filter(agent=agent).order_by("seq")
    ]


def test_round_trip_keeps_blocks_tools_rules_settings_and_messages(account):
    original = _import(account.org, dumps(v2_doc()))
    copy = _round_trip(original)
    assert copy.id != original.id
    view = lambda a: [
        (b.label, b.value, b.limit, b.description, b.read_only, b.metadata) for b in agent_blocks(agent=a)
    ]
    assert view(copy) == view(original)
    assert {t.id for t in copy.tools.all()} == {t.id for t in original.tools.all()}  # same rows reused, none duplicated
    for field in (
        "system",
        "model",
        "model_settings",
        "context_window_limit",
        "tool_rules",
        "description",
        "agent_type",
    ):
        assert getattr(copy, field) == getattr(original, field), field
    assert copy.metadata == original.metadata == {"team": "tabletop"}
    assert sorted(copy.secrets) == ["DICE_API_KEY"]
    assert _message_view(copy) == _message_view(original)
    assert [m.seq for m in _window(copy)] == [m.seq for m in _window(original)]


def test_round_trip_gives_the_same_compiled_context(account):
    original = _import(account.org, dumps(v2_doc()))
    copy = _round_trip(original)
    a, b = _compiled(original), _compiled(copy)
    assert a.request == b.request
    assert [(s.name, s.text, s.tokens) for s in a.sections] == [(s.name, s.text, s.tokens) for s in b.sections]
    assert a.request["messages"][0]["content"].startswith("You roll dice for people.")
    assert "I am the dice master." in a.request["messages"][0]["content"]


def test_imported_context_matches_the_file(account):
    doc = v2_doc()
    ctx = _compiled(_import(account.org, dumps(doc)))
    sent = ctx.request["messages"]
    assert sent[0]["role"] == "system" and "COMPILED PROMPT" not in sent[0]["content"]
    assert [m["role"] for m in sent[1:]] == [m["role"] for m in doc["agents"][0]["messages"][1:]]
    assert sent[2]["tool_calls"][0]["function"] == {"name": "roll_dice", "arguments": '{"sides": 20}'}
    assert {t["function"]["name"] for t in ctx.request["tools"]} == {"roll_dice", "send_message"}


def test_export_blanks_secrets_and_can_carry_archival_passages(account):
    agent = _import(account.org, dumps(v2_doc()), secrets={"DICE_API_KEY": "s3cret"})
    assert agent.secrets == {"DICE_API_KEY": "s3cret"}
    passages_insert(
        agent=agent, texts=["the dragon is red"], tags=["lore"], embeddings=[[0.1] * 4], embedding_model="x/y"
    )
    data = agentfile_export(agent=agent, include_archival=True)
    assert "s3cret" not in json.dumps(data)
    assert data["agents"][0]["tool_exec_environment_variables"] == {"DICE_API_KEY": ""}
    copy = _import(account.org, json.dumps(data).encode())
    assert [(p.text, p.tags) for p in copy.passages.all()] == [("the dragon is red", ["lore"])]
    assert "agents_ide_archival_passages" not in copy.metadata
    assert "agents_ide_archival_passages" not in agentfile_export(agent=agent)["agents"][0]["metadata"]


def test_export_has_letta_s_v2_shape(account):
    data = agentfile_export(agent=_import(account.org, dumps(v2_doc())))
    assert set(data) == {
        "agents",
        "groups",
        "blocks",
        "files",
        "sources",
        "tools",
        "mcp_servers",
        "metadata",
        "created_at",
    }
    assert all(isinstance(v, str) for v in data["metadata"].values())  # Letta types it Dict[str, str]
    a = data["agents"][0]
    assert a["id"] == "agent-0" and a["block_ids"] == ["block-0", "block-1"]
    assert set(a["in_context_message_ids"]) <= {m["id"] for m in a["messages"]}
    assert {t["id"] for t in data["tools"]} == set(a["tool_ids"])
    sent = next(t for t in data["tools"] if t["name"] == "send_message")
    assert sent["tool_type"] == "letta_core"
    assert a["messages"][0]["content"][0]["type"] == "text"


def test_scrub_messages_exports_no_history(account):
    data = agentfile_export(agent=_import(account.org, dumps(v2_doc())), scrub_messages=True)
    assert data["agents"][0]["messages"] == [] and data["agents"][0]["in_context_message_ids"] == []


def test_the_web_tools_export_as_letta_builtin_and_come_back_attached(account):
    from tests.factories import make_agent

    agent = make_agent(account.org, tools=["send_message", "web_search", "fetch_webpage"])
    data = agentfile_export(agent=agent)
    kinds = {t["name"]: t["tool_type"] for t in data["tools"]}
    assert kinds["web_search"] == kinds["fetch_webpage"] == "letta_builtin"
    assert kinds["send_message"] == "letta_core"
    copy = _import(account.org, json.dumps(data).encode())
    assert {"web_search", "fetch_webpage"} <= {t.name for t in copy.tools.all()}
