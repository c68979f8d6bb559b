"""Background streams and their resumption (`POST /v1/runs/{id}/stream`) on the embedded default: every event a
background stream sends carries a seq_id; a caller whose connection broke gets, from the last seq_id it saw, the
rest and nothing twice, token chunks included; runs that were not sent in the background cannot be resumed."""

import dataclasses
import json

import pytest
from asgiref.sync import sync_to_async
from django.db import connection

from core.models import Run
from core.runs import executor
from core.runs.request import RunRequest
from core.runs.streaming import sse_events, sse_resume
from tests.factories import ApiClient, make_agent
from tests.fake_llm import FakeLLM

pytestmark = pytest.mark.django_db(transaction=True)
REPLY = "Resumed streams lose nothing and repeat nothing."


def _frames(response) -> list[dict]:
    raw = b"".join(response).decode()
    assert raw.endswith("data: [DONE]\n\n")
    return [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: {")]


@pytest.fixture
def agent(account, fake_llm):
    fake_llm.stream_chunk_chars = 4
    return make_agent(account.org)


def _two_steps(fake_llm, chunk_s: float = 0.0):
    fake_llm.script(
        dataclasses.replace(
            FakeLLM.tool("archival_memory_search", {"query": "cats"}, heartbeat=True, thinking="look"), chunk_s=chunk_s
        ),
        dataclasses.replace(FakeLLM.tool("send_message", {"message": REPLY}), chunk_s=chunk_s),
    )


def test_a_background_stream_numbers_its_events_and_resumes_from_any_of_them(api, agent, fake_llm):
    _two_steps(fake_llm)
    frames = _frames(api.post(f"/v1/agents/{agent.id}/messages/stream", {"input": "hi", "background": True}))
    assert [f["message_type"] for f in frames][-2:] == ["stop_reason", "usage_statistics"]
    seqs = [f["seq_id"] for f in frames]
    assert seqs == sorted(set(seqs)) and seqs[0] >= 1
    run_id = frames[0]["run_id"]
    assert Run.objects.get(pk=run_id).background
    for after in (0, seqs[2], seqs[-1]):
        again = _frames(api.post(f"/v1/runs/{run_id}/stream", {"starting_after": after}))
        assert again == [f for f in frames if f["seq_id"] > after]
    assert _frames(api.post(f"/v1/runs/{run_id}/stream")) == frames  # no body: from the start


def test_a_run_queued_in_the_background_resumes_from_its_stored_messages(api, agent, fake_llm):
    fake_llm.script(FakeLLM.tool("send_message", {"message": REPLY}))
    run = api.post(f"/v1/agents/{agent.id}/messages/async", {"input": "hi"}).json()
    executor.run_wait(run=Run.objects.get(pk=run["id"]))
    frames = _frames(api.post(f"/v1/runs/{run['id']}/stream", {"starting_after": 0}))
    assert [f["message_type"] for f in frames][-3:] == ["assistant_message", "stop_reason", "usage_statistics"]
    assert [f["seq_id"] for f in frames] == list(range(1, len(frames) + 1))
    assert next(f for f in frames if f["message_type"] == "assistant_message")["content"] == REPLY


def test_only_a_background_run_of_ones_own_is_resumed(api, agent, fake_llm, other_account):
    fake_llm.script(FakeLLM.tool("send_message", {"message": REPLY}))
    run_id = api.post(f"/v1/agents/{agent.id}/messages", {"input": "hi"}).json()["run_id"]
    r = api.post(f"/v1/runs/{run_id}/stream", {})
    assert r.status_code == 400
    assert r.json()["detail"] == "INVALID_ARGUMENT: Run was not created in background mode, so it cannot be retrieved."
    assert api.post("/v1/runs/run-missing/stream", {}).status_code == 404
    assert ApiClient(other_account.token).post(f"/v1/runs/{run_id}/stream", {}).status_code == 404
    assert api.post(f"/v1/runs/{run_id}/stream", {"starting_after": -1}).status_code == 422


async def test_a_stream_broken_mid_run_resumes_token_for_token(account, agent, fake_llm):
    _two_steps(fake_llm, chunk_s=0.03)
    run = await sync_to_async(executor.run_submit)(
        RunRequest(
            owner=account.org,
            agent_id=agent.id,
            input_messages=[{"role": "user", "content": "hi"}],
            background=True,
            stream_tokens=True,
        )
    )
    first, last_seq = [], 0
    stream = sse_events(run=run, stream_tokens=True, include_pings=False)
    async for frame in stream:
        event = json.loads(frame.split("data: ", 1)[1])
        first.append(event)
        last_seq = event["seq_id"]
        if event["message_type"] == "assistant_message":
            break  # the connection breaks in the middle of the reply
    await stream.aclose()
    rest = []
    async for frame in sse_resume(run=run, starting_after=last_seq, include_pings=False):
        if frame.startswith("data: {"):
            rest.append(json.loads(frame.split("data: ", 1)[1]))
        else:
            assert frame == "data: [DONE]\n\n"
    seqs = [e["seq_id"] for e in first + rest]
    assert seqs == sorted(set(seqs)) and rest and rest[0]["seq_id"] > last_seq
    answer = [e for e in first + rest if e["message_type"] == "assistant_message"]
    assert all(e.get("delta") for e in answer) and "".join(e["content"] for e in answer) == REPLY
    assert [e["message_type"] for e in rest][-2:] == ["stop_reason", "usage_statistics"]
    assert await sync_to_async(_status_closing)(run.id) == "completed"


def _status_closing(run_id: str) -> str:
    """The run's status, read on the thread this test's sync calls ran on, whose connection is closed after (a
    connection left open there would outlive the test)."""
    try:
        return Run.objects.get(pk=run_id).status
    finally:
        connection.close()
