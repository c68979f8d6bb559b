"""A run seen whole, in Chromium: the Runs tab opens a run's timeline and graph, of a single agent's run and of a
supervisor's run that reached a worker; clicking a node opens that step (in this inspector, or in the worker's
workspace); the Runs tab filters by thread, and the header says when another thread waits for a person.
Screenshots at 390, 1280 and 1920 px go to test-artifacts/screenshots/."""

import json
import re
import urllib.request
from decimal import ROUND_HALF_UP, Decimal

from playwright.sync_api import expect

from core.models import Run, Step
from core.runs.runner import run_agent
from core.telemetry import tracing
from tests.e2e.conftest import shot
from tests.factories import make_agent
from tests.fake_llm import FakeLLM
from tests.helpers import in_thread

WAIT = "send_message_to_agent_and_wait_for_reply"
HEIGHT = {390: 844, 1280: 800, 1920: 1080}


def _send(agent, text):
    return run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": text}])


def _api(base: str, token: str, path: str, body: dict) -> dict:
    req = urllib.request.Request(
        base + path,
        method="POST",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.load(resp)


def _runs_tab(page, width: int):
    """The Runs tab of the inspector, the way a person opens it at this width."""
    if width < 768:
        page.click('.ws-tabs [data-pane="inspector"]')
    elif width < 1280 and not page.locator("body.inspector-open").count():
        page.click("#inspector-toggle")
    page.click('.pill-nav [data-tab="tab-runs"]')
    expect(page.locator("#runs-panel .run-row").first).to_be_visible()


def _open_run(page, run_id: str):
    page.locator(f'#runs-panel .run-row[data-run="{run_id}"] .run-main').click()
    body = page.locator(f'#runs-panel .run-row[data-run="{run_id}"] .run-steps-body')
    expect(body.locator(".run-timeline .rt-row").first).to_be_visible()
    expect(body.locator("svg.rg")).to_be_visible()
    return body


def test_a_single_agent_runs_timeline_and_graph_open_a_step(signed_in, account, fake_llm):
    agent = make_agent(account.org, name="Solo")
    fake_llm.script(FakeLLM.tool("send_message", {"message": "First."}))
    in_thread(_send, agent, "first")
    fake_llm.script(
        FakeLLM.tool("archival_memory_insert", {"content": "a note to keep"}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "Noted."}),
    )
    run = in_thread(_send, agent, "second")
    page = signed_in.new_page()
    for width in (1280, 1920, 390):
        page.set_viewport_size({"width": width, "height": HEIGHT[width]})
        page.goto(f"/agents/{agent.id}/")
        expect(page.locator("body[data-ws=open]")).to_have_count(1)
        _runs_tab(page, width)
        body = _open_run(page, run.run_id)
        expect(body.locator("svg.rg .rg-model .rg-title")).to_have_text(["step 2 · model call", "step 3 · model call"])
        expect(body.locator(".rt-row.rt-tool").first).to_contain_text("archival_memory_insert")
        expect(body.locator(".trace-box code")).to_have_text(tracing.trace_id_hex(run.run_id))
        body.locator(".run-timeline").scroll_into_view_if_needed()
        shot(page, f"run-timeline-{width}")
        body.locator("svg.rg").scroll_into_view_if_needed()
        shot(page, f"run-graph-{width}")
        page.evaluate("document.documentElement.dataset.theme = 'dark'")
        shot(page, f"run-graph-{width}-dark")
        page.evaluate("document.documentElement.dataset.theme = 'light'")
    first = Step.objects.get(run_id=run.run_id, index=0)
    body.locator(f'a.rg-node[data-node="tool"][data-open-step="{first.id}"]').click()
    card = page.locator(f'#step-detail .step-card[data-step-id="{first.id}"]')
    expect(card.locator("strong").first).to_have_text("Step 2")  # the thread's second step, its run's first
    # the chips of the conversation, Past steps and the run read the same numbers
    expect(page.locator(f'#steps-list .step-chip[data-step="{first.id}"]')).to_have_text("step 2")
    expect(page.locator(f'#conversation .step-chip[data-step="{first.id}"]').first).to_have_text("step 2")
    expect(body.locator(f'.run-steps-list .step-chip[data-step="{first.id}"]')).to_have_text("step 2")
    shot(page, "run-graph-step-opened-390")


def test_a_supervisors_graph_reaches_the_workers_run_and_opens_its_step(signed_in, account, fake_llm):
    boss = make_agent(account.org, name="Supervisor", include_multi_agent_tools=True)
    worker = make_agent(account.org, name="Worker")
    fake_llm.script(
        FakeLLM.tool(WAIT, {"message": "count the rows", "other_agent_id": worker.id}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "42 rows"}),
        FakeLLM.tool("send_message", {"message": "The worker counted 42 rows."}),
    )
    run = in_thread(_send, boss, "how many rows?")
    worker_step = Step.objects.get(run=Run.objects.get(agent=worker))
    page = signed_in.new_page()
    for width in (390, 1920, 1280):
        page.set_viewport_size({"width": width, "height": HEIGHT[width]})
        page.goto(f"/agents/{boss.id}/")
        expect(page.locator("body[data-ws=open]")).to_have_count(1)
        _runs_tab(page, width)
        body = _open_run(page, run.run_id)
        expect(body.locator(".rt-row.rt-agent")).to_contain_text("run of Worker")
        expect(body.locator(f'a.rg-node[data-node="run"][data-agent="{worker.id}"]')).to_have_count(1)
        body.locator("svg.rg").scroll_into_view_if_needed()
        shot(page, f"run-graph-multiagent-{width}")
        body.locator(".run-timeline").scroll_into_view_if_needed()
        shot(page, f"run-timeline-multiagent-{width}")
    body.locator(f'a.rg-node[data-node="model"][data-agent="{worker.id}"]').click()
    expect(page).to_have_url(f"{page.url.split('/agents/')[0]}/agents/{worker.id}/?step={worker_step.id}")
    expect(page.locator(f'#step-detail .step-card[data-step-id="{worker_step.id}"]')).to_be_visible()
    shot(page, "run-graph-worker-step-1280")


def test_the_runs_tab_filters_by_thread_and_the_header_names_a_waiting_thread(
    signed_in, account, fake_llm, live_server_url
):
    rules = [{"type": "requires_approval", "tool_name": "archival_memory_insert"}]
    agent = make_agent(account.org, name="Threads", tool_rules=rules)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Own."}))
    own_run = in_thread(_send, agent, "in my own thread")
    conv = _api(live_server_url, account.token, f"/v1/conversations/?agent_id={agent.id}", {"summary": "side trip"})
    fake_llm.script(FakeLLM.tool("archival_memory_insert", {"content": "x"}, heartbeat=True))
    _api(
        live_server_url,
        account.token,
        f"/v1/conversations/{conv['id']}/messages",
        {"messages": [{"role": "user", "content": "remember x"}], "streaming": False},
    )
    side_run = Run.objects.get(conversation_id=conv["id"])
    page = signed_in.new_page()
    for width in (1280, 390, 1920):
        page.set_viewport_size({"width": width, "height": HEIGHT[width]})
        page.goto(f"/agents/{agent.id}/")
        note = page.locator("#threads-waiting .threads-waiting-note")
        expect(note).to_contain_text("Another conversation of this agent waits for you (an approval): side trip")
        shot(page, f"threads-waiting-note-{width}")
        _runs_tab(page, width)
        rows = page.locator("#runs-panel .run-row")
        expect(rows).to_have_count(2)
        page.select_option("#runs-thread", conv["id"])
        expect(rows).to_have_count(1)
        expect(rows.first).to_have_attribute("data-run", side_run.id)
        expect(rows.first.locator(".run-thread")).to_have_text("side trip")
        shot(page, f"runs-thread-filter-{width}")
        page.select_option("#runs-thread", "own")
        expect(rows).to_have_count(1)
        expect(rows.first).to_have_attribute("data-run", own_run.run_id)
    note.locator("a").click()
    expect(page.locator("#thread-select")).to_have_value(conv["id"])
    expect(page.locator("#threads-waiting .threads-waiting-note")).to_have_count(0)


def _workspace(context, agent_id: str, width: int):
    page = context.new_page()
    page.set_viewport_size({"width": width, "height": HEIGHT.get(width, 800)})
    page.goto(f"/agents/{agent_id}/")
    expect(page.locator("body[data-ws=open]")).to_have_count(1)
    return page


def test_at_1280_tool_names_keep_their_width_and_the_runs_table_fits_its_pane(signed_in, account, fake_llm):
    agent = make_agent(account.org, name="Wide tools")
    fake_llm.script(FakeLLM.tool("archival_memory_insert", {"content": "x"}, heartbeat=False))
    in_thread(_send, agent, "remember x")
    page = _workspace(signed_in, agent.id, 1280)
    names = page.locator("#attached-tools > li > code")
    assert names.count() >= 3
    for i in range(names.count()):  # a name broken letter by letter was some 40 px wide
        box = names.nth(i).bounding_box()
        assert box["width"] >= 120, (names.nth(i).inner_text(), box)
    shot(page, "tools-left-pane-1280")
    _runs_tab(page, 1280)
    table, pane = page.locator("#runs-table").bounding_box(), page.locator("#runs-panel").bounding_box()
    assert table["x"] + table["width"] <= pane["x"] + pane["width"], (table, pane)
    cost = page.locator("#runs-table .run-cost").first.bounding_box()
    assert cost["x"] + cost["width"] <= pane["x"] + pane["width"]
    shot(page, "runs-table-1280")


def test_the_window_sliders_arrow_keys_move_by_a_useful_step(signed_in, account):
    agent = make_agent(account.org, name="Slider", context_window_limit=16000)
    page = _workspace(signed_in, agent.id, 1280)
    slider = page.locator("#window-slider")
    assert int(slider.get_attribute("max")) >= 100000  # the fake model's 128k window
    slider.focus()
    page.keyboard.press("ArrowRight")
    moved = int(slider.input_value())
    assert moved - 16000 >= 1024 and (moved - 16000) % 256 == 0
    expect(page.locator("#window-value")).to_have_text(str(moved))
    page.keyboard.press("PageDown")
    assert moved - int(slider.input_value()) >= 10 * 1024
    expect(page.locator("#window-number")).to_have_value(slider.input_value())


def test_a_paused_run_reads_as_paused_without_zero_steps(signed_in, account, fake_llm):
    rules = [{"type": "requires_approval", "tool_name": "archival_memory_insert"}]
    agent = make_agent(account.org, name="Paused", tool_rules=rules)
    fake_llm.script(FakeLLM.tool("archival_memory_insert", {"content": "x"}, heartbeat=True))
    page = _workspace(signed_in, agent.id, 1280)
    page.fill("#composer-input", "remember x")
    page.press("#composer-input", "Enter")
    stop = page.locator("#conversation .msg.stop_reason")
    expect(stop).to_have_text("paused for a person's answer", timeout=60000)
    expect(page.locator("#conversation")).not_to_contain_text("0 steps")
    shot(page, "paused-run-wording-1280")
    centers = page.evaluate(
        "[...document.querySelectorAll('#conversation-pane > .pane-head > *')].filter((e) => e.checkVisibility())"
        ".map((e) => { const r = e.getBoundingClientRect(); return r.top + r.height / 2; })"
    )
    rows = len([c for i, c in enumerate(sorted(centers)) if i == 0 or c - sorted(centers)[i - 1] > 8])
    assert rows <= 2, rows  # the header of a waiting run wrapped to three rows at 1280 px
    page.click("#cancel-run")  # Stop: the wait ends, denied
    expect(page.locator("#run-status")).to_have_text("cancelled", timeout=30000)
    expect(page.locator("#conversation")).not_to_contain_text("requires_approval")
    shot(page, "paused-run-stopped-1280")


def test_the_files_tab_names_the_lines_a_short_file_has(signed_in, account):
    from memory.files import services as file_services
    from memory.files.ingest import file_ingest

    agent = make_agent(account.org, name="Reader")
    folder = file_services.folder_create(owner=account.org, name="notes")
    short, _ = file_services.file_upload(
        folder=folder,
        file_name="six.txt",
        content_type="text/plain",
        data="".join(f"line {i}\n" for i in range(6)).encode(),
    )
    assert file_ingest(file_id=short.id) == "completed"
    file_services.folder_attach(agent=agent, folder=folder)
    file_services.file_open(agent=agent, file_id=short.id, start=1, end=20)
    page = _workspace(signed_in, agent.id, 1280)
    page.click('.pill-nav [data-tab="tab-files"]')
    expect(page.locator(f'#agent-files [data-file="{short.id}"] .open-state')).to_have_text("open · lines 1–6")
    shot(page, "files-tab-short-file-1280")


def test_a_replay_on_three_models_scrolls_its_columns_not_the_page_at_1280(signed_in, account, fake_llm):
    from core.runs import timetravel

    agent = make_agent(account.org, name="Replayed")
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Hello."}))
    run = in_thread(_send, agent, "hi")
    step = Step.objects.get(run_id=run.run_id)
    fake_llm.script(*[FakeLLM.tool("send_message", {"message": f"Answer {i}."}) for i in range(3)])
    models = ["openai/model-a", "openai/model-b", "openai/model-c"]
    in_thread(timetravel.step_replay, owner=account.org, step=step, models=models)
    page = _workspace(signed_in, agent.id, 1280)
    page.goto(f"/agents/{agent.id}/steps/{step.id}/replay/")
    expect(page.locator("#replay-columns .replay-col[data-model]")).to_have_count(3)
    doc = page.evaluate("[document.scrollingElement.scrollWidth, document.scrollingElement.clientWidth]")
    assert doc[0] <= doc[1], doc  # it was 1,492 px wide in 1,280
    columns = page.evaluate(
        "(() => { const c = document.getElementById('replay-columns'); return [c.scrollWidth, c.clientWidth]; })()"
    )
    assert columns[0] > columns[1]  # the four columns scroll inside their strip
    shot(page, "replay-three-models-1280")


def test_a_failed_run_does_not_claim_0_steps_and_run_ids_read_alike(signed_in, account, fake_llm):
    agent = make_agent(account.org, name="Failing")
    fake_llm.script(FakeLLM.error(500, "upstream exploded"))
    page = _workspace(signed_in, agent.id, 1280)
    page.fill("#composer-input", "this will fail")
    page.press("#composer-input", "Enter")
    expect(page.locator("#live .run-failed")).to_contain_text("upstream exploded", timeout=60000)
    run = Run.objects.get(agent=agent)
    expect(page.locator("#conversation")).not_to_contain_text("0 steps")
    shot(page, "failed-run-1280")
    page.reload()
    expect(page.locator("body[data-ws=open]")).to_have_count(1)
    # the run's id reads the same (its last 8 characters) in Past steps, the Runs tab and the step card
    label = page.locator(f'#steps-list .steps-run[data-run="{run.id}"] .run-label code')
    expect(label).to_have_text(run.id[-8:])
    _runs_tab(page, 1280)
    expect(page.locator(f'#runs-panel .run-row[data-run="{run.id}"] .run-main code').first).to_have_text(run.id[-8:])
    shot(page, "failed-run-runs-tab-1280")


def test_branch_here_opens_a_thread_that_goes_on_from_that_message(signed_in, account, fake_llm):
    from core.models import Conversation

    agent = make_agent(account.org, name="Brancher")
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Paris is lovely."}))
    in_thread(_send, agent, "Plan a trip to Paris")
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Rome then."}))
    in_thread(_send, agent, "Actually, Rome")
    page = _workspace(signed_in, agent.id, 1280)
    asked = page.locator("#history .msg.user_message").filter(has_text="Plan a trip to Paris")
    asked.hover()
    shot(page, "branch-here-hover-1280")
    asked.locator(".branch-here").click()
    expect(page).to_have_url(re.compile(r"conversation=conv-"))
    conv = Conversation.objects.get(agent=agent)
    expect(page.locator("#thread-select")).to_have_value(conv.id)
    expect(page.locator("#conversation")).to_contain_text("Plan a trip to Paris")
    expect(page.locator("#conversation")).not_to_contain_text("Paris is lovely.")
    expect(page.locator("#conversation")).not_to_contain_text("Actually, Rome")
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Lyon, on the way."}))
    page.fill("#composer-input", "And a stop on the way?")
    page.press("#composer-input", "Enter")
    expect(page.locator("#conversation")).to_contain_text("Lyon, on the way.", timeout=60000)
    request = fake_llm.chat_requests[-1]["messages"]
    said = " ".join(str(m.get("content")) for m in request)
    assert "Plan a trip to Paris" in said and "Actually, Rome" not in said  # the branch's context, not the old thread's
    shot(page, "branch-here-continued-1280")


def test_after_esc_closes_a_step_the_inspectors_tab_strip_is_in_view_at_1280(signed_in, account, fake_llm):
    from tests.e2e.test_breakpoints_ui import tab_strip_in_view

    agent = make_agent(account.org, name="Esc")
    for i in range(3):
        fake_llm.script(
            FakeLLM.tool("archival_memory_insert", {"content": f"note {i}"}, heartbeat=True),
            FakeLLM.tool("send_message", {"message": f"Kept note {i}."}),
        )
        in_thread(_send, agent, f"keep note {i}")
    step = Step.objects.filter(agent=agent).order_by("created_at").last()
    page = _workspace(signed_in, agent.id, 1280)
    page.locator(f'#conversation .step-chip[data-step="{step.id}"]').first.click()
    expect(page.locator(f'#step-detail .step-card[data-step-id="{step.id}"]')).to_be_visible()
    tab_strip_in_view(page, "#step-detail")
    shot(page, "inspector-step-open-1280")
    page.locator("#step-detail .step-card strong").first.click()  # focus in the card, not in a field
    page.keyboard.press("Escape")
    expect(page.locator("#step-detail .step-card")).to_have_count(0)
    tab_strip_in_view(page)
    shot(page, "inspector-after-esc-1280")


COUNT_SOURCE = '''
def count_rows(table: str) -> int:
    """Count a table's rows.

    Args:
        table: The table's name.
    """
    return 42
'''


def test_a_streamed_runs_timeline_shows_the_first_token_and_the_sandbox_start(
    signed_in, account, fake_llm, live_server_url
):
    import dataclasses

    from tools.services import tool_attach, tool_create

    agent = make_agent(account.org, name="Streamed")
    tool_attach(agent=agent, tool=tool_create(owner=account.org, source_code=COUNT_SOURCE))
    fake_llm.script(
        dataclasses.replace(FakeLLM.tool("count_rows", {"table": "t"}, heartbeat=True), latency=0.3),
        FakeLLM.tool("send_message", {"message": "42 rows."}),
    )
    req = urllib.request.Request(  # a caller that follows the tokens: the model call streams
        f"{live_server_url}/v1/agents/{agent.id}/messages/stream",
        method="POST",
        data=json.dumps({"input": "count t", "stream_tokens": True}).encode(),
        headers={"Authorization": f"Bearer {account.token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        assert resp.read().decode().endswith("data: [DONE]\n\n")  # the run ended and is stored
    run = Run.objects.get(agent=agent)
    first = Step.objects.get(run=run, index=0)
    page = _workspace(signed_in, agent.id, 1280)
    _runs_tab(page, 1280)
    body = _open_run(page, run.id)
    rows = body.locator(".rt-row")
    model = rows.filter(has_text="step 1 · model call")
    expect(model.locator(".rt-ttft")).to_have_count(1)  # the mark on the call's bar
    ttft = body.locator(".rt-row.rt-first_token").first
    expect(ttft).to_contain_text("first token")
    shown = Decimal(str(first.usage["first_token_ms"])).quantize(Decimal(1), ROUND_HALF_UP)  # as floatformat rounds
    expect(ttft.locator(".rt-ms")).to_have_text(f"{shown} ms")
    sandbox = body.locator(".rt-row.rt-sandbox")
    expect(sandbox).to_have_count(1)
    expect(sandbox).to_contain_text("sandbox start")
    # each sits right under the span it is part of, as in the exported trace
    kinds = body.locator(".rt-row").evaluate_all("rs => rs.map((r) => r.dataset.kind)")
    assert kinds[kinds.index("first_token") - 1] == "model" and kinds[kinds.index("sandbox") - 1] == "tool"
    body.locator(".run-timeline").scroll_into_view_if_needed()
    shot(page, "run-timeline-first-token-sandbox-1280")
