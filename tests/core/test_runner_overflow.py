"""Context overflow: eviction, recursive summaries, truncation, the pressure warning, the too-small error."""

from core.agents.services import BlockInput
from core.engine import tokens
from core.models import Message, Step
from core.runs.runner import run_agent
from tests.factories import make_agent
from tests.fake_llm import FakeLLM

WINDOW = 2000
MODEL = "openai/fake-model"


def _small_agent(org, **kw):
    return make_agent(
        org,
        system="You are a concise test agent. Reply with send_message.",
        include_base_tools=False,
        tools=["send_message", "conversation_search"],
        context_window_limit=WINDOW,
        memory_blocks=[BlockInput(label="human", value="Name: Alice")],
        **kw,
    )


def _request_tokens(req: dict) -> int:
    """The request's size, counted with the tokenizer and framing the compiler uses."""
    n = sum(tokens.count_message(MODEL, m) for m in req["messages"]) + tokens.REPLY_PRIMING_TOKENS
    return n + sum(tokens.count_tool(MODEL, t) for t in req.get("tools") or [])


def _say(agent, text):
    return run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": text}])


def _turn_text(i: int) -> str:
    return f"Turn {i}: remember marker{i:02d}. " + "This is filler text to make the turn long enough to matter. " * 3


def test_fifty_turns_in_a_2000_token_window(account, fake_llm):
    agent = _small_agent(account.org)
    for i in range(50):
        result = _say(agent, _turn_text(i))
        assert result.stop_reason == "end_turn", result.error
    sizes = [_request_tokens(r) for r in fake_llm.chat_requests]
    assert max(sizes) <= WINDOW, max(sizes)
    summarizer = [r for r in fake_llm.chat_requests if not r.get("tools")]
    assert len(summarizer) >= 2
    assert "marker00" in summarizer[0]["messages"][1]["content"]
    assert "Previous summary:" in summarizer[-1]["messages"][1]["content"]
    assert Step.objects.filter(agent=agent, kind="summarizer").count() == len(summarizer)
    agent.refresh_from_db()
    second = Message.objects.get(pk=agent.message_ids[1])
    assert (
        second.kind == "summary"
        and second.text.startswith("Note: ")
        and "summary of the previous messages" in second.text
    )
    in_window = set(agent.message_ids)
    first_turn = Message.objects.get(agent=agent, role="user", text__contains="marker00")
    assert first_turn.id not in in_window
    assert any("Memory pressure" in (m.get("content") or "") for r in fake_llm.chat_requests for m in r["messages"])
    # The evicted turn is still found by the agent's own recall search.
    # (Scripted twice: a summarizer call may come first and take one; the fake then answers send_message.)
    search = FakeLLM.tool("conversation_search", {"query": "marker00"}, heartbeat=True)
    fake_llm.script(search, search)
    result = _say(agent, "What was the first marker?")
    found = [m["tool_return"] for m in result.messages if m["message_type"] == "tool_return_message"]
    assert any("marker00" in text for text in found), found
    assert max(_request_tokens(r) for r in fake_llm.chat_requests) <= WINDOW


def test_truncate_strategy_drops_without_a_model_call(account, fake_llm):
    agent = _small_agent(account.org, overflow_strategy="truncate")
    for i in range(25):
        _say(agent, _turn_text(i))
    assert all(r.get("tools") for r in fake_llm.chat_requests)
    assert max(_request_tokens(r) for r in fake_llm.chat_requests) <= WINDOW
    agent.refresh_from_db()
    note = Message.objects.get(pk=agent.message_ids[1])
    assert note.kind == "summary" and "conversation_search" in note.text
    assert not Step.objects.filter(agent=agent, kind="summarizer").exists()


def test_provider_context_length_error_evicts_and_retries(account, fake_llm):
    agent = make_agent(account.org)
    for i in range(4):
        _say(agent, _turn_text(i))
    fake_llm.script(
        FakeLLM.context_length_error(),
        FakeLLM.text("summary of early turns"),
        FakeLLM.tool("send_message", {"message": "still here"}),
    )
    result = _say(agent, "next")
    assert result.stop_reason == "end_turn", result.error
    agent.refresh_from_db()
    summary = Message.objects.get(pk=agent.message_ids[1])
    assert summary.kind == "summary" and "summary of early turns" in summary.text


def test_fixed_sections_over_the_window_is_a_clear_error(account, fake_llm):
    agent = make_agent(
        account.org,
        context_window_limit=1024,
        memory_blocks=[BlockInput(label="human", value="word " * 2000, limit=20000)],
    )
    result = _say(agent, "hi")
    assert result.stop_reason == "error" and result.status == "failed"
    assert "too small" in result.error and "context_window_limit" in result.error
    assert "The biggest part is the core memory blocks" in result.error and "Shorten memory blocks" in result.error
    assert fake_llm.chat_requests == []
    agent.refresh_from_db()
    assert len(agent.message_ids) == 1


def test_a_huge_message_is_named_as_the_cause_not_the_fixed_sections(account, fake_llm):
    agent = make_agent(account.org, context_window_limit=4096)
    huge = "All work and no play makes Jack a dull boy. " * 4000  # ~180 KB
    result = _say(agent, huge)
    assert result.stop_reason == "error" and result.status == "failed"
    assert f"The biggest part is your message ({len(huge):,} characters)" in result.error, result.error
    assert "smaller parts" in result.error and "system prompt, memory blocks" not in result.error
    assert fake_llm.chat_requests == []
