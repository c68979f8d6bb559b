"""letta-client 1.x against the live server: what a send returns, hidden returns before paging, unknown cursors,
`order_by`, and every parameter the SDK's list methods send (Letta's behaviour, from letta-streaming-and-agent-types
§2-§4)."""

import json

import letta_client
import pytest
from letta_client import Letta

from tests.fake_llm import FakeLLM
from tests.helpers import until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def client(live_server, account, fake_llm):
    return Letta(base_url=live_server.url, api_key=account.token, max_retries=0, timeout=60)


def _agent(client, name: str = "lister", **kwargs):
    kwargs.setdefault("agent_type", "memgpt_v2_agent")  # send_message and heartbeats
    return client.agents.create(
        name=name,
        model="openai/fake-model",
        context_window_limit=16000,
        memory_blocks=[{"label": "human", "value": "Name: Alice"}],
        **kwargs,
    )


def _chained_turn(fake_llm):
    """A tool that asks for a heartbeat, then send_message: the run stores input, call, return, heartbeat, reply,
    and send_message's return."""
    fake_llm.script(
        FakeLLM.tool("core_memory_append", {"label": "human", "content": "Likes tea."}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "noted"}),
    )


def _is_heartbeat(message) -> bool:
    try:
        return json.loads(message.content).get("type") == "heartbeat"
    except (TypeError, ValueError, AttributeError):
        return False


# --------------------------------------------------------------------------- what a send returns


def test_send_returns_no_user_role_messages_while_the_lists_show_heartbeats(client, fake_llm):
    agent = _agent(client)
    _chained_turn(fake_llm)
    reply = client.agents.messages.create(agent.id, messages=[{"role": "user", "content": "I like tea"}])
    types = [m.message_type for m in reply.messages]
    assert "user_message" not in types  # neither the input nor the heartbeat
    assert types[-1] == "assistant_message" and reply.messages[-1].content == "noted"
    assert types.count("tool_return_message") == 1  # core_memory_append's; send_message's is hidden
    run_id = reply.messages[0].run_id
    history = list(client.agents.messages.list(agent.id, order="asc"))
    assert any(_is_heartbeat(m) for m in history if m.message_type == "user_message")
    run_listed = list(client.runs.messages.list(run_id))
    assert [m.message_type for m in run_listed if m.message_type == "user_message"] == ["user_message"] * 2
    assert sum(m.message_type == "tool_return_message" for m in run_listed) == 1


def test_a_stream_sends_no_user_role_messages(client, fake_llm):
    agent = _agent(client)
    _chained_turn(fake_llm)
    chunks = list(client.agents.messages.stream(agent.id, messages=[{"role": "user", "content": "I like tea"}]))
    types = [c.message_type for c in chunks]
    assert "user_message" not in types and "assistant_message" in types
    assert types[-2:] == ["stop_reason", "usage_statistics"]


def test_a_runs_message_list_keeps_to_the_types_its_send_asked_for(client, fake_llm):
    """Letta's run_manager.get_run_messages filters by the run's request_config.include_return_message_types."""
    agent = _agent(client, reasoning=True)  # the memgpt model reasons in a `thinking` argument
    _chained_turn(fake_llm)
    wanted = ["reasoning_message", "tool_call_message"]
    run = client.agents.messages.create_async(
        agent.id, messages=[{"role": "user", "content": "I like tea"}], include_return_message_types=wanted
    )
    until(lambda: client.runs.retrieve(run.id).status == "completed", what="the run to complete")
    assert client.runs.retrieve(run.id).request_config.include_return_message_types == wanted
    listed = [m.message_type for m in client.runs.messages.list(run.id)]
    assert set(listed) == set(wanted) and listed.count("tool_call_message") == 1  # send_message is the reply
    fake_llm.script(FakeLLM.tool("send_message", {"message": "all of it"}))
    plain = client.agents.messages.create_async(agent.id, messages=[{"role": "user", "content": "again"}])
    until(lambda: client.runs.retrieve(plain.id).status == "completed", what="the run to complete")
    assert {"user_message", "assistant_message"} <= {m.message_type for m in client.runs.messages.list(plain.id)}


# --------------------------------------------------------------------------- hidden returns before paging


def test_hidden_send_message_returns_never_shorten_a_page(client, fake_llm):
    agent = _agent(client)
    _chained_turn(fake_llm)
    run_id = (
        client.agents.messages.create(agent.id, messages=[{"role": "user", "content": "I like tea"}]).messages[0].run_id
    )
    # The newest row is send_message's hidden return: a page of one must still hold the reply.
    # (One stored row: its reasoning, then the reply.)
    newest = client.runs.messages.list(run_id, order="desc", limit=1).items  # its parts last first, as Letta's
    assert (newest[0].message_type, newest[0].content) == ("assistant_message", "noted")
    assert client.agents.messages.list(agent.id, limit=1).items[-1].message_type == "assistant_message"
    everything = [(m.id, m.message_type) for m in client.runs.messages.list(run_id)]
    rows = list(dict.fromkeys(i for i, _ in everything))  # one stored row may list as reasoning + tool call
    newest_first = [m.id for m in client.runs.messages.list(run_id, order="desc", limit=1)]
    assert list(dict.fromkeys(newest_first)) == rows[::-1]
    assert [(m.id, m.message_type) for m in client.runs.messages.list(run_id, limit=1)] == everything
    shown = [(m.id, m.message_type) for m in client.agents.messages.list(agent.id, order="asc")]
    assert [(m.id, m.message_type) for m in client.agents.messages.list(agent.id, order="asc", limit=1)] == shown
    assert "tool_return_message" in {t for _, t in shown}  # core_memory_append's return still lists


# --------------------------------------------------------------------------- unknown cursors


UNKNOWN = "message-00000000-0000-4000-8000-000000000000"


def test_unknown_cursors_are_404_on_every_list(client, fake_llm):
    agent = _agent(client)
    block = client.blocks.create(label="notes", value="x")
    client.agents.blocks.attach(block.id, agent_id=agent.id)
    _chained_turn(fake_llm)
    run_id = client.agents.messages.create(agent.id, input="hi").messages[0].run_id
    lists = [
        client.agents.list,
        client.blocks.list,
        client.tools.list,
        client.runs.list,
        lambda **kw: client.agents.messages.list(agent.id, **kw),
        lambda **kw: client.agents.blocks.list(agent.id, **kw),
        lambda **kw: client.agents.tools.list(agent.id, **kw),
        lambda **kw: client.agents.passages.list(agent.id, **kw),
        lambda **kw: client.blocks.agents.list(block.id, **kw),
        lambda **kw: client.runs.messages.list(run_id, **kw),
        lambda **kw: client.runs.steps.list(run_id, **kw),
    ]
    for list_method in lists:
        for cursor in ("after", "before"):
            with pytest.raises(letta_client.NotFoundError) as caught:
                list_method(**{cursor: UNKNOWN})
            assert "cursor" in caught.value.body["detail"]


def test_another_owners_ids_are_unknown_cursors(client, live_server, other_account, fake_llm):
    theirs = Letta(base_url=live_server.url, api_key=other_account.token, max_retries=0, timeout=60)
    their_agent = _agent(theirs, name="theirs")
    their_block = theirs.blocks.create(label="secret", value="x")
    _agent(client, name="mine")
    client.blocks.create(label="mine", value="y")
    with pytest.raises(letta_client.NotFoundError):
        client.agents.list(after=their_agent.id)
    with pytest.raises(letta_client.NotFoundError):
        client.blocks.list(before=their_block.id)


# --------------------------------------------------------------------------- order_by


def test_agents_order_by_updated_at_and_last_run_completion(client, fake_llm):
    a, b, c = (_agent(client, name=n) for n in ("a", "b", "c"))
    client.agents.update(a.id, description="touched")
    assert [x.id for x in client.agents.list()] == [c.id, b.id, a.id]
    assert [x.id for x in client.agents.list(order_by="updated_at", limit=1)] == [a.id, c.id, b.id]
    assert [x.id for x in client.agents.list(order_by="updated_at", order="asc", limit=2)] == [b.id, c.id, a.id]
    assert [x.id for x in client.agents.list(ascending=True)] == [a.id, b.id, c.id]
    fake_llm.script(FakeLLM.tool("send_message", {"message": "hi"}))
    client.agents.messages.create(b.id, input="hello")
    ran_first = [x.id for x in client.agents.list(order_by="last_run_completion", limit=1)]
    assert ran_first[0] == b.id and sorted(ran_first) == sorted([a.id, b.id, c.id])
    assert [x.id for x in client.agents.list(last_stop_reason="end_turn")] == [b.id]
    with pytest.raises(letta_client.UnprocessableEntityError):
        client.agents.list(order_by="name")


def test_agent_messages_order_by_created_at_only(client, fake_llm):
    agent = _agent(client)
    assert client.agents.messages.list(agent.id, order_by="created_at").items
    with pytest.raises(letta_client.UnprocessableEntityError):
        client.agents.messages.list(agent.id, order_by="seq")


# --------------------------------------------------------------------------- every parameter the SDK sends


def test_every_list_parameter_the_sdk_sends_is_accepted(client, fake_llm):
    agent = _agent(client)
    block = client.blocks.create(label="notes", value="x")
    client.agents.blocks.attach(block.id, agent_id=agent.id)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "hi"}))
    run_id = client.agents.messages.create(agent.id, input="hi").messages[0].run_id
    page = {"limit": 10, "order": "asc", "order_by": "created_at"}
    listed = client.agents.list(
        **{**page, "order": "desc"},
        ascending=False,
        base_template_id="base-template-x",
        created_by_id="user-x",
        include=["agent.tags", "agent.blocks"],
        include_relationships=["tools"],
        last_stop_reason="end_turn",
        match_all_tags=False,
        name="lister",
        project_id="project-x",
        query_text="list",
        sort_by="created_at",
        template_id="template-x",
    )
    assert [a.id for a in listed] == [agent.id]
    messages = client.agents.messages.list(
        agent.id,
        **page,
        assistant_message_tool_kwarg="message",
        assistant_message_tool_name="send_message",
        conversation_id="default",  # the agent's own thread: every message here
        group_id="group-x",
        include_err=True,
        include_return_message_types=["assistant_message"],
        use_assistant_message=True,
    )
    assert [m.content for m in messages][-1] == "hi"
    assert [b.id for b in client.agents.blocks.list(agent.id, **page) if b.id == block.id] == [block.id]
    assert {t.name for t in client.agents.tools.list(agent.id, **page)} >= {"send_message"}
    assert client.agents.passages.list(agent.id, ascending=True, limit=10, search="nothing") == []
    blocks = client.blocks.list(
        **page,
        connected_to_agents_count_gt=0,
        description_search="",
        identifier_keys=["key"],
        identity_id="identity-x",
        label="notes",
        label_search="not",
        match_all_tags=False,
        name="notes",
        project_id="project-x",
        tags=["t"],
        templates_only=False,
        value_search="x",
    )
    assert [b.id for b in blocks] == [block.id]
    assert [a.id for a in client.blocks.agents.list(block.id, **page, include=["agent.tags"])] == [agent.id]
    send_message = next(t for t in client.tools.list(name="send_message"))
    tools = client.tools.list(
        **page,
        exclude_tool_types=["custom"],
        names=["send_message", "memory_insert"],
        return_only_letta_tools=True,
        search="send",
        tool_ids=[send_message.id],
        tool_types=["letta_core"],
    )
    assert [t.id for t in tools] == [send_message.id]
    runs = client.runs.list(
        **page,
        active=False,
        agent_id=agent.id,
        agent_ids=[agent.id],
        ascending=True,
        background=False,
        conversation_id="default",  # the agent's own thread: its runs
        statuses=["completed"],
        stop_reason="end_turn",
    )
    assert [r.id for r in runs] == [run_id]
    assert [m.message_type for m in client.runs.messages.list(run_id, **page)][-1] == "assistant_message"
    assert len(client.runs.steps.list(run_id, **page).items) == 1
