"""Letta Code (@letta-ai/letta-code, pinned in package-lock.json) run headless against our server, unchanged: a new
agent answering one prompt (the fake model replies with plain text, as a letta_v1_agent does), in both machine
output formats, then its `messages` subcommands. A failure shows what Letta Code printed and every request the
server answered (tests/clients/conftest.py)."""

import json
import subprocess

import pytest

from tests.clients.node_deps import LETTA
from tests.fake_llm import FakeLLM

MODEL = "openai/fake-model"
PROMPT = "Say hello."
REPLY = "Hello from the fake model."


def letta(*args: str, env: dict, cwd, timeout: float = 180) -> subprocess.CompletedProcess:
    """Run the `letta` CLI to completion; what it printed goes to the test's captured output."""
    done = subprocess.run([str(LETTA), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    print(
        f"$ letta {' '.join(args)}\nexit {done.returncode}\nstdout:\n{done.stdout[-4000:]}\nstderr:\n{done.stderr[-4000:]}"
    )
    return done


def json_output(done: subprocess.CompletedProcess):
    assert done.returncode == 0 and done.stdout.strip(), f"letta exited {done.returncode}: {done.stderr[-500:]}"
    return json.loads(done.stdout)


def assert_no_failed_requests(server) -> None:
    failed = [f"{e['method']} {e['path']} -> {e['status']}" for e in server.failed()]
    assert not failed, f"the server answered 4xx/5xx (or not at all): {failed}"


def assert_model_saw_prompt(fake_llm) -> None:
    """The prompt reached the model, offered without send_message (a letta_v1_agent replies in plain text)."""
    request = fake_llm.chat_requests[-1]
    assert PROMPT in json.dumps(request["messages"])
    assert "send_message" not in {t["function"]["name"] for t in request.get("tools") or []}


@pytest.fixture
def project(tmp_path):
    """The directory Letta Code runs in (it pins agents to a project in .letta/ there)."""
    path = tmp_path / "project"
    path.mkdir()
    return path


@pytest.fixture
def headless(client_env, project, daphne_server, fake_llm):
    """Run `letta -p PROMPT --new-agent` with the fake model scripted to answer REPLY; returns the finished run."""

    def run(output_format: str) -> subprocess.CompletedProcess:
        fake_llm.script(FakeLLM.text(REPLY))
        return letta(
            "-p", PROMPT, "--new-agent", "-m", MODEL, "--output-format", output_format, env=client_env, cwd=project
        )

    return run


def brief(messages: list[dict]) -> list[tuple]:
    return [(m.get("message_type"), str(m.get("content") or m.get("reasoning") or "")[:60]) for m in messages]


@pytest.fixture
def turn(headless) -> dict:
    """One headless turn on a new agent: Letta Code's JSON result (agent_id, conversation_id, result...)."""
    return json_output(headless("json"))


def test_headless_json(headless, daphne_server, fake_llm):
    done = headless("json")
    result = json_output(done)
    assert result["type"] == "result" and result["subtype"] == "success" and not result["is_error"], result
    assert result["result"] == REPLY, result
    assert result["agent_id"].startswith("agent-") and result["conversation_id"].startswith("conv-"), result
    assert_model_saw_prompt(fake_llm)
    assert_no_failed_requests(daphne_server)


def test_headless_stream_json(headless, daphne_server, fake_llm):
    done = headless("stream-json")
    assert done.returncode == 0 and done.stdout.strip(), f"letta exited {done.returncode}: {done.stderr[-500:]}"
    events = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    init, result = events[0], events[-1]
    assert init["type"] == "system" and init["subtype"] == "init" and init["agent_id"].startswith("agent-"), init
    said = "".join(e["content"] for e in events if e.get("message_type") == "assistant_message")
    assert said == REPLY, events
    assert [e["stop_reason"] for e in events if e.get("message_type") == "stop_reason"] == ["end_turn"], events
    assert result["type"] == "result" and result["subtype"] == "success" and result["result"] == REPLY, result
    assert_model_saw_prompt(fake_llm)
    assert_no_failed_requests(daphne_server)


def test_messages_list(turn, client_env, project, daphne_server):
    # the agent's default thread: the turn went through a conversation, so only the agent's system message is there
    listed = json_output(letta("messages", "list", "--agent", turn["agent_id"], env=client_env, cwd=project))
    assert [m["message_type"] for m in listed] == ["system_message"], brief(listed)
    assert_no_failed_requests(daphne_server)


def test_messages_transcript(turn, client_env, project, daphne_server):
    args = ("messages", "transcript", "--conversation", turn["conversation_id"])
    transcript = json_output(letta(*args, env=client_env, cwd=project))
    assert transcript["conversation_id"] == turn["conversation_id"], transcript
    assert PROMPT in transcript["transcript"] and REPLY in transcript["transcript"], transcript
    assert_no_failed_requests(daphne_server)


def test_messages_search(turn, client_env, project, daphne_server):
    args = ("messages", "search", "--query", "hello", "--agent", turn["agent_id"])
    found = json_output(letta(*args, env=client_env, cwd=project))
    assert any(r["message_type"] == "assistant_message" and r["content"] == REPLY for r in found), found
    assert all(r["agent_id"] == turn["agent_id"] for r in found), found
    assert_no_failed_requests(daphne_server)
