"""Parsing agent files without a database: both formats normalize alike; malformed files name the problem."""

import json

import pytest

from core.agents.agentfile.model import MAX_FILE_BYTES, MAX_STRING, AgentFileError
from core.agents.agentfile.parse import parse_agent_file
from tests.core.agentfile_docs import dumps, edited, v1_doc, v2_doc


def _error(raw) -> AgentFileError:
    with pytest.raises(AgentFileError) as info:
        parse_agent_file(raw)
    return info.value


def test_v2_and_v1_normalize_to_the_same_agent():
    a2 = parse_agent_file(dumps(v2_doc())).agents[0]
    a1 = parse_agent_file(dumps(v1_doc())).agents[0]
    assert [(m.role, m.text, m.tool_calls, m.tool_call_id) for m in a2.messages] == [
        (m.role, m.text, m.tool_calls, m.tool_call_id) for m in a1.messages
    ]
    assert a1.model == a2.model == "openai/gpt-4o-mini"
    assert a1.tool_rules == a2.tool_rules and a1.system == a2.system
    assert a1.secrets == a2.secrets == {"DICE_API_KEY": ""}


def test_system_message_holds_the_raw_prompt_not_letta_s_compiled_copy():
    agent = parse_agent_file(dumps(v2_doc())).agents[0]
    first = next(m for m in agent.messages if m.key == agent.in_context[0])
    assert first.role == "system" and first.text == "You roll dice for people."


def test_reasoning_tool_calls_and_returns_are_mapped():
    msgs = parse_agent_file(dumps(v2_doc())).agents[0].messages
    assert msgs[2].reasoning == "I should roll." and msgs[2].reasoning_source == "native"
    assert msgs[2].tool_calls == ({"id": "call-1", "name": "roll_dice", "arguments": '{"sides": 20}'},)
    assert msgs[3].tool_return == {"status": "success", "stdout": "rolled\n"}  # Letta's list of chunks, as text


def test_a_tool_message_with_several_returns_becomes_one_message_per_call():
    def change(d):
        d["agents"][0]["messages"][2]["tool_calls"].append(
            {"id": "call-9", "type": "function", "function": {"name": "roll_dice", "arguments": '{"sides": 6}'}}
        )
        d["agents"][0]["messages"][3].update(
            content=[],
            tool_returns=[
                {"tool_call_id": "call-1", "status": "success", "func_response": "17"},
                {"tool_call_id": "call-9", "status": "error", "func_response": "boom"},
            ],
        )

    agent = parse_agent_file(edited(v2_doc(), change)).agents[0]
    tools = [m for m in agent.messages if m.role == "tool"][:2]
    assert [(m.tool_call_id, m.text, m.tool_return["status"], m.name) for m in tools] == [
        ("call-1", "17", "success", "roll_dice"),
        ("call-9", "boom", "error", "roll_dice"),
    ]
    assert len(agent.in_context) == 7


def test_unknown_rule_types_are_dropped_with_a_warning_and_requires_approval_is_kept():
    def change(d):
        d["agents"][0]["tool_rules"] += [
            {"tool_name": "roll_dice", "type": "requires_approval"},
            {"tool_name": "roll_dice", "type": "some_future_rule"},
        ]

    parsed = parse_agent_file(edited(v2_doc(), change))
    assert {"tool_name": "roll_dice", "type": "requires_approval"} in parsed.agents[0].tool_rules
    assert all(r["type"] != "some_future_rule" for r in parsed.agents[0].tool_rules)
    assert any("some_future_rule" in w for w in parsed.warnings)
    assert not any("requires_approval" in w for w in parsed.warnings)


def test_a_file_without_messages_gets_a_system_message():
    def change(d):
        d["agents"][0]["messages"] = []
        d["agents"][0]["in_context_message_ids"] = []

    agent = parse_agent_file(edited(v2_doc(), change)).agents[0]
    assert [(m.role, m.text) for m in agent.messages] == [("system", "You roll dice for people.")]
    assert agent.in_context == (agent.messages[0].key,)


def _set(path, value):
    def change(d):
        target = d
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


MALFORMED = [
    ("not json", b"{not json", "", "not valid JSON"),
    ("not an object", b"[1, 2]", "", "JSON object"),
    ("not an agent file", dumps({"hello": "world"}), "", "not an agent file"),
    ("unknown top-level field", edited(v2_doc(), _set(["evil"], 1)), "evil", "unknown field"),
    (
        "unknown agent field",
        edited(v2_doc(), _set(["agents", 0, "run_this"], "rm -rf /")),
        "agents[0].run_this",
        "unknown field",
    ),
    ("wrong type", edited(v2_doc(), _set(["agents", 0, "system"], 5)), "agents[0].system", "must be a string"),
    ("agents not a list", edited(v2_doc(), _set(["agents"], {"a": 1})), "agents", "must be a list"),
    ("no agents", edited(v2_doc(), _set(["agents"], [])), "agents", "no agents"),
    (
        "dangling block id",
        edited(v2_doc(), _set(["agents", 0, "block_ids"], ["block-0", "block-7"])),
        "agents[0].block_ids[1]",
        "'block-7'",
    ),
    (
        "dangling tool id",
        edited(v2_doc(), _set(["agents", 0, "tool_ids"], ["tool-5"])),
        "agents[0].tool_ids[0]",
        "not in the file",
    ),
    (
        "dangling message id",
        edited(v2_doc(), _set(["agents", 0, "in_context_message_ids"], ["message-0", "message-99"])),
        "agents[0].in_context_message_ids[1]",
        "not in the file",
    ),
    ("duplicate block id", edited(v2_doc(), _set(["blocks", 1, "id"], "block-0")), "blocks[1].id", "duplicate id"),
    (
        "duplicate message id",
        edited(v2_doc(), _set(["agents", 0, "messages", 3, "id"], "message-1")),
        "agents[0].messages[3].id",
        "duplicate id",
    ),
    (
        "duplicate window entry",
        edited(v2_doc(), _set(["agents", 0, "in_context_message_ids"], ["message-0", "message-1", "message-1"])),
        "agents[0].in_context_message_ids[2]",
        "twice",
    ),
    (
        "window not opening with system",
        edited(v2_doc(), _set(["agents", 0, "in_context_message_ids"], ["message-1"])),
        "agents[0].in_context_message_ids[0]",
        "system message",
    ),
    (
        "duplicate tool name",
        edited(v2_doc(), lambda d: d["tools"].append(dict(d["tools"][0], id="tool-9"))),
        "tools[2].name",
        "duplicate tool name",
    ),
    (
        "bad block label",
        edited(v2_doc(), _set(["blocks", 0, "label"], "my persona!")),
        "blocks[0].label",
        "block label",
    ),
    (
        "duplicate label",
        edited(v2_doc(), _set(["blocks", 1, "label"], "persona")),
        "agents[0].block_ids[1]",
        "labelled 'persona'",
    ),
    ("huge limit", edited(v2_doc(), _set(["blocks", 0, "limit"], 10**12)), "blocks[0].limit", "between"),
    (
        "negative window",
        edited(v2_doc(), _set(["agents", 0, "llm_config", "context_window"], -5)),
        "agents[0].llm_config.context_window",
        "between",
    ),
    (
        "unknown role",
        edited(v2_doc(), _set(["agents", 0, "messages", 1, "role"], "root")),
        "agents[0].messages[1].role",
        "unknown role",
    ),
    (
        "unknown content type",
        edited(v2_doc(), _set(["agents", 0, "messages", 1, "content"], [{"type": "script"}])),
        "agents[0].messages[1].content[0].type",
        "unknown content type",
    ),
    (
        "bad secret name",
        edited(v2_doc(), _set(["agents", 0, "tool_exec_environment_variables"], {"BAD-NAME": ""})),
        "agents[0].tool_exec_environment_variables.BAD-NAME",
        "environment variable",
    ),
    (
        "huge string",
        edited(v2_doc(), _set(["blocks", 0, "value"], "x" * (MAX_STRING + 1))),
        "blocks[0].value",
        "limit is",
    ),
    (
        "deep nesting",
        edited(v2_doc(), _set(["agents", 0, "metadata"], json.loads("[" * 100 + "]" * 100))),
        "",
        "nested deeper",
    ),
    (
        "v1 index out of range",
        edited(v1_doc(), _set(["in_context_message_indices"], [0, 6])),
        "in_context_message_indices[1]",
        "between",
    ),
    ("v1 unknown field", edited(v1_doc(), _set(["extra"], True)), "extra", "unknown field"),
    ("v1 duplicate tool", edited(v1_doc(), lambda d: d["tools"].append(d["tools"][0])), "tools[2].name", "duplicate"),
]


# What cannot be kept is left out with a warning naming it; the rest of the file still imports (Letta's own files
# carry such things: tool names over a provider's limit, rules with no tool).
LENIENT = [
    ("bad tool name", edited(v2_doc(), _set(["tools", 0, "name"], "rm -rf")), "'rm -rf' was not imported", 1),
    ("tool name too long", edited(v2_doc(), _set(["tools", 0, "name"], "x" * 65)), "limit is 64", 1),
    (
        "schema names another tool",
        edited(v2_doc(), _set(["tools", 0, "json_schema", "name"], "other")),
        "json_schema named 'other'",
        2,
    ),
    (
        "invalid rule",
        edited(
            v2_doc(),
            _set(["agents", 0, "tool_rules"], [{"tool_name": "x", "type": "max_count_per_step", "max_count_limit": 0}]),
        ),
        "max_count_limit",
        2,
    ),
    (
        "rule without a tool",
        edited(v2_doc(), _set(["agents", 0, "tool_rules"], [{"tool_name": "", "type": "exit_loop"}])),
        "names no tool",
        2,
    ),
    (
        "duplicate rule",
        edited(v2_doc(), _set(["agents", 0, "tool_rules"], [{"tool_name": "roll_dice", "type": "exit_loop"}] * 2)),
        "repeats an earlier rule",
        2,
    ),
]


@pytest.mark.parametrize(("case", "raw", "warning", "tools_kept"), LENIENT, ids=[m[0] for m in LENIENT])
def test_what_cannot_be_kept_is_a_warning_not_a_refusal(case, raw, warning, tools_kept):
    parsed = parse_agent_file(raw)
    assert any(warning in w for w in parsed.warnings), parsed.warnings
    assert len(parsed.tools) == tools_kept
    (agent,) = parsed.agents
    if "rule" in case:
        assert len(agent.tool_rules) == (1 if case == "duplicate rule" else 0)
    if case == "schema names another tool":
        assert all(t.json_schema.get("name") in (None, t.name) for t in parsed.tools.values())


@pytest.mark.parametrize(("case", "raw", "path", "problem"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_files_are_refused_naming_the_problem(case, raw, path, problem):
    err = _error(raw)
    assert err.status == 422
    if path:
        assert err.path == path, err.message
    assert problem in err.message


def test_oversized_upload_is_refused_before_decoding():
    err = _error(b" " * (MAX_FILE_BYTES + 1))
    assert "limit is" in err.message and str(MAX_FILE_BYTES) in err.message


def test_missing_fixtures_skip_outside_ci_and_fail_in_ci(monkeypatch, tmp_path):
    from _pytest.outcomes import Failed, Skipped

    from tests.core import agentfile_fixtures as fx

    monkeypatch.setattr(fx, "FIXTURES_DIR", tmp_path / "absent")
    monkeypatch.setattr(fx, "IN_CI", False)
    with pytest.raises(Skipped, match="outside the repository"):
        fx.fixture_path("test_agent.af")
    monkeypatch.setattr(fx, "IN_CI", True)
    with pytest.raises(Failed, match="missing"):
        fx.fixture_path("test_agent.af")
