"""The official letta-client SDK over real HTTP on a step's feedback, metrics, provider trace and messages and a run's
trace (Letta's routers/v1/steps.py and runs.py), another account's ids answering 404; and the IDE's step view
setting and showing the same feedback."""

import letta_client
import pytest
from letta_client import Letta

from core.models import Step
from tests.fake_llm import FakeLLM

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def client(live_server, account, fake_llm):
    return Letta(base_url=live_server.url, api_key=account.token, max_retries=0, timeout=60)


@pytest.fixture
def turn(client, fake_llm):
    """A run of two steps: a tool call, then the reply."""
    agent = client.agents.create(name="steps", model="openai/fake-model", agent_type="memgpt_v2_agent")
    fake_llm.script(
        FakeLLM.tool("conversation_search", {"query": "boats"}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "Nothing about boats yet"}),
    )
    response = client.agents.messages.create(agent.id, messages=[{"role": "user", "content": "boats?"}])
    steps = list(client.runs.steps.list(response.run_id))
    assert len(steps) == 2
    return agent, response.run_id, steps


def test_feedback_is_stored_on_the_step_and_filters_the_list(client, turn):
    agent, _, (first, second) = turn
    step = client.steps.feedback.create(first.id, feedback="negative", tags=["wrong-tool"])
    assert step.feedback == "negative" and step.tags == ["wrong-tool"]
    assert client.steps.retrieve(first.id).feedback == "negative"
    client.steps.feedback.create(second.id, feedback="positive", extra_body={"comment": "good answer"})
    assert Step.objects.get(pk=second.id).feedback_comment == "good answer"
    assert [s.id for s in client.steps.list(feedback="negative")] == [first.id]
    assert {s.id for s in client.steps.list(has_feedback=True)} == {first.id, second.id}
    cleared = client.steps.feedback.create(first.id, feedback=None)
    assert cleared.feedback is None and cleared.tags == ["wrong-tool"]  # Letta: empty tags leave them
    assert [s.id for s in client.steps.list(has_feedback=False)] == [first.id]
    with pytest.raises(letta_client.UnprocessableEntityError):
        client.steps.feedback.create(first.id, feedback="meh")


def test_metrics_trace_and_messages_of_a_step(client, turn):
    agent, run_id, (first, second) = turn
    metrics = client.steps.metrics.retrieve(first.id)
    assert metrics.id == first.id and metrics.run_id == run_id and metrics.agent_id == agent.id
    assert metrics.step_ns >= metrics.llm_request_ns > 0 and metrics.step_start_ns > 1_600_000_000 * 10**9
    trace = client.steps.trace.retrieve(first.id)
    assert trace.step_id == first.id and trace.call_type == "agent_step" and trace.run_id == run_id
    assert trace.request_json["messages"][-1]["role"] == "user" and trace.response_json
    first_messages = list(client.steps.messages.list(first.id))
    assert [m.message_type for m in first_messages] == ["user_message", "tool_call_message", "tool_return_message"]
    replies = list(client.steps.messages.list(second.id))
    assert any(m.message_type == "assistant_message" and m.content == "Nothing about boats yet" for m in replies)
    newest = client.steps.messages.list(first.id, order="desc", limit=1).items
    assert [m.message_type for m in newest] == ["tool_return_message"]


def test_a_runs_trace(client, turn):
    _, run_id, (first, second) = turn
    spans = client.runs.trace.retrieve(run_id)
    names = [s["SpanName"] for s in spans]
    assert names[0] == "run" and names.count("agent_step") == 2 and "ToolExecutionManager._execute_tool" in names
    root = spans[0]
    assert root["ParentSpanId"] == "" and {s["TraceId"] for s in spans} == {root["TraceId"]}
    steps = [s for s in spans if s["SpanName"] == "agent_step"]
    assert [s["SpanAttributes"]["step_id"] for s in steps] == [first.id, second.id]
    assert all(s["ParentSpanId"] == root["SpanId"] for s in steps)
    tool = next(s for s in spans if s["SpanName"].endswith("._execute_tool"))
    assert tool["SpanAttributes"]["tool_name"] == "conversation_search" and tool["ParentSpanId"] == steps[0]["SpanId"]
    assert len(client.runs.trace.retrieve(run_id, limit=1)) == 1


def test_another_accounts_steps_and_runs_are_not_found(live_server, other_account, turn):
    _, run_id, (first, _) = turn
    other = Letta(base_url=live_server.url, api_key=other_account.token, max_retries=0)
    for call in (
        lambda: other.steps.feedback.create(first.id, feedback="positive"),
        lambda: other.steps.metrics.retrieve(first.id),
        lambda: other.steps.trace.retrieve(first.id),
        lambda: list(other.steps.messages.list(first.id)),
        lambda: other.runs.trace.retrieve(run_id),
    ):
        with pytest.raises(letta_client.NotFoundError):
            call()
    assert Step.objects.get(pk=first.id).feedback == ""


def test_the_step_view_sets_and_shows_feedback(web, turn, other_account):
    agent, _, (first, _) = turn
    url = f"/agents/{agent.id}/steps/{first.id}/feedback/"
    form = web.post(url, {"feedback": "positive", "comment": "right tool"}).content.decode()
    assert 'aria-label="Thumbs up"' in form and "Saved" in form
    step = Step.objects.get(pk=first.id)
    assert (step.feedback, step.feedback_comment) == ("positive", "right tool")
    view = web.get(f"/agents/{agent.id}/steps/{first.id}/").content.decode()
    assert 'id="step-feedback"' in view and "right tool</textarea>" in view
    assert 'value="positive" class="small" aria-pressed="true"' in view
    web.post(url, {"feedback": "", "comment": "right tool"})
    assert Step.objects.get(pk=first.id).feedback == ""
    assert web.post(url, {"feedback": "maybe"}).content.decode().count('role="alert"') == 1
    from django.test import Client

    mallory = Client()
    mallory.force_login(other_account.user)
    assert mallory.post(url, {"feedback": "negative"}).status_code == 404
