"""Agents as services in the IDE, in Chromium: a message from another agent arrives live (with a link to its
sender), a run is cancelled from the page, the agents list follows runs starting and ending, and an agent
file is uploaded, previewed and imported. Screenshots go to test-artifacts/screenshots/."""

import json
import re

from playwright.sync_api import expect

from core.models import Agent, Run
from tests.core.agentfile_fixtures import fixture_path
from tests.e2e.conftest import shot
from tests.factories import make_agent
from tests.fake_llm import FakeLLM

FIRST_CALL_S = 60000  # ms: the server's first model call imports litellm (several seconds on a small machine)


def _open(context, agent_id: str):
    page = context.new_page()
    page.goto(f"/agents/{agent_id}/")
    expect(page.locator("body[data-ws=open]")).to_have_count(1)
    return page


def _send(page, text: str) -> None:
    page.fill("#composer-input", text)
    page.press("#composer-input", "Enter")


def test_message_from_another_agent_appears_live_with_a_link_to_the_sender(signed_in, account, fake_llm):
    alpha = make_agent(account.org, name="Alpha", include_multi_agent_tools=True)
    beta = make_agent(account.org, name="Beta")
    receiver = _open(signed_in, beta.id)
    sender = _open(signed_in, alpha.id)

    fake_llm.script(
        FakeLLM.tool(
            "send_message_to_agent_async",
            {"message": "Hi Beta, is the <b>report</b> ready?", "other_agent_id": beta.id},
        ),
        FakeLLM.tool("send_message", {"message": "Yes, it is ready."}),  # Beta's answer, in its own background run
    )
    _send(sender, "Ask Beta about the report")

    incoming = receiver.locator("#live .msg.system_message.from-agent")
    expect(incoming).to_contain_text("Hi Beta, is the <b>report</b> ready?", timeout=FIRST_CALL_S)
    expect(incoming).to_contain_text(f"[Incoming message from agent with ID '{alpha.id}']")
    assert receiver.locator("#live b").count() == 0  # another agent's words are text, never markup
    link = incoming.locator("a.sender-link")
    expect(link).to_have_text("Alpha")
    expect(link).to_have_attribute("href", f"/agents/{alpha.id}/")
    expect(receiver.locator("#live .msg.assistant_message")).to_contain_text("Yes, it is ready.")
    expect(receiver.locator("#live .msg.stop_reason")).to_have_count(1)
    receiver.locator("#conversation").evaluate("c => c.scrollTop = 0")
    shot(receiver, "20-incoming-agent-message")

    expect(sender.locator("#live .msg.tool_call_message code")).to_have_text("send_message_to_agent_async")
    # after a reload the history shows the same sender, from the stored message
    receiver.reload()
    stored = receiver.locator("#history .msg.system_message.from-agent")
    expect(stored.locator("a.sender-link")).to_have_text("Alpha")
    stored.locator("a.sender-link").click()
    receiver.wait_for_url(re.compile(rf"/agents/{alpha.id}/$"))
    expect(receiver.locator("#agent-title")).to_have_text("Alpha")


def test_cancel_a_run_from_the_page(signed_in, account, fake_llm):
    agent = make_agent(account.org, name="Slowpoke")
    page = _open(signed_in, agent.id)
    fake_llm.script(
        FakeLLM.tool("conversation_search", {"query": "anything"}, heartbeat=True, latency=4),
        FakeLLM.tool("send_message", {"message": "This must never be said."}),
    )
    _send(page, "Take your time")
    cancel = page.locator("#cancel-run")
    expect(cancel).to_be_visible()
    for _ in range(600):  # click while the first model call is in flight (its reply takes 4 s)
        if fake_llm.chat_requests:
            break
        page.wait_for_timeout(100)
    assert fake_llm.chat_requests, "the run never called the model"
    cancel.click()
    expect(page.locator("#run-status")).to_contain_text("cancelling")
    expect(cancel).to_be_disabled()
    shot(page, "21-cancelling")

    expect(page.locator("#live .msg.stop_reason")).to_have_text("stop reason: cancelled", timeout=FIRST_CALL_S)
    expect(page.locator("#run-status")).to_contain_text("cancelled")
    expect(cancel).to_be_hidden()
    expect(page.locator("#live .msg.assistant_message")).to_have_count(0)
    shot(page, "22-cancelled")
    run = Run.objects.get(agent=agent)
    assert (run.status, run.stop_reason) == ("cancelled", "cancelled")


def test_agents_list_follows_a_run_starting_and_ending(signed_in, account, fake_llm):
    busy = make_agent(account.org, name="Busy bee")
    calm = make_agent(account.org, name="Calm cat")
    listing = signed_in.new_page()
    listing.goto("/")
    badge, other = listing.locator(f"#status-{busy.id}"), listing.locator(f"#status-{calm.id}")
    expect(badge).to_have_attribute("data-status", "idle")

    fake_llm.script(FakeLLM.tool("send_message", {"message": "Done."}, latency=6))
    workspace = _open(signed_in, busy.id)
    _send(workspace, "Work on it")
    # the list page is not reloaded: its poller picks the run up
    expect(badge).to_have_attribute("data-status", "running", timeout=20000)
    expect(badge).to_have_text("running")
    expect(other).to_have_attribute("data-status", "idle")
    shot(listing, "23-agents-running")
    expect(badge).to_have_attribute("data-status", "idle", timeout=FIRST_CALL_S)
    expect(workspace.locator("#live .msg.assistant_message")).to_contain_text("Done.")
    shot(listing, "24-agents-idle-again")


def _upload_and_preview(page, path, expect_name: str):
    page.goto("/")
    page.set_input_files("#import-form input[type=file]", str(path))
    page.click("#import-form button[type=submit]")
    preview = page.locator("#import-preview")
    expect(preview).to_be_visible()
    expect(preview).to_contain_text(expect_name)
    return preview


def test_upload_an_exported_agent_file_preview_and_import(signed_in, account, tmp_path):
    from core.agents.agentfile.exporter import agentfile_export

    source = make_agent(account.org, name="Exported", tags=["shared"])
    path = tmp_path / "exported.af"
    path.write_text(json.dumps(agentfile_export(agent=source), default=str), encoding="utf-8")
    page = signed_in.new_page()

    preview = _upload_and_preview(page, path, "Exported")
    expect(preview).to_contain_text("persona")
    expect(preview).to_contain_text("human")
    assert Agent.objects.count() == 2 - 1  # the preview stored nothing
    shot(page, "25-import-preview")

    preview.locator("input[name=name]").fill("Imported copy")
    page.click("#confirm-import")
    page.wait_for_url(re.compile(r"/agents/agent-[^/]+/$"))
    expect(page.locator("#agent-title")).to_have_text("Imported copy")
    new_id = page.url.rstrip("/").rsplit("/", 1)[-1]
    assert new_id != source.id
    imported = Agent.objects.get(id=new_id)
    values = lambda a: sorted(a.blocks.values_list("label", "value"))  # noqa: E731
    assert values(imported) == values(source)
    assert list(imported.tag_rows.values_list("tag", flat=True)) == ["shared"]
    shot(page, "26-imported-workspace")


def test_upload_a_letta_v1_file_from_the_shared_fixtures(signed_in):
    path = fixture_path("customer_service.af")
    page = signed_in.new_page()
    preview = _upload_and_preview(page, path, "customer_service")
    expect(preview).to_contain_text("Agent file format v1 (legacy Letta)")
    shot(page, "27-import-preview-letta-v1")
    page.click("#confirm-import")
    page.wait_for_url(re.compile(r"/agents/agent-[^/]+/$"))
    expect(page.locator("#agent-title")).to_have_text("customer_service")
    assert Agent.objects.filter(name="customer_service").count() == 1
