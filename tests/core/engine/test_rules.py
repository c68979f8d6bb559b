"""The tool-rule solver, one test per rule type plus parsing and rendering."""

import pytest

from core.engine import rules
from core.engine.types import (
    Conditional,
    ConstrainChildTools,
    ContinueLoop,
    ExitLoop,
    MaxCountPerStep,
    ParentLastTool,
    RequiredBeforeExit,
    RunFirst,
    tool_rule_from_dict,
    tool_rule_to_dict,
)

TOOLS = ["send_message", "search", "fetch", "answer", "log"]


def test_no_rules_offers_everything_with_required_choice():
    a = rules.allowed_tools([], TOOLS, [])
    assert a.tools == tuple(TOOLS) and a.tool_choice == "required" and not a.forced


def test_run_first_forces_the_tool_only_at_the_start():
    r = [RunFirst(tool_name="search", args={"q": "x"})]
    first = rules.allowed_tools(r, TOOLS, [])
    assert first.tools == ("search",) and first.forced
    assert first.tool_choice == {"type": "function", "function": {"name": "search"}}
    assert rules.allowed_tools(r, TOOLS, ["search"]).tools == tuple(TOOLS)
    assert rules.run_first_args(r, "search") == {"q": "x"}


def test_exit_loop_is_terminal_and_gets_no_heartbeat():
    r = [ExitLoop(tool_name="answer")]
    assert rules.is_terminal("answer", r) and rules.has_exit_rule("answer", r)
    assert rules.is_terminal("send_message", r) and not rules.has_exit_rule("send_message", r)
    assert not rules.is_terminal("search", r)
    assert rules.non_heartbeat_tools(r) == {"answer", "send_message"}


def test_continue_loop_must_continue():
    r = [ContinueLoop(tool_name="log")]
    assert rules.must_continue("log", r) and not rules.must_continue("search", r)


def test_constrain_child_tools_narrows_after_parent():
    r = [ConstrainChildTools(tool_name="search", children=("fetch", "answer"))]
    assert rules.allowed_tools(r, TOOLS, ["log"]).tools == tuple(TOOLS)
    after = rules.allowed_tools(r, TOOLS, ["search"])
    assert after.tools == ("fetch", "answer") and after.forced and after.tool_choice == "required"
    single = rules.allowed_tools([ConstrainChildTools(tool_name="search", children=("fetch",))], TOOLS, ["search"])
    assert single.tool_choice == {"type": "function", "function": {"name": "fetch"}}


def test_parent_last_tool_gates_children():
    r = [ParentLastTool(tool_name="search", children=("fetch",))]
    assert "fetch" not in rules.allowed_tools(r, TOOLS, []).tools
    assert "fetch" not in rules.allowed_tools(r, TOOLS, ["log"]).tools
    assert rules.allowed_tools(r, TOOLS, ["search"]).tools == ("fetch",)


def test_conditional_maps_output_to_child():
    r = [Conditional(tool_name="search", child_output_mapping={"True": "answer", "none": "fetch"}, default_child="log")]
    assert rules.allowed_tools(r, TOOLS, ["search"], "true").tools == ("answer",)
    assert rules.allowed_tools(r, TOOLS, ["search"], "none").tools == ("fetch",)
    assert rules.allowed_tools(r, TOOLS, ["search"], "something else").tools == ("log",)
    assert rules.allowed_tools(r, TOOLS, ["fetch"], "true").tools == tuple(TOOLS)


def test_conditional_without_default():
    loose = [Conditional(tool_name="search", child_output_mapping={"1": "answer"})]
    assert rules.allowed_tools(loose, TOOLS, ["search"], "2").tools == tuple(TOOLS)
    assert rules.allowed_tools(loose, TOOLS, ["search"], "1").tools == ("answer",)
    strict = [Conditional(tool_name="search", child_output_mapping={"1": "answer"}, require_output_mapping=True)]
    with pytest.raises(rules.ToolRuleError):
        rules.allowed_tools(strict, TOOLS, ["search"], "2")


def test_max_count_per_step_removes_tool_after_limit():
    r = [MaxCountPerStep(tool_name="search", max_count_limit=2)]
    assert "search" in rules.allowed_tools(r, TOOLS, ["search"]).tools
    assert "search" not in rules.allowed_tools(r, TOOLS, ["search", "fetch", "search"]).tools


def test_required_before_exit():
    r = [RequiredBeforeExit(tool_name="log"), RequiredBeforeExit(tool_name="fetch")]
    assert rules.missing_before_exit(r, ["search"]) == ["log", "fetch"]
    assert rules.missing_before_exit(r, ["fetch", "log"]) == []


def test_rules_intersect():
    r = [
        ConstrainChildTools(tool_name="search", children=("fetch", "answer")),
        MaxCountPerStep(tool_name="fetch", max_count_limit=1),
    ]
    assert rules.allowed_tools(r, TOOLS, ["fetch", "search"]).tools == ("answer",)


def test_violation_message():
    a = rules.allowed_tools([ConstrainChildTools(tool_name="search", children=("fetch",))], TOOLS, ["search"])
    assert rules.check_call("fetch", a) is None
    assert rules.check_call("log", a) == "[ToolConstraintError] Cannot call log, valid tools include: ['fetch']."


@pytest.mark.parametrize(
    "data",
    [
        {"tool_name": "a", "type": "run_first", "args": {"x": 1}},
        {"tool_name": "a", "type": "exit_loop"},
        {"tool_name": "a", "type": "continue_loop"},
        {"tool_name": "a", "type": "constrain_child_tools", "children": ["b", "c"]},
        {"tool_name": "a", "type": "parent_last_tool", "children": ["b"]},
        {
            "tool_name": "a",
            "type": "conditional",
            "child_output_mapping": {"x": "b"},
            "default_child": "c",
            "require_output_mapping": True,
        },
        {"tool_name": "a", "type": "max_count_per_step", "max_count_limit": 3},
        {"tool_name": "a", "type": "required_before_exit", "prompt_template": "call {tool_name} before leaving"},
    ],
)
def test_letta_json_round_trip(data):
    assert tool_rule_to_dict(tool_rule_from_dict(data)) == data


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"tool_name": "a", "type": "teleport"}, "unknown tool rule type"),
        ({"type": "exit_loop"}, "tool_name"),
        ({"tool_name": "a", "type": "constrain_child_tools", "children": "b"}, "children"),
        ({"tool_name": "a", "type": "max_count_per_step", "max_count_limit": 0}, "max_count_limit"),
    ],
)
def test_invalid_rules_are_rejected(data, needle):
    with pytest.raises(ValueError, match=needle):
        tool_rule_from_dict(data)


def test_render_rules():
    assert rules.render_rules([]) == ""
    text = rules.render_rules(
        [
            ExitLoop(tool_name="answer"),
            ConstrainChildTools(tool_name="search", children=("fetch", "answer")),
            MaxCountPerStep(tool_name="fetch", max_count_limit=2),
            RequiredBeforeExit(tool_name="log", prompt_template="Always {tool_name}."),
        ]
    )
    assert text.startswith("<tool_usage_rules>") and text.endswith("</tool_usage_rules>")
    assert "After search, you must call one of: fetch, answer." in text
    assert "fetch may be called at most 2 time(s)" in text
    assert "Always log." in text
