"""The workspace as a debugger, in Chromium: the conversation shows the context window (eviction marks, summary and
reset dividers), the runs view follows a run started over the API, the step inspector reads payloads part by part
and diffs a memory edit, token chunks render as they arrive, and every unhappy path leaves a usable page.
Screenshots go to test-artifacts/screenshots/ (and /tmp/shots/ when it exists)."""

import json
import re
import urllib.request

from playwright.sync_api import expect

from core.agents.services import BlockInput
from core.models import Message, Step
from core.runs.runner import run_agent
from tests.e2e.conftest import shot
from tests.factories import make_agent
from tests.fake_llm import FakeLLM
from tests.helpers import in_thread

FIRST_CALL_S = 60000  # ms: the server's first model call imports litellm (several seconds on a small machine)


def _open(context, agent_id: str):
    page = context.new_page()
    page.goto(f"/agents/{agent_id}/")
    expect(page.locator("body[data-ws=open]")).to_have_count(1)
    return page


def _send(page, text: str) -> None:
    page.fill("#composer-input", text)
    page.press("#composer-input", "Enter")


def _turn(i: int) -> str:
    return f"Turn {i}: remember marker{i:02d}. " + "Filler to make the turn long enough to matter. " * 3


def _api(base: str, token: str, method: str, path: str, body: dict | None = None) -> dict:
    req = urllib.request.Request(
        base + path,
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.load(resp)


def test_overflow_marks_evicted_messages_and_draws_summary_and_reset_dividers(signed_in, account, fake_llm):
    agent = make_agent(
        account.org,
        name="Small window",
        system="You are a concise test agent. Reply with send_message.",
        include_base_tools=False,
        tools=["send_message", "conversation_search"],
        context_window_limit=2000,
        memory_blocks=[BlockInput(label="human", value="Name: Alice")],
    )
    for i in range(6):  # most of the window, filled through the real runner
        in_thread(
            run_agent, agent_id=agent.id, owner=account.org, input_messages=[{"role": "user", "content": _turn(i)}]
        )
    assert not Message.objects.filter(agent=agent, kind="summary").exists()
    page = _open(signed_in, agent.id)
    expect(page.locator("#history .msg.user_message[data-ctx=in]")).to_have_count(6)

    divider = page.locator("#live .divider.summary")
    for i in range(6, 20):  # until a step overflows the window, live
        done = page.locator("#live .msg.stop_reason").count()
        _send(page, _turn(i))
        expect(page.locator("#live .msg.stop_reason")).to_have_count(done + 1, timeout=FIRST_CALL_S)
        if divider.count():
            break
    expect(divider).to_have_count(1)
    expect(divider).to_contain_text("Context summarized at step")
    expect(divider.locator(".body")).not_to_be_empty()
    # the messages shown before the overflow are marked out, with the summarizer step that evicted them
    evicted = page.locator("#history .msg.user_message[data-ctx=out]").first
    expect(evicted).to_contain_text("marker00")
    expect(evicted.locator(".ctx-mark.out")).to_contain_text("evicted at step")
    summarizer = Step.objects.get(agent=agent, kind="summarizer")
    expect(evicted.locator(".ctx-mark.out .step-chip")).to_have_attribute("data-step", summarizer.id)
    agent.refresh_from_db()
    shown = page.eval_on_selector_all(
        "#conversation [data-id][data-ctx]", "els => els.map(e => [e.dataset.id, e.dataset.ctx])"
    )
    assert all((ctx == "in") == (mid in agent.message_ids) for mid, ctx in shown), shown
    center = (
        "(c, sel) => { const els = c.querySelectorAll(sel); const e = els[els.length - 1]; "
        "c.scrollTop += e.getBoundingClientRect().top - c.getBoundingClientRect().top - c.clientHeight / 2; }"
    )
    page.locator("#conversation").evaluate(center, "#history .msg[data-ctx=out]")
    shot(page, "30-overflow-evicted-messages")
    page.locator("#conversation").evaluate(center, "#live .divider")
    shot(page, "30b-overflow-summary-divider")

    # opening the summarizer step from its chip shows its payload
    evicted.locator(".ctx-mark.out .step-chip").click()
    expect(page.locator("#step-detail .step-card")).to_contain_text("summarizer")

    # after a reload the stored history says the same
    page.reload()
    expect(page.locator("#history .divider.summary")).to_have_count(1)
    expect(page.locator("#history .msg.assistant_message").last).to_have_attribute("data-ctx", "in")
    expect(page.locator("#history .msg.user_message").first).to_have_attribute("data-ctx", "out")

    page.once("dialog", lambda d: d.accept())
    page.click("#reset-btn")
    reset = page.locator("#history .divider.reset")
    expect(reset).to_contain_text("Conversation reset")
    expect(page.locator("#history .msg.assistant_message[data-ctx=in]")).to_have_count(0)
    expect(page.locator("#history .msg.assistant_message[data-ctx=out]").last).to_contain_text("out · reset")
    shot(page, "31-reset-divider")
    page.evaluate("document.documentElement.dataset.theme = 'dark'")
    page.locator("#conversation").evaluate(center, ".divider.summary")
    shot(page, "32-dividers-dark")


def test_runs_view_follows_a_run_started_over_the_api(signed_in, account, fake_llm, live_server_url):
    agent = make_agent(account.org, name="API driven")
    page = _open(signed_in, agent.id)
    page.click("[data-tab=tab-runs]")
    expect(page.locator("#runs-table")).to_contain_text("No runs yet")

    fake_llm.script(
        FakeLLM.tool("conversation_search", {"query": "tea"}, heartbeat=True, latency=3),
        FakeLLM.tool("send_message", {"message": "Answered over the API."}),
    )
    run = _api(
        live_server_url,
        account.token,
        "POST",
        f"/v1/agents/{agent.id}/messages/async",
        {"messages": [{"role": "user", "content": "from a script"}]},
    )
    row = page.locator(f'.run-row[data-run="{run["id"]}"]')
    expect(row).to_have_attribute("data-status", re.compile("created|running"), timeout=FIRST_CALL_S)
    expect(page.locator("#run-status")).to_contain_text("running")
    expect(row).to_contain_text("from a script")
    expect(row.locator("[data-cancel-run]")).to_be_visible()
    shot(page, "33-runs-live-running")
    expect(row).to_have_attribute("data-status", "completed", timeout=FIRST_CALL_S)
    expect(row.locator(".run-main td.num").first).to_have_text("2")  # two model calls
    expect(row.locator(".run-main")).to_contain_text("end_turn")
    expect(row.locator("[data-cancel-run]")).to_have_count(0)
    expect(page.locator("#live .msg.assistant_message")).to_contain_text("Answered over the API.")
    expect(page.locator("#run-status")).to_contain_text("completed")

    # its steps, numbered within the conversation (the API numbers them within the run); clicking one opens it
    row.locator(".run-main").click()
    chips = row.locator(".run-steps .step-chip")
    expect(chips).to_have_text(["step 1", "step 2"])
    api_steps = _api(live_server_url, account.token, "GET", f"/v1/runs/{run['id']}/steps")
    assert [s["index"] for s in api_steps] == [0, 1]
    chips.nth(1).click()
    expect(page.locator("#step-detail .step-card strong").first).to_have_text("Step 2")
    expect(page.locator("#step-detail .step-card .step-number")).to_contain_text("step 1 of its run")
    expect(page.locator("#step-detail .step-card")).to_contain_text(run["id"][-8:])
    # the conversation's chips and the past-steps list carry the same numbers
    expect(page.locator("#live .msg.assistant_message .step-chip")).to_have_text("step 2")
    expect(page.locator(f'#steps-list .step-chip[data-step="{api_steps[1]["id"]}"]')).to_contain_text("step 2")
    page.click("[data-tab=tab-runs]")
    shot(page, "34-runs-completed-with-steps")
    page.evaluate("document.documentElement.dataset.theme = 'dark'")
    shot(page, "35-runs-dark")


def test_step_inspector_reads_the_payload_and_diffs_a_memory_edit(signed_in, account, fake_llm):
    agent = make_agent(account.org, name="Memory editor")
    page = _open(signed_in, agent.id)
    fake_llm.script(
        FakeLLM.tool("core_memory_append", {"label": "human", "content": "Loves oolong tea."}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "Noted: oolong."}),
    )
    _send(page, "I love oolong tea")
    expect(page.locator("#live .msg.assistant_message")).to_contain_text("Noted: oolong.", timeout=FIRST_CALL_S)

    # the memory-editing step: what it changed is the block, as added text, with the token delta
    edit_chip = page.locator("#live .msg.tool_call_message .step-chip").first
    expect(edit_chip).to_have_text("step 1")
    edit_chip.click()
    # steps keep each section's text, so the edit shows in the core memory section itself
    system_label = page.locator(".part-label", has_text=re.compile("^Core memory$"))
    system = page.locator("#step-next-diff details.diff-part", has=system_label)
    expect(system.locator(".add").filter(has_text="Loves oolong tea.")).to_have_count(1)
    expect(system.locator(".part-tokens.delta-pos")).to_contain_text("(+")
    shot(page, "36-step-diff-memory-edit")
    # the step after it shows the same change as "since the previous step"
    page.locator("#live .msg.assistant_message .step-chip").click()
    expect(page.locator("#step-detail .step-card strong").first).to_have_text("Step 2")
    expect(
        page.locator("#step-text-diff details.diff-part", has=system_label)
        .locator(".add")
        .filter(has_text="Loves oolong tea.")
    ).to_have_count(1)

    # the payload, part by part: each message and tool definition with its token count, collapsible
    card = page.locator("#step-detail .step-card")
    tool_part = card.locator("details.part-tool", has_text="core_memory_append").first
    expect(tool_part.locator(".part-tokens")).to_have_text(re.compile(r"^\d+ tok$"))
    expect(tool_part.locator("pre.part-text")).to_be_hidden()
    tool_part.locator("summary").click()
    expect(tool_part.locator("pre.part-text")).to_contain_text('"name": "core_memory_append"')
    shot(page, "37-step-parts")
    # raw JSON toggle, remembered across steps and reloads
    card.locator("[data-toggle-raw]").click()
    expect(card.locator("pre.raw")).to_be_visible()
    expect(card.locator("pre.raw")).to_contain_text('"tool_choice"')
    expect(card.locator(".parts")).to_be_hidden()
    page.reload()
    expect(page.locator("#next-request pre.raw")).to_be_visible()
    page.locator("#next-request [data-toggle-raw]").click()
    expect(page.locator("#next-request .parts")).to_be_visible()
    core = page.locator('#next-request details.part[data-key="core_memory"]')
    expect(core.locator("> summary .part-tokens")).to_have_text(re.compile(r"^\d+ tok$"))
    core.locator("> summary").click()
    human = core.locator('details[data-key="block:human"]')
    expect(human.locator(".part-tokens")).to_have_text(re.compile(r"^\d+ tok$"))
    human.locator("summary").click()
    expect(human.locator("pre")).to_contain_text("Loves oolong tea.")
    core.scroll_into_view_if_needed()
    shot(page, "37b-next-request-memory-blocks")
    page.evaluate("document.documentElement.dataset.theme = 'dark'")
    page.locator("#history .msg.tool_call_message .step-chip").first.click()
    expect(page.locator("#step-next-diff")).to_be_visible()
    shot(page, "38-step-diff-dark")


def test_panes_resize_and_the_layout_is_remembered(signed_in, account):
    agent = make_agent(account.org, name="Wide inspector")
    page = _open(signed_in, agent.id)
    inspector = page.locator("#inspector")
    before = inspector.bounding_box()["width"]
    handle = page.locator(".splitter[data-split=right]").bounding_box()
    x, y = handle["x"] + handle["width"] / 2, handle["y"] + 200
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x - 150, y, steps=5)
    page.mouse.up()
    wider = inspector.bounding_box()["width"]
    assert wider > before + 100, (before, wider)
    page.reload()
    expect(page.locator("body[data-ws=open]")).to_have_count(1)
    assert abs(page.locator("#inspector").bounding_box()["width"] - wider) < 2
    shot(page, "39-wide-inspector")


def _group_send(group: str, events: list[dict]) -> None:
    """core.events.send_events from a plain thread (Playwright keeps an event loop on the test's own)."""
    from core.events import send_events

    in_thread(send_events, group, events, timeout=15)


def test_token_chunks_render_before_the_final_message(redis_layer, signed_in, account):
    from core.events import agent_group

    send_events = _group_send
    agent = make_agent(account.org, name="Streamer")
    page = _open(signed_in, agent.id)
    group, mid = agent_group(agent.id), "message-streamed-1"

    def chunk(message_type: str, **fields):
        send_events(group, [{"message_type": message_type, "id": mid, "delta": True, "run_id": "run-x", **fields}])

    chunk("reasoning_message", reasoning="Let me think ")
    reasoning = page.locator(f'#live .msg.reasoning_message[data-id="{mid}"]')
    expect(reasoning.locator(".body")).to_have_text("Let me think ")
    chunk("reasoning_message", reasoning="about <b>tea</b>.")
    chunk(
        "tool_call_message",
        tool_call={"name": "send_message", "arguments": '{"message": "Hel', "tool_call_id": "call-1"},
    )
    expect(reasoning.locator(".body")).to_have_text("Let me think about <b>tea</b>.")
    call = page.locator(f'#live .msg.tool_call_message[data-id="{mid}"]')
    expect(call.locator("code")).to_have_text("send_message")
    expect(call.locator("pre")).to_have_text('{"message": "Hel')
    chunk("tool_call_message", tool_call={"arguments": 'lo"}'})
    chunk("assistant_message", content="Hello")
    chunk("assistant_message", content=" there")
    answer = page.locator(f'#live .msg.assistant_message[data-id="{mid}"]')
    expect(answer.locator(".body")).to_have_text("Hello there")
    expect(call.locator("pre")).to_have_text('{"message": "Hello"}')
    expect(page.locator("#live .msg.streaming")).to_have_count(3)
    assert page.locator("#live b").count() == 0  # chunks are text, never markup
    shot(page, "40-streaming-chunks")

    # the complete messages replace their chunks, in place
    final = {"id": mid, "run_id": "run-x", "step_id": None, "date": "2026-11-30T12:00:00+00:00"}
    send_events(
        group,
        [
            {**final, "message_type": "reasoning_message", "reasoning": "Let me think about <b>tea</b>."},
            {**final, "message_type": "assistant_message", "content": "Hello there!"},
        ],
    )
    expect(answer.locator(".body")).to_have_text("Hello there!")
    expect(page.locator("#live .msg.assistant_message")).to_have_count(1)
    expect(page.locator("#live .msg.reasoning_message")).to_have_count(1)
    expect(
        page.locator("#live .msg.reasoning_message.streaming, #live .msg.assistant_message.streaming")
    ).to_have_count(0)
    kinds = page.eval_on_selector_all("#live .msg", "els => els.map(e => e.dataset.type)")
    assert kinds == ["reasoning_message", "tool_call_message", "assistant_message"], kinds

    # send_message streamed as a tool call ends as the assistant message it stands for
    other = "message-streamed-2"
    send_events(
        group,
        [
            {
                "message_type": "tool_call_message",
                "id": other,
                "delta": True,
                "run_id": "run-x",
                "tool_call": {"name": "send_message", "arguments": '{"message": "Bye', "tool_call_id": "call-2"},
            }
        ],
    )
    expect(page.locator(f'#live .msg.tool_call_message.streaming[data-id="{other}"]')).to_have_count(1)
    send_events(group, [{**final, "id": other, "message_type": "assistant_message", "content": "Bye now."}])
    expect(page.locator(f'#live .msg.assistant_message[data-id="{other}"]')).to_have_text(re.compile("Bye now."))
    expect(page.locator(f'#live .msg.tool_call_message[data-id="{other}"]')).to_have_count(0)
    # chunks of a step that never completed go when the run ends
    send_events(
        group, [{"message_type": "assistant_message", "id": "message-never", "delta": True, "content": "half a"}]
    )
    expect(page.locator('#live .msg.streaming[data-id="message-never"]')).to_have_count(1)
    send_events(
        group, [{"message_type": "run_status", "run_id": "run-x", "status": "completed", "stop_reason": "end_turn"}]
    )
    expect(page.locator('#live [data-id="message-never"]')).to_have_count(0)
    expect(page.locator("#run-status")).to_contain_text("completed")


def test_an_imported_letta_v1_conversation_renders_like_a_native_one(signed_in, account):
    from core.agents.agentfile.importer import agentfile_import
    from core.agents.agentfile.parse import parse_agent_file
    from tests.core.agentfile_fixtures import fixture_path

    result = agentfile_import(
        owner=account.org, parsed=parse_agent_file(fixture_path("memgpt_agent_with_convo.af").read_bytes())
    )
    page = _open(signed_in, result.agent_ids[0])
    history = page.locator("#history")
    expect(history.locator(".msg.user_message[data-ctx=in]").filter(has_text="Can you start calling me")).to_have_count(
        1
    )
    expect(history.locator(".divider.summary")).to_contain_text("Context summarized")  # Letta's own summary alert
    expect(history).not_to_contain_text('"type": "user_message"')
    expect(history.locator(".divider.reset")).to_have_count(0)
    returns = history.locator(".msg.tool_return_message summary")
    expect(returns.first).to_contain_text("core_memory")
    page.locator("#conversation").evaluate("c => c.scrollTop = c.scrollHeight - c.clientHeight - 700")
    shot(page, "51-imported-letta-v1")
