"""Conversations (Letta's `/v1/conversations`): another thread of an agent with its own in-context list over the
agent's shared memory, the `default` conversation as the agent's own thread, and each message and run knowing its
thread. Through the API with the fake model."""

import json
import re

import pytest

from core.models import Agent, Conversation, Message, Run
from tests.factories import ApiClient, make_account, make_agent
from tests.fake_llm import FakeLLM

pytestmark = pytest.mark.django_db(transaction=True)

CONV_ID = re.compile(r"^conv-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


@pytest.fixture
def agent(account, fake_llm):
    return make_agent(account.org)


def _create(api, agent, body=None):
    r = api.post(f"/v1/conversations/?agent_id={agent.id}", body or {"isolated_block_labels": []})
    assert r.status_code == 200, r.content
    return r.json()


def _say(api, thread, text, **extra):
    body = {"messages": [{"type": "message", "role": "user", "content": [{"type": "text", "text": text}]}]}
    return api.post(f"/v1/conversations/{thread}/messages", {**body, "streaming": False, **extra})


def _sse(resp) -> list[dict]:
    text = b"".join(resp).decode()  # consumes the async stream (WSGI-style)
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]


def test_a_conversation_is_created_as_letta_shapes_it(api, agent):
    c = _create(api, agent, {"summary": "planning", "isolated_block_labels": []})
    assert CONV_ID.match(c["id"]) and c["agent_id"] == agent.id and c["summary"] == "planning"
    assert c["in_context_message_ids"] == []  # filled only when one conversation is retrieved
    got = api.get(f"/v1/conversations/{c['id']}").json()
    assert len(got["in_context_message_ids"]) == 1
    system = Message.objects.get(pk=got["in_context_message_ids"][0])
    assert system.role == "system" and system.conversation_id == c["id"]


def test_a_conversation_has_its_own_window_and_the_agents_own_is_untouched(api, agent, fake_llm):
    before = list(Agent.objects.get(pk=agent.pk).message_ids)
    c = _create(api, agent)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "In the thread."}))
    r = _say(api, c["id"], "hello thread")
    assert r.status_code == 200, r.content
    reply = [m for m in r.json()["messages"] if m["message_type"] == "assistant_message"]
    assert reply[0]["content"] == "In the thread."
    assert Agent.objects.get(pk=agent.pk).message_ids == before
    window = api.get(f"/v1/conversations/{c['id']}").json()["in_context_message_ids"]
    assert len(window) > 1
    written = Message.objects.filter(pk__in=window[1:])
    assert {m.conversation_id for m in written} == {c["id"]}
    assert Run.objects.get(pk=r.json()["run_id"]).conversation_id == c["id"]
    # the model saw the conversation's messages only: the agent's own initial messages are not in its request
    sent = fake_llm.chat_requests[-1]["messages"]
    assert sent[-1]["content"] == "hello thread"


def test_two_conversations_do_not_see_each_others_messages(api, agent, fake_llm):
    a, b = _create(api, agent), _create(api, agent)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "ok"}), FakeLLM.tool("send_message", {"message": "ok"}))
    assert _say(api, a["id"], "secret of A").status_code == 200
    assert _say(api, b["id"], "question in B").status_code == 200
    seen_by_b = json.dumps(fake_llm.chat_requests[-1]["messages"])
    assert "secret of A" not in seen_by_b and "question in B" in seen_by_b
    listed_b = api.get(f"/v1/conversations/{b['id']}/messages").json()
    assert "secret of A" not in json.dumps(listed_b) and "question in B" in json.dumps(listed_b)


def test_the_default_conversation_is_the_agents_own_thread(api, agent, fake_llm):
    c = _create(api, agent)
    fake_llm.script(
        FakeLLM.tool("send_message", {"message": "in c"}), FakeLLM.tool("send_message", {"message": "direct"})
    )
    _say(api, c["id"], "to the conversation")
    resp = api.post(
        "/v1/conversations/default/messages",
        {"agent_id": agent.id, "messages": [{"role": "user", "content": "to the agent"}], "stream_tokens": False},
    )
    assert resp.status_code == 200 and resp["Content-Type"].startswith("text/event-stream")
    events = _sse(resp)
    assert any(e.get("message_type") == "assistant_message" and e.get("content") == "direct" for e in events)
    assert events[-2]["message_type"] in ("stop_reason", "usage_statistics")
    agent_window = Agent.objects.get(pk=agent.pk).message_ids
    assert Message.objects.filter(pk__in=agent_window, text__contains="to the agent").exists()
    assert not Message.objects.filter(pk__in=agent_window, conversation__isnull=False).exists()
    default = api.get(f"/v1/conversations/default/messages?agent_id={agent.id}").json()
    assert "to the agent" in json.dumps(default) and "to the conversation" not in json.dumps(default)
    deprecated = api.get(f"/v1/conversations/{agent.id}/messages").json()
    assert deprecated == default
    assert api.get("/v1/conversations/default/messages").status_code == 404  # default needs the agent


def test_list_filters_orders_and_pages(api, agent, account):
    other_agent = make_agent(account.org, name="other")
    ids = [_create(api, agent, {"summary": f"topic {i}"})["id"] for i in range(3)]
    _create(api, other_agent)
    listed = api.get(f"/v1/conversations/?agent_id={agent.id}").json()
    assert [c["id"] for c in listed] == ids[::-1]
    assert [c["id"] for c in api.get(f"/v1/conversations/?agent_id={agent.id}&order=asc&limit=2").json()] == ids[:2]
    after = api.get(f"/v1/conversations/?agent_id={agent.id}&order=asc&after={ids[0]}").json()
    assert [c["id"] for c in after] == ids[1:]
    before = api.get(f"/v1/conversations/?agent_id={agent.id}&order=asc&before={ids[2]}&limit=1").json()
    assert [c["id"] for c in before] == [ids[1]]  # the page nearest the cursor, as every list's `before`
    assert [c["summary"] for c in api.get("/v1/conversations/?summary_search=topic 1").json()] == ["topic 1"]
    assert len(api.get("/v1/conversations/").json()) == 4
    by_message = api.get(f"/v1/conversations/?agent_id={agent.id}&order_by=last_message_at").json()
    assert len(by_message) == 3


def test_update_fork_cancel_and_delete(api, agent, fake_llm):
    c = _create(api, agent)
    updated = api.patch(f"/v1/conversations/{c['id']}", {"summary": "renamed", "model": "openai/fake-model"}).json()
    assert updated["summary"] == "renamed" and updated["model"] == "openai/fake-model"
    bad = api.patch(f"/v1/conversations/{c['id']}", {"model": "no-slash"})
    assert bad.status_code in (400, 422) and "provider/model" in bad.json()["detail"]
    fake_llm.script(FakeLLM.tool("send_message", {"message": "ok"}))
    _say(api, c["id"], "remember this line")
    fork = api.post(f"/v1/conversations/{c['id']}/fork").json()
    source_window = api.get(f"/v1/conversations/{c['id']}").json()["in_context_message_ids"]
    fork_window = api.get(f"/v1/conversations/{fork['id']}").json()["in_context_message_ids"]
    assert fork_window[1:] == source_window[1:] and fork_window[0] != source_window[0]
    idle = api.post(f"/v1/conversations/{c['id']}/cancel")
    assert idle.status_code == 409 and "No active runs to cancel" in idle.json()["detail"]
    assert api.delete(f"/v1/conversations/{c['id']}").status_code == 200
    assert api.get(f"/v1/conversations/{c['id']}").status_code == 404
    assert Conversation.objects.filter(pk=c["id"], deleted=True).exists()
    assert Message.objects.filter(conversation_id=c["id"]).exists()  # recall keeps them


def test_bad_ids_bodies_and_other_tenants(api, agent):
    assert api.get("/v1/conversations/not-a-conversation").status_code == 422
    assert api.post("/v1/conversations/xyz/messages", {"input": "hi"}).status_code == 422
    assert api.post("/v1/conversations/?agent_id=agent-00000000-0000-4000-8000-000000000000", {}).status_code == 404
    unknown_label = api.post(f"/v1/conversations/?agent_id={agent.id}", {"isolated_block_labels": ["nope"]})
    assert (
        unknown_label.status_code in (400, 422)
        and "Block with label 'nope' not found" in unknown_label.json()["detail"]
    )
    c = _create(api, agent)
    assert _say(api, c["id"], "").status_code in (400, 422)
    other = ApiClient(make_account("mallory").token)
    assert other.get(f"/v1/conversations/{c['id']}").status_code == 404
    assert other.post(f"/v1/conversations/{c['id']}/messages", {"input": "hi"}).status_code == 404
    assert other.get(f"/v1/conversations/?agent_id={agent.id}").json() == []
    assert other.post("/v1/conversations/default/messages", {"agent_id": agent.id, "input": "x"}).status_code == 404


def test_compact_and_recompile_a_conversation(api, agent, fake_llm):
    c = _create(api, agent)
    for i in range(3):
        fake_llm.script(FakeLLM.tool("send_message", {"message": f"answer {i}"}))
        assert _say(api, c["id"], f"question {i}").status_code == 200
    own_before = list(Agent.objects.get(pk=agent.pk).message_ids)
    before = len(api.get(f"/v1/conversations/{c['id']}").json()["in_context_message_ids"])
    fake_llm.script(FakeLLM.text("They asked three questions and got three answers."))
    r = api.post(f"/v1/conversations/{c['id']}/compact", {"compaction_settings": {"mode": "all"}})
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["summary"] and body["num_messages_before"] == before > body["num_messages_after"]
    window = api.get(f"/v1/conversations/{c['id']}").json()["in_context_message_ids"]
    assert len(window) == body["num_messages_after"]
    assert Message.objects.get(pk=window[1]).kind == "summary"
    assert list(Agent.objects.get(pk=agent.pk).message_ids) == own_before  # the agent's own thread is untouched
    prompt = api.post(f"/v1/conversations/{c['id']}/recompile", {})
    assert prompt.status_code == 200 and isinstance(prompt.json(), str) and agent.system[:40] in prompt.json()
    default = api.post("/v1/conversations/default/recompile", {"agent_id": agent.id})
    assert default.status_code == 200 and isinstance(default.json(), str)


def test_resuming_a_threads_stream(api, agent, fake_llm):
    c = _create(api, agent)
    none = api.post(f"/v1/conversations/{c['id']}/stream", {})
    assert none.status_code == 400 and "No active runs found" in none.json()["detail"]
    fake_llm.script(FakeLLM.tool("send_message", {"message": "background reply"}))
    body = {"messages": [{"role": "user", "content": "hi", "otid": "otid-123"}], "background": True}
    sent = api.post(f"/v1/conversations/{c['id']}/messages", body)
    events = _sse(sent)
    assert any(e.get("content") == "background reply" for e in events)
    run_id = next(e["run_id"] for e in events if e.get("run_id"))
    again = api.post(f"/v1/conversations/{c['id']}/stream", {"otid": "otid-123", "starting_after": 0})
    replayed = _sse(again)
    assert any(e.get("content") == "background reply" for e in replayed)
    by_run = api.post(f"/v1/conversations/{c['id']}/stream", {"run_id": run_id})
    assert by_run.status_code == 200
    missing = api.post(f"/v1/conversations/{c['id']}/stream", {"otid": "never-sent"})
    assert missing.status_code == 404 and "No run found for otid=never-sent" in missing.json()["detail"]


def test_runs_name_their_conversation_and_filter_by_it(api, agent, fake_llm):
    c = _create(api, agent)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "a"}), FakeLLM.tool("send_message", {"message": "b"}))
    in_thread = _say(api, c["id"], "one").json()["run_id"]
    own = api.post(f"/v1/agents/{agent.id}/messages", {"input": "two"}).json()["run_id"]
    assert api.get(f"/v1/runs/{in_thread}").json()["conversation_id"] == c["id"]
    assert api.get(f"/v1/runs/{own}").json()["conversation_id"] is None
    assert [r["id"] for r in api.get(f"/v1/runs/?conversation_id={c['id']}").json()] == [in_thread]
    assert [r["id"] for r in api.get("/v1/runs/?conversation_id=default").json()] == [own]
