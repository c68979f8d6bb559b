"""The TypeScript SDK (@letta-ai/letta-client, pinned in package-lock.json) against our server: sdk_flows.mjs walks
agents, conversations, a streamed turn in a conversation, messages search, tags, steps and compaction, and prints
each step's result as JSON; this test checks them all and names every one that is wrong. A failure's report also
holds every request the server answered (tests/clients/conftest.py)."""

import json
import subprocess
from pathlib import Path

from tests.clients.request_log import condensed
from tests.fake_llm import FakeLLM

SCRIPT = Path(__file__).with_name("sdk_flows.mjs")
IN_CONVERSATION = "Hello through the conversation."
DIRECT = "Hello directly."


def run_flows(env: dict) -> dict:
    done = subprocess.run(
        ["node", str(SCRIPT)], env=env, cwd=SCRIPT.parent, capture_output=True, text=True, timeout=300
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
