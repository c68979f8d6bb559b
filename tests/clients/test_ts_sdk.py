"""The TypeScript SDK (@letta-ai/letta-client, pinned in package-lock.json) against our server: sdk_flows.mjs walks
agents, conversations, a streamed turn in a conversation, messages search, tags, steps and compaction — and, as a
second set, tool approvals and client-side tools — and prints each step's result as JSON; these tests check them all
and name every one that is wrong. A failure's report also holds every request the server answered
(tests/clients/conftest.py)."""

import json
import subprocess
from pathlib import Path

from tests.clients.request_log import condensed
from tests.fake_llm import FakeLLM

SCRIPT = Path(__file__).with_name("sdk_flows.mjs")
IN_CONVERSATION = "Hello through the conversation."
DIRECT = "Hello directly."


def run_flows(env: dict, flows: str = "basic") -> dict:
    done = subprocess.run(
        ["node", str(SCRIPT), flows], env=env, cwd=SCRIPT.parent, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and done.stdout.strip(), f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def problems(results: dict) -> list[str]:
    """What in the results differs from what Letta's server answers (one line each)."""
    out: list[str] = []

    def value(name: str):
        got = results.get(name, {})
        if not got.get("ok"):
            out.append(f"{name}: {got}")
            return None
        return got["value"]

    def check(name: str, ok: bool, why: str, got) -> None:
        if not ok:
            out.append(f"{name}: expected {why}; got {condensed(json.dumps(got).encode())[:1500]}")

    agent = value("agents.create")
    conversation = value("conversations.create")
    if agent and conversation:
        check("conversations.create", conversation["id"].startswith("conv-"), "an id conv-…", conversation)
        check("conversations.create", conversation["agent_id"] == agent["id"], "the agent's", conversation)
    if (listed := value("conversations.list")) is not None and conversation:
        check("conversations.list", conversation["id"] in listed, "lists the new conversation", listed)
    if (got := value("conversations.retrieve")) and conversation:
        check("conversations.retrieve", got["id"] == conversation["id"], "the same conversation", got)
        check("conversations.retrieve", got["in_context_message_ids"], "its system message in context", got)
    if turn := value("conversations.messages.create"):
        check("conversations.messages.create", turn["assistant"] == IN_CONVERSATION, "the model's reply", turn)
        check("conversations.messages.create", turn["stop_reason"] == "end_turn", "stop_reason end_turn", turn)
        check("conversations.messages.create", not turn["errors"], "no error_message", turn)
    if (history := value("conversations.messages.list")) is not None:
        contents = [m["content"] for m in history]
        check("conversations.messages.list", IN_CONVERSATION in contents, "holds the conversation's reply", history)
        check("conversations.messages.list", DIRECT not in contents, "not the agent-direct reply", history)
    if direct := value("agents.messages.create"):
        check("agents.messages.create", [m["content"] for m in direct["messages"]][-1:] == [DIRECT], "reply", direct)
    if (default := value("agents.messages.list(default)")) is not None:
        contents = [m["content"] for m in default]
        check("agents.messages.list(default)", DIRECT in contents, "the agent-direct reply", default)
        check("agents.messages.list(default)", IN_CONVERSATION not in contents, "no conversation's message", default)
    if (found := value("messages.search")) is not None and agent:
        check(
            "messages.search",
            any(r["content"] and "conversation" in r["content"].lower() for r in found),
            "finds the message sent through the conversation",
            found,
        )
        check("messages.search", all(r["agent_id"] == agent["id"] for r in found), "only this agent's", found)
    if (tags := value("tags.list")) is not None:
        check("tags.list", {"ts-sdk", "clients"} <= set(tags), "the agent's tags", tags)
    if (steps := value("steps.list")) is not None and agent:
        check("steps.list", len(steps) >= 2, "a step per turn", steps)
        check("steps.list", all(s["agent_id"] == agent["id"] for s in steps), "only this agent's steps", steps)
    for name in ("agents.messages.compact", "conversations.messages.compact"):
        if compacted := value(name):
            check(name, isinstance(compacted.get("summary"), str), "a summary", compacted)
            check(
                name,
                compacted.get("num_messages_after", 0) < compacted.get("num_messages_before", 0),
                "fewer messages after",
                compacted,
            )
    return out


def test_sdk_flows(client_env, daphne_server, fake_llm):
    # the script's two turns, in its order; compaction's summaries get the fake's default reply
    fake_llm.script(FakeLLM.text(IN_CONVERSATION), FakeLLM.text(DIRECT))
    results = run_flows(client_env)
    wrong = problems(results)
    assert not wrong, "\n".join(wrong)


# --------------------------------------------------------------------------- approvals and client-side tools

APPROVED = "the launch code is 42"
DENIED = "the password is hunter2"
DENY_REASON = "never store passwords"
NOTE = "Buy oat milk."


def tool_result_seen(fake_llm, call_id: str) -> dict | None:
    """The result of call `call_id` as the fake model last read it ({status, message, time}), if it did."""
    for request in reversed(fake_llm.chat_requests):
        for m in request["messages"]:
            if m["role"] == "tool" and m.get("tool_call_id") == call_id:
                return json.loads(m["content"])
    return None


def approval_problems(results: dict, fake_llm) -> list[str]:
    out: list[str] = []

    def value(name: str):
        got = results.get(name, {})
        if not got.get("ok"):
            out.append(f"{name}: {got}")
            return None
        return got["value"]

    def check(name: str, ok: bool, why: str, got) -> None:
        if not ok:
            out.append(f"{name}: expected {why}; got {condensed(json.dumps(got).encode())[:1500]}")

    if agent := value("approval.agents.create"):
        rule = {"type": "requires_approval", "tool_name": "archival_memory_insert"}
        check(
            "approval.agents.create",
            any(r["type"] == rule["type"] and r["tool_name"] == rule["tool_name"] for r in agent["tool_rules"] or []),
            "the requires_approval rule back",
            agent,
        )
    if asked := value("approval.ask"):
        check("approval.ask", asked["stop_reason"] == "requires_approval", "stop_reason requires_approval", asked)
        kinds = [m["message_type"] for m in asked["messages"]]
        check("approval.ask", kinds[-1:] == ["approval_request_message"], "ends with the approval request", kinds)
        call = asked["call"] or {}
        check("approval.ask", call.get("name") == "archival_memory_insert", "the waiting call", call)
        check("approval.ask", APPROVED in (call.get("arguments") or ""), "its arguments", call)
        ask = next((m for m in asked["messages"] if m["message_type"] == "approval_request_message"), {})
        check("approval.ask", ask.get("tool_call") == call, "tool_call = tool_calls[0]", ask)
    if (waiting := value("approval.send_while_waiting")) is not None:
        check("approval.send_while_waiting", waiting["status"] == 409, "Letta's 409", waiting)
        check("approval.send_while_waiting", "waiting for approval" in waiting.get("error", ""), "its text", waiting)
    if (done := value("approval.approve")) and asked:
        kinds = [m["message_type"] for m in done["messages"]]
        check("approval.approve", kinds == ["tool_return_message", "assistant_message"], "the result, the reply", kinds)
        check("approval.approve", done["stop_reason"] == "end_turn", "stop_reason end_turn", done)
        ret = done["messages"][0]
        check("approval.approve", ret["tool_call_id"] == asked["call"]["tool_call_id"], "the waiting call's", ret)
        check("approval.approve", ret["status"] == "success", "it ran", ret)
        seen = tool_result_seen(fake_llm, asked["call"]["tool_call_id"])
        check("approval.approve", seen is not None and seen["status"] == "OK", "the model read its result", seen)
    if streamed := value("approval.ask(stream)"):
        check("approval.ask(stream)", streamed["stop_reason"] == "requires_approval", "requires_approval", streamed)
        check("approval.ask(stream)", streamed["ask_names"] == ["archival_memory_insert"], "one waiting call", streamed)
        check("approval.ask(stream)", len(streamed["ask_ids"]) == 1, "one call id on its chunks", streamed)
        check("approval.ask(stream)", DENIED in streamed["ask_arguments"], "its arguments in the chunks", streamed)
        # Letta's token chunks carry tool_calls as one delta object; a step stored before the stream began reading
        # comes as the stored message, whole (tests/core/test_sdk_approvals.py has the race)
        shapes = streamed["ask_shapes"]
        check(
            "approval.ask(stream)",
            set(shapes) == {"delta"} or shapes == ["list"],
            "tool_calls a delta object on every chunk (or the whole message once)",
            streamed,
        )
        check(
            "approval.ask(stream)",
            "tool_call_message" not in streamed["message_types"],
            "no tool_call_message for the waiting call",
            streamed,
        )
    if (denied := value("approval.deny(stream)")) and streamed:
        check("approval.deny(stream)", denied["stop_reason"] == "end_turn", "stop_reason end_turn", denied)
        check("approval.deny(stream)", denied["assistant"] == "Not saved.", "the model's reply", denied)
        check("approval.deny(stream)", not denied["errors"], "no error_message", denied)
        seen = tool_result_seen(fake_llm, streamed["ask_ids"][0])
        want = f"Error: request to call tool denied. User reason: {DENY_REASON}"
        check(
            "approval.deny(stream)",
            seen is not None and seen["status"] == "Failed" and seen["message"] == want,
            "the model read the denial",
            seen,
        )
    if (history := value("approval.history")) is not None:
        kinds = [m["message_type"] for m in history]
        check("approval.history", kinds.count("approval_request_message") == 2, "both requests", kinds)
        answers = [m for m in history if m["message_type"] == "approval_response_message"]
        check("approval.history", len(answers) == 2, "both answers", kinds)
        check(
            "approval.history",
            [a["approvals"][0]["approve"] for a in answers if a["approvals"]] == [True, False],
            "approve, then deny",
            answers,
        )
    if (passages := value("approval.passages")) is not None:
        check("approval.passages", any(APPROVED in p for p in passages), "the approved insert", passages)
        check("approval.passages", not any(DENIED in p for p in passages), "not the denied one", passages)
    if client_ask := value("client_tool.ask"):
        check("client_tool.ask", client_ask["stop_reason"] == "requires_approval", "requires_approval", client_ask)
        call = client_ask["call"] or {}
        check("client_tool.ask", call.get("name") == "read_sticky_note", "the client tool's call", call)
    offered = [{t["function"]["name"]: t["function"] for t in r.get("tools") or []} for r in fake_llm.chat_requests]
    with_note = [o["read_sticky_note"] for o in offered if "read_sticky_note" in o]
    check(
        "client_tool.ask",
        bool(with_note) and with_note[0]["parameters"].get("required") == ["color"],
        "the client tool offered to the model with its parameters",
        with_note[:1],
    )
    if (returned := value("client_tool.return")) and client_ask:
        check("client_tool.return", returned["stop_reason"] == "end_turn", "stop_reason end_turn", returned)
        seen = tool_result_seen(fake_llm, client_ask["call"]["tool_call_id"])
        check(
            "client_tool.return",
            seen is not None and seen["status"] == "OK" and seen["message"] == NOTE,
            "the model read the client's result",
            seen,
        )
        said = [m["content"] for m in returned["messages"] if m["message_type"] == "assistant_message"]
        check("client_tool.return", said == [f"It says: {NOTE}"], "the model's reply", returned)
    if conv_ask := value("client_tool.conversation.ask"):
        check("client_tool.conversation.ask", conv_ask["stop_reason"] == "requires_approval", "a wait", conv_ask)
        check("client_tool.conversation.ask", conv_ask["ask_names"] == ["read_sticky_note"], "its call", conv_ask)
    if (conv_ret := value("client_tool.conversation.return")) and conv_ask and conv_ask["ask_ids"]:
        check("client_tool.conversation.return", conv_ret["stop_reason"] == "end_turn", "end_turn", conv_ret)
        check("client_tool.conversation.return", conv_ret["assistant"] == "No blue note.", "the reply", conv_ret)
        seen = tool_result_seen(fake_llm, conv_ask["ask_ids"][0])
        check(
            "client_tool.conversation.return",
            seen is not None and seen["status"] == "Failed" and seen["message"] == "No blue note.",
            "the model read the client's error",
            seen,
        )
    search_rule = {"type": "requires_approval", "tool_name": "conversation_search"}

    def has_search_rule(got) -> bool:
        return search_rule in [{"type": r["type"], "tool_name": r["tool_name"]} for r in got["tool_rules"] or []]

    # agents.tools.updateApproval: SDK 1.12.1 sends {"body_requires_approval": true} (its parameter's name); the
    # server takes it as requires_approval, so the SDK's own call works.
    got = results.get("agents.tools.updateApproval", {})
    check("agents.tools.updateApproval", got.get("ok") and has_search_rule(got["value"]), "the rule added", got)
    if toggled := value("agents.tools.approval(patch)"):
        check("agents.tools.approval(patch)", has_search_rule(toggled), "the rule added", toggled)
        check("agents.tools.approval(patch)", toggled["stop_reason"] == "requires_approval", "the tool asks", toggled)
        check(
            "agents.tools.approval(patch)",
            (toggled["call"] or {}).get("name") == "conversation_search",
            "the waiting call is conversation_search",
            toggled,
        )
    return out


def test_sdk_approval_flows(client_env, daphne_server, fake_llm):
    fake_llm.script(
        FakeLLM.tool("archival_memory_insert", {"content": APPROVED}),
        FakeLLM.text("Saved."),
        FakeLLM.tool("archival_memory_insert", {"content": DENIED}),
        FakeLLM.text("Not saved."),
        FakeLLM.tool("read_sticky_note", {"color": "yellow"}),
        FakeLLM.text(f"It says: {NOTE}"),
        FakeLLM.tool("read_sticky_note", {"color": "blue"}),
        FakeLLM.text("No blue note."),
        FakeLLM.tool("conversation_search", {"query": "tea"}),
    )
    results = run_flows(client_env, "approvals")
    wrong = approval_problems(results, fake_llm)
    assert not wrong, "\n".join(wrong)
