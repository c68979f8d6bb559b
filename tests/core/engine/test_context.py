"""The context compiler: sections, exact request, tool schema decoration, overview and diff."""

import json
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from core.engine import context, tokens
from core.engine.types import ConstrainChildTools, ExitLoop, MemoryStats, Message, Role, Section
from tests.core.engine.builders import msg, tool_exchange


def compile_(agent, blocks, messages, tools, rules=(), stats=MemoryStats(), **kw):
    return context.compile_context(agent, blocks, messages, tools, list(rules), stats, **kw)


def test_sections_are_ordered_and_sum_to_total(agent, blocks, tools):
    ctx = compile_(agent, blocks, [msg(1)], tools)
    assert [s.name for s in ctx.sections] == list(context.SECTION_NAMES)
    assert ctx.total_tokens == sum(s.tokens for s in ctx.sections) + tokens.REPLY_PRIMING_TOKENS
    assert ctx.tokenizer == tokens.get_tokenizer(agent.model).name
    assert ctx.context_window == 128000 and ctx.fits


def test_the_messages_and_tools_sections_text_is_their_requests_json(agent, blocks, tools):
    ctx = compile_(agent, blocks, [msg(1), msg(2, role=Role.ASSISTANT, content="é ✓")], tools)
    history = ctx.request["messages"][1:]  # no summary: everything after the system message
    compact = json.dumps(history, ensure_ascii=False, separators=(",", ":"))
    assert ctx.section("messages").text == compact and "é ✓" in history[-1]["content"]
    assert json.loads(ctx.section("tools").text) == ctx.request["tools"]
    assert ctx.section("messages") == Section(name="messages", tokens=ctx.section("messages").tokens, text=compact)
    for bad in ({}, {"text": "x", "json_of": []}):
        with pytest.raises(TypeError, match="its text or the value"):
            Section(name="x", tokens=0, **bad)


def test_system_message_holds_instructions_rules_memory_and_metadata(agent, blocks, tools):
    stats = MemoryStats(recall_outside_window=12, archival_count=3)
    ctx = compile_(
        agent,
        blocks,
        [msg(1)],
        tools,
        [ExitLoop(tool_name="send_message")],
        stats,
        now=datetime(2025, 1, 2, tzinfo=UTC),
    )
    system = ctx.request["messages"][0]
    assert system["role"] == "system"
    text = system["content"]
    assert (
        text.index(agent.system)
        < text.index("<tool_usage_rules>")
        < text.index("<memory_blocks>")
        < text.index("<memory_metadata>")
    )
    assert "<persona>\n<description>\nWho I am.\n</description>" in text
    assert "- chars_current=9\n- chars_limit=200" in text
    assert "<human>" in text and "- read_only=true" in text and "<value>\nName: Bob\n</value>" in text
    assert "12 previous messages between you and the user are stored in recall memory" in text
    assert "3 total memories you created are stored in archival memory" in text
    assert "January 02, 2025" in text
    assert ctx.section("core_memory").text in text and ctx.section("memory_metadata").text in text


def test_request_is_exact(agent, blocks, tools):
    history = [msg(1), *tool_exchange(2), msg(4, Role.USER, "thanks")]
    a = replace(agent, temperature=0.2, max_tokens=512)
    ctx = compile_(a, blocks, history, tools)
    req = ctx.request
    assert req["model"] == agent.model and req["temperature"] == 0.2 and req["max_tokens"] == 512
    assert req["tool_choice"] == "required"
    assert [m["role"] for m in req["messages"]] == ["system", "user", "assistant", "tool", "user"]
    assert req["messages"][2]["tool_calls"][0]["function"]["name"] == "core_memory_append"
    assert req["messages"][3]["tool_call_id"] == "call-2"
    assert json.dumps(req)  # serialisable as sent


def test_a_system_role_message_first_after_the_system_prompt_is_kept(agent, blocks, tools):
    # Another agent's message arrives as a system-role message; first in the window, it must still be sent.
    incoming = Message(id="m0", role=Role.SYSTEM, content="[Incoming message from agent with ID 'a'] hi", token_count=9)
    ctx = compile_(agent, blocks, [incoming, msg(1)], tools)
    assert [m["role"] for m in ctx.request["messages"]] == ["system", "system", "user"]
    assert ctx.request["messages"][1]["content"] == incoming.content
    assert incoming.content not in ctx.request["messages"][0]["content"]


def test_thinking_and_heartbeat_are_added_per_tool(agent, blocks, tools):
    agent = replace(agent, put_inner_thoughts=True)
    ctx = compile_(agent, blocks, [], tools, [ExitLoop(tool_name="archival_memory_search")])
    defs = {d["function"]["name"]: d["function"]["parameters"] for d in ctx.request["tools"]}
    append = defs["core_memory_append"]
    assert list(append["properties"])[0] == "thinking" and append["required"][0] == "thinking"
    assert append["properties"]["thinking"]["description"] == context.THINKING_DESCRIPTION
    assert append["properties"]["request_heartbeat"]["type"] == "boolean" and "request_heartbeat" in append["required"]
    assert "request_heartbeat" not in defs["send_message"]["properties"]  # terminal
    assert "request_heartbeat" not in defs["archival_memory_search"]["properties"]  # exit_loop rule


def test_thinking_arg_is_off_unless_asked(agent, blocks, tools):
    """Letta's LLMConfig defaults put_inner_thoughts_in_kwargs to False for every model; heartbeats stay."""
    ctx = compile_(agent, blocks, [], tools)
    defs = {d["function"]["name"]: d["function"]["parameters"] for d in ctx.request["tools"]}
    assert all("thinking" not in p["properties"] for p in defs.values())
    assert "request_heartbeat" in defs["core_memory_append"]["properties"]


def test_native_reasoning_models_get_no_thinking_arg(agent, blocks, tools):
    ctx = compile_(replace(agent, native_reasoning=True, put_inner_thoughts=True), blocks, [], tools)
    for d in ctx.request["tools"]:
        assert "thinking" not in d["function"]["parameters"]["properties"]


def test_allowed_tools_and_tool_choice_narrow_the_request(agent, blocks, tools):
    choice = {"type": "function", "function": {"name": "send_message"}}
    ctx = compile_(agent, blocks, [], tools, allowed_tools=["send_message"], tool_choice=choice)
    assert [d["function"]["name"] for d in ctx.request["tools"]] == ["send_message"]
    assert ctx.request["tool_choice"] == choice and ctx.allowed_tools == ("send_message",)


def test_tool_rules_section(agent, blocks, tools):
    empty = compile_(agent, blocks, [], tools)
    assert (
        empty.section("tool_rules").tokens == 0 and "<tool_usage_rules>" not in empty.request["messages"][0]["content"]
    )
    ruled = compile_(
        agent, blocks, [], tools, [ConstrainChildTools(tool_name="core_memory_append", children=("send_message",))]
    )
    assert ruled.section("tool_rules").tokens > 0
    assert "After core_memory_append, you must call one of: send_message." in ruled.request["messages"][0]["content"]


def test_summary_goes_right_after_system(agent, blocks, tools):
    summary = msg(0, Role.USER, "Note: 4 messages ... summary: Bob likes cats.")
    ctx = compile_(agent, blocks, [msg(1)], tools, summary=summary)
    assert ctx.request["messages"][1]["content"] == summary.content
    assert ctx.section("summary").tokens == summary.token_count and ctx.num_messages == 3


def test_message_tokens_come_from_stored_counts(agent, blocks, tools):
    fake = Message(id="m", role=Role.USER, content="short", token_count=5000)
    ctx = compile_(agent, blocks, [fake], tools)
    assert ctx.section("messages").tokens == 5000  # the stored count, not a recount


def test_memory_edit_shows_in_next_compile(agent, blocks, tools):
    before = compile_(agent, blocks, [msg(1)], tools)
    edited = [replace(blocks[0], value=blocks[0].value + "\nI like tea.")] + blocks[1:]
    after = compile_(agent, edited, [msg(1)], tools)
    assert "I like tea." in after.request["messages"][0]["content"]
    rows = {r["name"]: r for r in context.diff(before, after)}
    assert rows["core_memory"]["delta"] > 0 and rows["core_memory"]["changed"]
    assert rows["messages"]["delta"] == 0 and not rows["messages"]["changed"]
    assert rows["total"]["delta"] == after.total_tokens - before.total_tokens


def test_overview_has_letta_fields(agent, blocks, tools):
    ctx = compile_(agent, blocks, [msg(1), msg(2)], tools, stats=MemoryStats(recall_outside_window=7, archival_count=2))
    ov = context.overview(ctx)
    assert ov["context_window_size_max"] == 128000
    assert ov["context_window_size_current"] == ctx.total_tokens
    assert ov["num_messages"] == 3 and ov["num_recall_memory"] == 7 and ov["num_archival_memory"] == 2
    assert ov["num_tokens_core_memory"] == ctx.section("core_memory").tokens and "<memory_blocks>" in ov["core_memory"]
    assert ov["num_tokens_external_memory_summary"] > 0 and "<memory_metadata>" in ov["external_memory_summary"]
    assert ov["num_tokens_functions_definitions"] == ctx.section("tools").tokens
    assert len(ov["functions_definitions"]) == len(tools)
    assert ov["num_tokens_messages"] == sum(m.token_count for m in [msg(1), msg(2)])
    assert ov["num_tokens_summary_memory"] == 0 and ov["summary_memory"] is None
    assert ov["system_prompt"].startswith(agent.system) and ov["tokenizer"] == ctx.tokenizer


def test_total_counts_the_request_with_the_same_tokenizer(agent, blocks, tools):
    history = [msg(i, Role.USER, "a fairly ordinary sentence about cats and dogs " * 3) for i in range(30)]
    ctx = compile_(agent, blocks, history, tools)
    req = ctx.request
    recount = sum(tokens.count_message(agent.model, m) for m in req["messages"])
    recount += sum(tokens.count_tool(agent.model, t) for t in req["tools"]) + tokens.REPLY_PRIMING_TOKENS
    assert abs(ctx.total_tokens - recount) <= 0.02 * recount


def test_a_tools_count_is_kept_for_its_spec_and_a_changed_tool_is_counted_again(agent, blocks, tools):
    def counted(ctx):
        return sum(tokens.count_tool(agent.model, d) for d in ctx.request["tools"])

    first = compile_(agent, blocks, [msg(1)], tools)
    assert first.section("tools").tokens == counted(first)
    assert compile_(agent, blocks, [msg(1)], tools).section("tools").tokens == first.section("tools").tokens
    longer = [replace(tools[0], description=tools[0].description + " " + "much longer now " * 20), *tools[1:]]
    longer[0] = replace(longer[0], json_schema={**longer[0].json_schema, "description": longer[0].description})
    changed = compile_(agent, blocks, [msg(1)], longer)
    assert changed.section("tools").tokens == counted(changed) > first.section("tools").tokens
    no_heartbeat = compile_(agent, blocks, [msg(1)], tools, [ExitLoop(tool_name=tools[-1].name)])
    assert no_heartbeat.section("tools").tokens == counted(no_heartbeat) < first.section("tools").tokens
