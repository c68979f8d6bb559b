"""Import every real Letta file in ../shared/fixtures/agent-files and check what was restored against the
file's own JSON (read here independently of the parser). Skips without ../shared; fails under CI=true."""

import json

import pytest

from core.agents.agentfile.importer import agentfile_import
from core.agents.agentfile.parse import parse_agent_file
from core.models import Agent, Message
from memory.selectors import agent_blocks
from tests.core.agentfile_fixtures import fixture_names, fixture_path

pytestmark = pytest.mark.django_db


def _expected(raw: dict) -> dict:
    """What the file describes, straight from its JSON."""
    if "agents" in raw:
        a = raw["agents"][0]
        blocks = {b["id"]: b for b in raw["blocks"]}
        tools = {t["id"]: t for t in raw["tools"]}
        by_id = {m["id"]: i for i, m in enumerate(a["messages"])}
        return {
            "agent": a,
            "blocks": [blocks[i] for i in a["block_ids"]],
            "tools": [tools[i] for i in a["tool_ids"]],
            "messages": a["messages"],
            "window": [by_id[i] for i in a["in_context_message_ids"]],
            "tags": a["tags"],
            "secrets": a.get("tool_exec_environment_variables") or {},
        }
    return {
        "agent": raw,
        "blocks": raw["core_memory"],
        "tools": raw["tools"],
        "messages": raw["messages"],
        "window": raw["in_context_message_indices"],
        "tags": [t["tag"] if isinstance(t, dict) else t for t in raw["tags"]],
        "secrets": {e["key"]: e["value"] for e in raw["tool_exec_environment_variables"]},
    }


def _rows_for(m: dict) -> int:
    """How many of our messages one Letta message becomes (see core/agents/agentfile/normalize.py)."""
    text = any(p.get("type") == "text" and p.get("text") for p in m.get("content") or [])
    if m["role"] == "approval" and not m.get("tool_calls"):
        return 0
    if m["role"] == "tool" and m.get("tool_returns") and not text:
        return len(m["tool_returns"])
    return 1


def _import(account, name: str):
    raw_bytes = fixture_path(name).read_bytes()
    result = agentfile_import(owner=account.org, parsed=parse_agent_file(raw_bytes))
    return json.loads(raw_bytes), Agent.objects.get(id=result.agent_ids[0]), result


@pytest.mark.parametrize("name", fixture_names())
def test_fixture_blocks_system_tags_and_secrets_are_restored(account, name):
    raw, agent, _ = _import(account, name)
    exp = _expected(raw)
    blocks = agent_blocks(agent=agent)
    assert [(b.label, b.value, b.read_only) for b in blocks] == [
        (b["label"], b["value"], bool(b.get("read_only"))) for b in exp["blocks"]
    ]
    assert all(b.limit >= max(e["limit"], len(e["value"])) for b, e in zip(blocks, exp["blocks"], strict=False))
    assert agent.system == exp["agent"]["system"]
    assert sorted(agent.tag_rows.values_list("tag", flat=True)) == sorted(exp["tags"])
    assert sorted(agent.secrets) == sorted(exp["secrets"])


@pytest.mark.parametrize("name", fixture_names())
def test_fixture_tools_and_rules_are_restored(account, name):
    raw, agent, result = _import(account, name)
    exp = _expected(raw)
    tools = {t.name: t for t in agent.tools.all()}
    for t in exp["tools"]:
        if t["tool_type"] == "custom":
            assert tools[t["name"]].tool_type == "custom"
            assert tools[t["name"]].source_code == (t["source_code"] or "")
            assert tools[t["name"]].json_schema == t["json_schema"]
            assert tools[t["name"]].default_requires_approval == t.get("default_requires_approval")
        elif t["name"] in tools:  # a Letta built-in we have: our built-in row, not a copy
            assert tools[t["name"]].tool_type in ("base", "multi_agent")
        else:
            assert any(t["name"] in w for w in result.warnings)
    assert len(tools) <= len(exp["tools"])
    # Rules Letta's file repeats are kept once; a rule naming no tool is left out (with a warning).
    rules = [r for r in exp["agent"]["tool_rules"] if r.get("tool_name")]
    wanted = list(dict.fromkeys((r["type"], r["tool_name"]) for r in rules))
    assert [(r["type"], r["tool_name"]) for r in agent.tool_rules] == wanted


@pytest.mark.parametrize("name", fixture_names())
def test_fixture_messages_and_window_are_restored(account, name):
    raw, agent, _ = _import(account, name)
    exp = _expected(raw)
    rows = list(Message.objects.filter(agent=agent).order_by("seq"))
    assert len(rows) == sum(_rows_for(m) for m in exp["messages"])
    file_users = [
        p["text"] for m in exp["messages"] if m["role"] == "user" for p in m["content"] if p["type"] == "text"
    ]
    assert [r.text for r in rows if r.role == "user"] == file_users
    file_calls = [tc["id"] for m in exp["messages"] for tc in (m.get("tool_calls") or [])]
    assert [c["id"] for r in rows for c in r.tool_calls] == file_calls
    window = [exp["messages"][i] for i in exp["window"]]
    assert len(agent.message_ids) == sum(_rows_for(m) for m in window)
    by_id = {r.id: r for r in rows}
    first = by_id[agent.message_ids[0]]
    assert first.role == "system" and first.text == exp["agent"]["system"]
    in_context = [by_id[i] for i in agent.message_ids[1:]]
    assert [r.role for r in in_context if r.role == "user"] == [m["role"] for m in window[1:] if m["role"] == "user"]
    assert all(r.token_count > 0 for r in rows)


@pytest.mark.parametrize("name", fixture_names())
def test_fixture_model_is_kept_and_flagged_when_unconfigured(account, name):
    raw, agent, result = _import(account, name)
    cfg = _expected(raw)["agent"]["llm_config"]
    assert agent.model.endswith("/" + cfg["model"])
    assert agent.context_window_limit == cfg["context_window"]
    assert any(agent.model in w and "not served" in w for w in result.warnings)


def test_v2_fixture_details(account):
    raw, agent, _ = _import(account, "test_basic_agent_with_blocks_tools_messages_v2.af")
    assert agent.model == "openai/gpt-4.1-mini" and agent.model_settings["temperature"] == 1.0
    assert {t.name for t in agent.tools.all()} == {
        "analyze_data",
        "calculate_fibonacci",
        "get_user_preferences",
        "conversation_search",
        "memory_insert",
        "memory_replace",
        "send_message",
    }
    ordered = [Message.objects.get(id=i) for i in agent.message_ids]
    assert [m.role for m in ordered] == ["system", "assistant", "tool", "user", "user", "assistant", "tool"]
    assert ordered[6].tool_call_id == "call_tB2kJPFgSD5Ldk8VaUYwkMCF" and ordered[6].name == "send_message"


def test_v1_window_keeps_the_file_s_order(account):
    raw, agent, _ = _import(account, "memgpt_agent_with_convo.af")
    rows = {m.id: m for m in Message.objects.filter(agent=agent)}
    assert [rows[i].seq for i in agent.message_ids] == raw["in_context_message_indices"]
