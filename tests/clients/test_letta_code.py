"""Letta Code (@letta-ai/letta-code, pinned in package-lock.json) run headless against our server, unchanged: a new
agent answering one prompt (the fake model replies with plain text, as a letta_v1_agent does), in both machine
output formats, then its `messages` subcommands; and its client-side tools: a call of one waits, Letta Code runs it
on this machine (or denies it by its permission rules) and answers, and the model reads the result; a call left
waiting by an earlier session is denied when Letta Code resumes the thread. A failure shows what Letta Code printed
and every request the server answered (tests/clients/conftest.py)."""

import dataclasses
import json
import subprocess
import urllib.request
import uuid

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


# --------------------------------------------------------------------------- client-side tools and approvals
# Letta Code sends its local tools as the request's `client_tools`; a call of one stops the run `requires_approval`,
# Letta Code runs the tool on this machine (or denies it by its permission rules) and answers with a message of type
# `approval`, which resumes the turn. For an OpenAI model it picks its codex toolset, whose shell tool is this one.

SHELL = "ShellCommand"
CLOSING = "That is what the file says."


def events_of(done: subprocess.CompletedProcess) -> list[dict]:
    """Letta Code's stream-json output, one event a line."""
    assert done.returncode == 0 and done.stdout.strip(), f"letta exited {done.returncode}: {done.stderr[-500:]}"
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def sends(server) -> list[dict]:
    """The bodies Letta Code posted to a thread's messages endpoint, in order (long strings cut by the log)."""
    return [
        json.loads(e["request_body"])
        for e in server.requests()
        if e["method"] == "POST" and e["path"].split("?")[0].endswith("/messages")
    ]


def tool_results(request: dict) -> list[dict]:
    """The tool results in a chat request the fake model received, as {tool_call_id, content (parsed)}."""
    return [
        {"tool_call_id": m["tool_call_id"], **json.loads(m["content"])}
        for m in request["messages"]
        if m["role"] == "tool"
    ]


def stop_reasons(events: list[dict]) -> list[str]:
    return [e["stop_reason"] for e in events if e.get("message_type") == "stop_reason"]


def shell(project, command: str) -> tuple[str, dict]:
    return (SHELL, {"command": command, "workdir": str(project)})


def test_a_client_tool_runs_in_letta_code_and_its_result_reaches_the_model(
    client_env, project, daphne_server, fake_llm, api
):
    secret = f"secret-{uuid.uuid4().hex}"
    (project / "notes.txt").write_text(secret + "\n")
    # the call streams in chunks some milliseconds apart, as a model's do: a server that got them all at once
    # would send the call in one event, which Letta Code approves without echoing it
    asking = dataclasses.replace(FakeLLM.tool(*shell(project, "cat notes.txt")), chunk_s=0.02)
    fake_llm.script(asking, FakeLLM.text(CLOSING))
    args = ("-p", "What is in notes.txt?", "--new-agent", "-m", MODEL, "--output-format", "stream-json", "--yolo")
    events = events_of(letta(*args, env=client_env, cwd=project))

    assert len(fake_llm.chat_requests) == 2, [r["messages"][-1] for r in fake_llm.chat_requests]
    first, second = fake_llm.chat_requests
    assert SHELL in {t["function"]["name"] for t in first["tools"]}  # offered from the request's client_tools
    posted = sends(daphne_server)
    assert len(posted) == 2, posted
    assert all(SHELL in {t["name"] for t in p["client_tools"]} for p in posted), "client_tools on every send"
    answer = posted[1]["messages"]
    assert [m.get("type") for m in answer] == ["approval"], answer
    (item,) = answer[0]["approvals"]
    assert item["type"] == "tool" and item["status"] == "success" and secret in item["tool_return"], item
    call_id = item["tool_call_id"]

    # the server asked (token chunks of an approval request), Letta Code ran it, the turn went on to its end
    asks = [e for e in events if e.get("message_type") == "approval_request_message"]
    assert asks and {a["tool_call"]["tool_call_id"] for a in asks} == {call_id}, asks
    assert stop_reasons(events) == ["requires_approval", "end_turn"], events
    assert not [e for e in events if e.get("message_type") == "tool_call_message"], "the call ran nowhere on the server"
    # what the model read next is what the command printed on this machine
    (seen,) = [r for r in tool_results(second) if r["tool_call_id"] == call_id]
    assert seen["status"] == "OK" and secret in seen["message"], seen
    result = events[-1]
    assert result["type"] == "result" and result["subtype"] == "success" and result["result"] == CLOSING, result

    # the conversation's history shows the request, the answer and the result as Letta lists them
    history = api.get(f"/v1/conversations/{result['conversation_id']}/messages?order=asc&limit=100").json()
    kinds = [m["message_type"] for m in history]
    assert kinds[-4:] == [
        "approval_request_message",
        "approval_response_message",
        "tool_return_message",
        "assistant_message",
    ], brief(history)
    said = history[-3]
    assert said["approvals"][0]["type"] == "tool" and said["approvals"][0]["tool_call_id"] == call_id, said
    assert history[-2]["tool_call_id"] == call_id and history[-2]["status"] == "success", history[-2]
    assert_no_failed_requests(daphne_server)


def test_two_client_tool_calls_in_one_reply_are_both_run_and_answered_at_once(
    client_env, project, daphne_server, fake_llm
):
    words = [f"first-{uuid.uuid4().hex[:8]}", f"second-{uuid.uuid4().hex[:8]}"]
    for i, word in enumerate(words):
        (project / f"{i}.txt").write_text(word + "\n")
    fake_llm.script(
        FakeLLM.tools(shell(project, "cat 0.txt"), shell(project, "cat 1.txt")),
        FakeLLM.text(CLOSING),
    )
    args = ("-p", "Read both files.", "--new-agent", "-m", MODEL, "--output-format", "stream-json", "--yolo")
    events = events_of(letta(*args, env=client_env, cwd=project))
    assert stop_reasons(events) == ["requires_approval", "end_turn"], events
    (answer,) = sends(daphne_server)[1]["messages"]
    assert [a["type"] for a in answer["approvals"]] == ["tool", "tool"], answer
    assert len(fake_llm.chat_requests) == 2
    calls = [c["id"] for m in fake_llm.chat_requests[-1]["messages"] for c in m.get("tool_calls") or []]
    seen = {r["tool_call_id"]: r for r in tool_results(fake_llm.chat_requests[-1])}
    assert len(calls) == 2 and set(seen) == set(calls), (calls, seen)
    for call_id, word in zip(calls, words, strict=True):  # one result per call, each the output of its own command
        assert seen[call_id]["status"] == "OK" and word in seen[call_id]["message"], seen
    assert events[-1]["result"] == CLOSING, events[-1]
    assert_no_failed_requests(daphne_server)


def test_a_tool_letta_code_may_not_run_is_denied_and_the_model_reads_why(client_env, project, daphne_server, fake_llm):
    secret = f"secret-{uuid.uuid4().hex}"
    (project / "notes.txt").write_text(secret + "\n")
    fake_llm.script(FakeLLM.tool(*shell(project, "cat notes.txt")), FakeLLM.text("I may not read it."))
    args = ("-p", "What is in notes.txt?", "--new-agent", "-m", MODEL, "--output-format", "json")
    result = json_output(letta(*args, "--disallowedTools", SHELL, env=client_env, cwd=project))
    assert result["subtype"] == "success" and result["result"] == "I may not read it.", result
    (answer,) = sends(daphne_server)[1]["messages"]
    (item,) = answer["approvals"]
    assert item["type"] == "approval" and item["approve"] is False and item["reason"], item
    (seen,) = tool_results(fake_llm.chat_requests[-1])
    assert seen["tool_call_id"] == item["tool_call_id"] and seen["status"] == "Failed", seen
    assert seen["message"] == f"Error: request to call tool denied. User reason: {item['reason']}", seen
    assert secret not in json.dumps(fake_llm.chat_requests[-1]), "the denied command ran"
    assert_no_failed_requests(daphne_server)


def live_post(server, token: str, path: str, body: dict) -> dict:
    """POST JSON to the live server (what a client other than Letta Code would send)."""
    request = urllib.request.Request(
        server.url + path,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


@pytest.mark.parametrize("thread", ["conversation", "default"])
def test_an_approval_left_waiting_is_denied_when_letta_code_resumes_the_thread(
    thread, turn, client_env, project, daphne_server, fake_llm, account, api
):
    """A session that ended while a call waited (here: another client's send with Letta Code's tool): resuming the
    thread, Letta Code finds the waiting call (a conversation's last in-context message; the agent's default
    thread's newest messages) and sends its denial together with the new prompt, in one request."""
    if thread == "conversation":
        where, resume = (
            f"/v1/conversations/{turn['conversation_id']}/messages",
            ("--conversation", turn["conversation_id"]),
        )
    else:
        where, resume = (
            f"/v1/agents/{turn['agent_id']}/messages",
            ("--agent", turn["agent_id"], "--conversation", "default"),
        )
    shell_tool = {"name": SHELL, "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}
    fake_llm.script(FakeLLM.tool(SHELL, {"command": "rm -rf build"}))
    body = {"messages": [{"role": "user", "content": "clean up"}], "streaming": False, "client_tools": [shell_tool]}
    paused = live_post(daphne_server, account.token, where, body)
    assert paused["stop_reason"]["stop_reason"] == "requires_approval", paused
    (ask,) = [m for m in paused["messages"] if m["message_type"] == "approval_request_message"]
    call_id = ask["tool_call"]["tool_call_id"]

    fake_llm.script(FakeLLM.text("Understood, nothing was deleted."))
    asked = len(fake_llm.chat_requests)
    events = events_of(letta("-p", "What now?", *resume, "--output-format", "stream-json", env=client_env, cwd=project))
    assert events[-1]["subtype"] == "success" and events[-1]["result"] == "Understood, nothing was deleted.", events
    answer = sends(daphne_server)[-1]["messages"]
    assert [m.get("type", "message") for m in answer] == ["approval", "message"], answer
    (denial,) = answer[0]["approvals"]
    assert denial == {"type": "approval", "tool_call_id": call_id, "approve": False, "reason": denial["reason"]}
    # one model call: it reads the denial, then the new prompt
    assert len(fake_llm.chat_requests) == asked + 1
    messages = fake_llm.chat_requests[-1]["messages"]
    at = next(i for i, m in enumerate(messages) if m["role"] == "tool" and m["tool_call_id"] == call_id)
    assert (
        json.loads(messages[at]["content"])["message"]
        == f"Error: request to call tool denied. User reason: {denial['reason']}"
    )
    assert "What now?" in json.dumps(messages[at + 1 :]), messages[at + 1 :]
    assert api.get(f"/v1/runs/{paused['run_id']}").json()["waiting"] is None
    assert_no_failed_requests(daphne_server)
