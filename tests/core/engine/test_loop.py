"""Pure step decisions: parsing replies, continue/stop, heartbeats, tool results, eviction, summaries."""

import json
from datetime import UTC, datetime

import pytest

from core.engine import loop, rules
from core.engine.types import (
    ConstrainChildTools,
    ContinueLoop,
    ExitLoop,
    LLMResult,
    RequiredBeforeExit,
    Role,
    StopReason,
    ToolCall,
)
from tests.core.engine.builders import msg, tool_exchange


def reply(*calls, reasoning=None, content=None):
    tcs = tuple(
        ToolCall(id=f"c{i}", name=n, arguments=a if isinstance(a, str) else json.dumps(a))
        for i, (n, a) in enumerate(calls)
    )
    return LLMResult(tool_calls=tcs, reasoning=reasoning, content=content)


def parse(tools, *calls, allowed=None, **kw):
    return loop.parse_response(reply(*calls, **kw), tools, allowed=allowed)


# ---------------------------------------------------------------- parsing


def test_thinking_and_heartbeat_are_split_from_args(tools):
    p = parse(
        tools,
        ("core_memory_append", {"thinking": "save it", "label": "human", "content": "x", "request_heartbeat": True}),
    )
    call = p.calls[0]
    assert call.valid and call.args == {"label": "human", "content": "x"}
    assert call.thinking == "save it" and call.request_heartbeat is True
    assert p.reasoning_parts() == [("save it", "non_reasoner_model")]


def test_native_reasoning_is_reasoning(tools):
    p = parse(tools, ("send_message", {"message": "hi"}), reasoning="deep thought")
    assert p.reasoning_parts() == [("deep thought", "reasoner_model")]
    assert loop.assistant_text(p.calls[0]) == "hi"


def test_heartbeat_string_values(tools):
    assert parse(tools, ("conversation_search", {"query": "q", "request_heartbeat": "true"})).calls[0].request_heartbeat
    assert (
        not parse(tools, ("conversation_search", {"query": "q", "request_heartbeat": "false"}))
        .calls[0]
        .request_heartbeat
    )


def test_malformed_json_is_an_error_result(tools):
    call = parse(tools, ("send_message", '{"message": "unterminated')).calls[0]
    assert not call.valid and "not valid JSON" in call.error
    assert "JSON object" in parse(tools, ("send_message", "[1, 2]")).calls[0].error


def test_unknown_tool_is_an_error_result(tools):
    call = parse(tools, ("launch_rockets", {})).calls[0]
    assert not call.valid and "'launch_rockets' does not exist" in call.error and "send_message" in call.error


def test_missing_required_argument(tools):
    call = parse(tools, ("core_memory_append", {"label": "human"})).calls[0]
    assert not call.valid and "content" in call.error


def test_rule_violation_is_an_error_result(tools):
    names = [t.name for t in tools]
    allowed = rules.allowed_tools(
        [ConstrainChildTools(tool_name="conversation_search", children=("send_message",))],
        names,
        ["conversation_search"],
    )
    call = parse(tools, ("archival_memory_search", {"query": "x"}), allowed=allowed).calls[0]
    assert (
        call.error == "[ToolConstraintError] Cannot call archival_memory_search, valid tools include: ['send_message']."
    )


# ---------------------------------------------------------------- continue or stop


def decide(p, failed=None, tool_rules=(), history=None, steps=1, max_steps=10):
    failed = failed if failed is not None else [not c.valid for c in p.calls]
    history = history if history is not None else [c.name for c in p.calls if c.valid]
    return loop.decide_next(
        parsed=p, failed=failed, tool_rules=list(tool_rules), history=history, steps_taken=steps, max_steps=max_steps
    )


def test_send_message_ends_the_turn(tools):
    d = decide(parse(tools, ("send_message", {"message": "hi"})))
    assert d == loop.Decision(False, StopReason.END_TURN)


def test_send_message_with_heartbeat_continues(tools):
    d = decide(parse(tools, ("send_message", {"message": "hi", "request_heartbeat": True})))
    assert d.continue_loop and d.heartbeat_reason == loop.HEARTBEAT_REASON


def test_heartbeat_chains_and_no_heartbeat_stops(tools):
    assert decide(parse(tools, ("conversation_search", {"query": "q", "request_heartbeat": True}))).continue_loop
    assert decide(parse(tools, ("conversation_search", {"query": "q"}))).stop_reason == StopReason.END_TURN


def test_a_settled_wait_goes_back_to_the_model_when_its_answers_or_messages_need_it(tools):
    said = parse(tools, ("send_message", {"message": "hi"}))
    steps = {"parsed": said, "failed": [False], "tool_rules": [], "history": ["send_message"], "max_steps": 10}
    approved = loop.decide_next(**steps, steps_taken=1, answered=False)
    assert approved == loop.Decision(False, StopReason.END_TURN) and approved.kind == loop.StepKind.DONE
    denied = loop.decide_next(**steps, steps_taken=1, answered=True)  # a denial or a client's result
    assert denied == loop.Decision(True, None, loop.HEARTBEAT_REASON) and denied.kind == loop.StepKind.CONTINUE
    sent_along = loop.decide_next(**steps, steps_taken=1, more_input=True, heartbeats=False)
    assert sent_along == loop.Decision(True, None, None)  # letta_v1_agent: no heartbeat message
    steps["parsed"], steps["failed"] = parse(tools, content="just text"), []
    other = loop.decide_next(**steps, steps_taken=1, answered=True)  # any other stop stays a stop
    assert other == loop.Decision(False, StopReason.NO_TOOL_CALL)


def test_no_tool_call(tools):
    assert decide(parse(tools, content="just text")).stop_reason == StopReason.NO_TOOL_CALL


def test_failed_call_continues_with_failure_reason(tools):
    d = decide(parse(tools, ("nope", {})))
    assert d.continue_loop and d.heartbeat_reason == loop.FAILED_REASON
    raised = decide(parse(tools, ("conversation_search", {"query": "q"})), failed=[True])
    assert raised.continue_loop and raised.heartbeat_reason == loop.FAILED_REASON


def test_max_steps_bounds_the_run(tools):
    d = decide(parse(tools, ("conversation_search", {"query": "q", "request_heartbeat": True})), steps=3, max_steps=3)
    assert d == loop.Decision(False, StopReason.MAX_STEPS)
    bad = decide(parse(tools, ("nope", {})), steps=3, max_steps=3)
    assert bad.stop_reason == StopReason.INVALID_TOOL_CALL


def test_exit_loop_rule_stops_even_with_heartbeat(tools):
    r = [ExitLoop(tool_name="conversation_search")]
    assert (
        decide(parse(tools, ("conversation_search", {"query": "q"})), tool_rules=r).stop_reason == StopReason.END_TURN
    )
    d = decide(parse(tools, ("conversation_search", {"query": "q", "request_heartbeat": True})), tool_rules=r)
    assert d.stop_reason == StopReason.TOOL_RULE


def test_continue_loop_rule_continues_without_heartbeat(tools):
    d = decide(
        parse(tools, ("conversation_search", {"query": "q"})),
        tool_rules=[ContinueLoop(tool_name="conversation_search")],
    )
    assert d.continue_loop and d.heartbeat_reason == loop.RULE_CONTINUE_REASON


def test_required_before_exit_keeps_going(tools):
    r = [RequiredBeforeExit(tool_name="archival_memory_insert")]
    d = decide(parse(tools, ("send_message", {"message": "bye"})), tool_rules=r)
    assert d.continue_loop and "archival_memory_insert" in d.heartbeat_reason
    done = decide(
        parse(tools, ("send_message", {"message": "bye"})),
        tool_rules=r,
        history=["archival_memory_insert", "send_message"],
    )
    assert done.stop_reason == StopReason.END_TURN


def test_heartbeat_message_shape():
    text = loop.heartbeat_message(now=datetime(2025, 3, 4, 17, 5, 6, tzinfo=UTC))
    data = json.loads(text)
    assert data["type"] == "heartbeat" and data["reason"] == loop.HEARTBEAT_REASON
    assert data["time"].startswith("2025-03-04 05:05:06 PM")


# ---------------------------------------------------------------- tool results


def test_tool_result_format():
    data = json.loads(loop.format_tool_result(ok=True, message={"a": 1}))
    assert data["status"] == "OK" and data["message"] == '{"a": 1}' and data["time"]
    assert json.loads(loop.format_tool_result(ok=False, message="boom"))["status"] == "Failed"
    assert json.loads(loop.format_tool_result(ok=True, message=None))["message"] == "None"


def test_tool_result_truncation_says_so():
    data = json.loads(loop.format_tool_result(ok=True, message="x" * 500, return_char_limit=100))
    assert data["message"].startswith("x" * 100 + "...")
    assert data["message"] == "x" * 100 + (
        "... [NOTE: function output was truncated since it exceeded the character limit (500 > 100)]"
    )
    assert (
        json.loads(loop.format_tool_result(ok=True, message="x" * 100, return_char_limit=100))["message"] == "x" * 100
    )


def test_tool_error_text():
    assert loop.tool_error_text("f", ValueError("bad")) == "Error executing function f: ValueError: bad"


# ---------------------------------------------------------------- pressure, eviction, summaries


def test_memory_pressure_levels():
    assert loop.memory_pressure(700, 1000) == "ok"
    assert loop.memory_pressure(750, 1000) == "warn"
    assert loop.memory_pressure(900, 1000) == "evict"
    assert "75%" in loop.memory_pressure_warning(750, 1000) and "archival memory" in loop.memory_pressure_warning(
        750, 1000
    )


def test_plan_eviction_keeps_system_and_never_splits_tool_pairs():
    system = msg(0, Role.SYSTEM, "sys")
    history = [system, msg(1), *tool_exchange(2), msg(4), *tool_exchange(5), msg(7)]
    per = {m.id: m.token_count for m in history}
    # A target that the cut right after the first assistant call would satisfy must not split it.
    target = sum(per[m.id] for m in history) - per["message-1"] - per["message-2"]
    plan = loop.plan_eviction(history, target)
    assert plan.keep[0] is system
    assert [m.id for m in plan.evict] == ["message-1", "message-2", "message-3"]
    assert plan.keep[1].role != Role.TOOL and plan.fits
    assert plan.kept_tokens == sum(m.token_count for m in plan.keep)


def test_plan_eviction_keeps_the_newest_message_even_if_it_cannot_fit():
    history = [msg(0, Role.SYSTEM, "sys"), msg(1), msg(2)]
    plan = loop.plan_eviction(history, 1)
    assert [m.id for m in plan.keep] == ["message-0", "message-2"] and not plan.fits


def test_plan_eviction_nothing_to_do():
    history = [msg(0, Role.SYSTEM, "sys"), msg(1)]
    plan = loop.plan_eviction(history, 10_000)
    assert plan.evict == () and plan.fits


def test_summary_message_text():
    text = loop.summary_message_text(12, "Bob likes cats.")
    assert text.startswith("Note: 12 messages from the beginning of the conversation have been hidden from view")
    assert text.endswith("The following is a summary of the previous messages: Bob likes cats.")


def test_summarizer_request_folds_previous_summary_and_has_no_tools():
    evicted = [msg(1, Role.USER, "my cat is Tom"), *tool_exchange(2)]
    req = loop.build_summarizer_request(model="openai/fake-model", evicted=evicted, previous_summary="Bob likes cats.")
    assert "tools" not in req and req["model"] == "openai/fake-model"
    user = req["messages"][1]["content"]
    assert "Previous summary:\nBob likes cats." in user and "my cat is Tom" in user and "core_memory_append" in user


def test_summarizer_request_caps_input_length():
    evicted = [msg(i, Role.USER, "y" * 1000) for i in range(50)]
    req = loop.build_summarizer_request(model="m", evicted=evicted, max_chars=5000)
    assert len(req["messages"][1]["content"]) < 6000 and "older messages omitted" in req["messages"][1]["content"]


@pytest.mark.parametrize("reason", list(StopReason))
def test_stop_reasons_are_letta_strings(reason):
    assert reason.value in {
        "end_turn",
        "no_tool_call",
        "max_steps",
        "invalid_tool_call",
        "llm_api_error",
        "tool_rule",
        "cancelled",
        "error",
        "max_tokens_exceeded",
        "requires_approval",
    }
