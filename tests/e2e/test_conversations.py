"""The conversation picker in Chromium: start another conversation with an agent from its workspace, talk in it,
and switch threads — each shows only its own messages, and a reply in one thread never lands in a tab showing
another (a run started over the API in a conversation reaches only the tabs that show it)."""

import json
import re
import urllib.request

from playwright.sync_api import expect

from core.models import Conversation, Message
from tests.e2e.conftest import shot
from tests.factories import make_agent
from tests.fake_llm import FakeLLM

FIRST_CALL_S = 60000  # ms: the server's first model call imports litellm (several seconds on a small machine)


def _send(page, text: str) -> None:
    page.fill("#composer-input", text)
    page.press("#composer-input", "Enter")


def test_start_a_conversation_talk_in_it_and_switch_threads(signed_in, account, fake_llm, live_server_url):
    agent = make_agent(account.org, name="Threads")
    fake_llm.script(
        FakeLLM.tool("send_message", {"message": "Own-thread reply."}),
        FakeLLM.tool("send_message", {"message": "Side-thread reply."}),
        FakeLLM.tool("send_message", {"message": "Reply from the API run."}),
    )
    own = signed_in.new_page()
    own.goto(f"/agents/{agent.id}/")
    expect(own.locator("body[data-ws=open]")).to_have_count(1)
    _send(own, "hello in my own thread")
    expect(own.locator("#conversation")).to_contain_text("Own-thread reply.", timeout=FIRST_CALL_S)

    side = signed_in.new_page()
    side.goto(f"/agents/{agent.id}/")
    side.click("#new-thread")
    expect(side).to_have_url(re.compile(r"conversation=conv-"))
    conversation = Conversation.objects.get(agent=agent)
    expect(side.locator("#thread-select")).to_have_value(conversation.id)
    expect(side.locator("body[data-ws=open]")).to_have_count(1)
    expect(side.locator("#conversation")).not_to_contain_text("hello in my own thread")
    _send(side, "a question on the side")
    expect(side.locator("#conversation")).to_contain_text("Side-thread reply.", timeout=FIRST_CALL_S)
    shot(side, "conversations-side-thread")

    # A run in the side conversation, started over the API, shows in the tab on that thread only.
    body = {"messages": [{"role": "user", "content": "from the API"}], "streaming": False}
    req = urllib.request.Request(
        f"{live_server_url}/v1/conversations/{conversation.id}/messages",
        method="POST",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {account.token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        assert resp.status == 200
    expect(side.locator("#conversation")).to_contain_text("Reply from the API run.", timeout=FIRST_CALL_S)
    expect(own.locator("#conversation")).not_to_contain_text("Reply from the API run.")
    expect(own.locator("#conversation")).not_to_contain_text("a question on the side")

    # Back to the agent's own thread with the picker: its messages, none of the side thread's.
    side.select_option("#thread-select", "")
    expect(side).to_have_url(re.compile(r"conversation=$|/agents/[^?]+/$"))
    expect(side.locator("#conversation")).to_contain_text("Own-thread reply.")
    expect(side.locator("#conversation")).not_to_contain_text("Side-thread reply.")
    assert Message.objects.filter(conversation=conversation, text__contains="a question on the side").exists()
    shot(side, "conversations-own-thread")
