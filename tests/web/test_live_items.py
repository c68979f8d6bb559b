"""The conversation has one renderer: the IDE's socket carries each item's HTML from the template the history uses
(templates/core/_item.html), so an item arriving live is the item a reload shows; the API's sockets carry Letta's
events unchanged."""

import re

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from agents_ide.routing import websocket_urlpatterns
from tests.factories import make_agent
from tests.fake_llm import FakeLLM
from tests.helpers import agent_socket, events_until

pytestmark = pytest.mark.django_db(transaction=True)
APP = URLRouter(websocket_urlpatterns)


async def _ide_socket(user, agent_id):
    comm = WebsocketCommunicator(APP, f"/ws/agents/{agent_id}/?batch=1")
    comm.scope["user"] = user
    assert (await comm.connect())[0]
    return comm


async def _run(comm) -> list[dict]:
    events, last = [], {}
    while (last.get("message_type"), last.get("status")) != ("run_status", "completed"):
        frame = await comm.receive_json_from(timeout=20)
        events.extend(frame)
        last = frame[-1]
    return events


def _unnumbered(html: str) -> str:
    """An item with its step chip's number taken out: the history numbers a step within its conversation, while a
    live item leaves the number to the page, which takes it from Past steps (tests/e2e/test_run_view.py)."""
    return re.sub(r'(class="step-chip"[^>]*>step) \d+</button>', r"\1</button>", html)


def _history_items(web, agent_id) -> dict[tuple[str, str], str]:
    """The history's items by (type, id), as a reload draws them."""
    html = web.get(f"/agents/{agent_id}/history/?before=100000").content.decode()
    starts = [m.start() for m in re.finditer(r'<div class="msg ', html)]
    items = {}
    for start, end in zip(starts, starts[1:] + [len(html)], strict=True):
        chunk = html[start:end].strip()
        chunk = chunk[: chunk.rindex("</div>") + 6]
        key = (re.search(r'data-type="([^"]+)"', chunk).group(1), re.search(r'data-id="([^"]+)"', chunk).group(1))
        items[key] = chunk
    return items


async def test_the_ide_socket_carries_each_item_as_the_history_draws_it(account, web, fake_llm):
    agent = await database_sync_to_async(make_agent)(account.org)
    fake_llm.stream_chunk_chars = 3
    fake_llm.script(
        FakeLLM.tool("conversation_search", {"query": "<script>x</script>"}, thinking="let <me> see", heartbeat=True),
        FakeLLM.tool("send_message", {"message": "done <b>bold</b>"}),
    )
    ide = await _ide_socket(account.user, agent.id)
    api = await agent_socket(account.user, agent.id)
    await ide.send_json_to({"type": "user_message", "text": "hi <i>there</i>", "otid": "otid-1"})
    events = await _run(ide)
    plain = await events_until(api, "run_status")
    assert not any("html" in e for e in plain)  # Letta's wire is unchanged

    whole = [e for e in events if not e.get("delta") and "html" in e]
    types = {e["message_type"] for e in whole}
    assert {"user_message", "reasoning_message", "tool_call_message", "assistant_message", "stop_reason"} <= types
    history = await database_sync_to_async(_history_items)(web, agent.id)
    compared = 0
    for e in whole:
        if e.get("id") and (e["message_type"], e["id"]) in history:
            assert e["html"] == _unnumbered(history[(e["message_type"], e["id"])]), e["message_type"]
            compared += 1
    assert compared >= 4
    said = next(e["html"] for e in whole if e["message_type"] == "user_message")
    assert "hi &lt;i&gt;there&lt;/i&gt;" in said and 'data-otid="otid-1"' in said and "<i>" not in said
    assert "<b>bold" not in "".join(e["html"] for e in whole)

    # a streamed part's shell comes once, with its first chunk; the chunks carry the text
    chunks = [e for e in events if e.get("delta")]
    parts = {(e["message_type"], e["id"]) for e in chunks}
    shells = [e for e in chunks if "html" in e]
    assert len(shells) == len(parts) >= 2
    reply = next(e for e in shells if e["message_type"] == "assistant_message")
    assert 'class="msg assistant_message streaming"' in reply["html"] and '<div class="body"></div>' in reply["html"]
    assert "".join(e["content"] for e in chunks if e["message_type"] == "assistant_message") == "done <b>bold</b>"
    await ide.disconnect()
    await api.disconnect()


async def test_a_refused_message_to_the_ide_socket_carries_its_html(account):
    agent = await database_sync_to_async(make_agent)(account.org)
    ide = await _ide_socket(account.user, agent.id)
    await ide.send_json_to({"type": "cancel"})
    [reply] = await ide.receive_json_from(timeout=5)
    assert reply["message_type"] == "error_message"
    assert 'class="msg error_message"' in reply["html"] and "Nothing to cancel" in reply["html"]
    await ide.disconnect()


def test_an_approval_request_and_its_answer_arrive_as_the_history_draws_them(account, api, web, fake_llm):
    from core.agents.messages import message_to_letta
    from core.models import Message
    from core.web.live import LiveRenderer

    agent = make_agent(account.org, tool_rules=[{"type": "requires_approval", "tool_name": "archival_memory_insert"}])
    fake_llm.script(FakeLLM.tool("archival_memory_insert", {"content": "<b>keep</b>"}, heartbeat=True))
    r = api.post(f"/v1/agents/{agent.id}/messages", {"messages": [{"role": "user", "content": "remember it"}]})
    ask = next(m for m in r.json()["messages"] if m["message_type"] == "approval_request_message")
    live = LiveRenderer(agent.id)
    card = live.event(ask)["html"]
    assert card == _history_items(web, agent.id)[("approval_request_message", ask["id"])]
    assert 'data-state="waiting"' in card and "&lt;b&gt;keep" in card and "<b>keep" not in card

    fake_llm.script(FakeLLM.tool("send_message", {"message": "kept"}))
    answer = [
        {"type": "approval", "tool_call_id": ask["tool_call"]["tool_call_id"], "approve": False, "reason": "<no>"}
    ]
    r = api.post(f"/v1/agents/{agent.id}/messages", {"messages": [{"type": "approval", "approvals": answer}]})
    assert r.status_code == 200, r.content
    stored = [d for row in Message.objects.filter(agent=agent).order_by("seq") for d in message_to_letta(row)]
    said = next(d for d in stored if d["message_type"] == "approval_response_message")  # as the run emits it
    html = live.event(said)["html"]
    assert html == _history_items(web, agent.id)[("approval_response_message", said["id"])]
    assert "archival_memory_insert" in html and "&lt;no&gt;" in html
