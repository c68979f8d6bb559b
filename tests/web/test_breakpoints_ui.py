"""The debugger in the workspace, server side: the Breakpoints panel (listed in words, enabled or disabled, removed,
added with an inline error for a bad token count), the pause card of a run held before a model call (in the page,
alone, and once let go: continued, stepped, stopped), the approval card of a tool-call breakpoint (Step and Stop beside
Approve and Deny), the step inspector showing a call that ran with edited arguments, and Continue / Step / Stop over
the card's form (posted), a second answer told the run no longer waits. Everything a person or the model wrote is escaped."""

import re

import pytest
from django.test import Client

from core.agents.breakpoints import breakpoint_set, breakpoints_list
from core.models import Message, Run
from core.runs import executor
from memory.models import Passage
from tests.factories import make_agent
from tests.fake_llm import FakeLLM

pytestmark = pytest.mark.django_db(transaction=True)
HOSTILE = 'the code is <script>alert("x")</script> & <b>42</b>'


@pytest.fixture
def agent(account, fake_llm):
    return make_agent(account.org, name="Debuggee")


def _say(api, agent, text="what is my name?"):
    r = api.post(f"/v1/agents/{agent.id}/messages", {"messages": [{"role": "user", "content": text}]})
    assert r.status_code == 200, r.content
    return r.json()


def _points(agent) -> list[dict]:
    """The agent's breakpoints as stored now."""
    agent.refresh_from_db()
    return breakpoints_list(agent=agent)


def _ended(run_id: str) -> Run:
    return executor.run_wait(run=Run.objects.get(pk=run_id), timeout=30)


def _model_call_card(html: str) -> str:
    found = re.search(
        r'<div class="msg wait-model-call wait-card".*?(?=\n<div class="msg |</div>\s*</div>\s*<div class="busy-bar|\Z)',
        html,
        re.S,
    )
    assert found, "no card of a wait before a model call"
    return found.group(0)


def _calls_card(html: str) -> str:
    found = re.search(
        r'<div class="msg approval_request_message wait-calls wait-card".*?(?=\n<div class="msg |\Z)', html, re.S
    )
    assert found, "no card of waiting calls"
    return found.group(0)


# --------------------------------------------------------------------------- the Breakpoints panel


def test_the_panel_lists_breakpoints_in_words_and_adds_one_through_the_form(web, agent):
    page = web.get(f"/agents/{agent.id}/").content.decode()
    assert 'data-tab="tab-breakpoints"' in page and 'id="breakpoints-panel"' in page
    assert "No breakpoints: runs go through without stopping." in page
    for kind in ("model_call", "tool_call", "block_change", "tokens_over", "tool_error"):
        assert f'<option value="{kind}"' in page
    assert "Before every model call" in page and "After a tool failed" in page  # the kinds in words
    assert "before the model reads the error" in page  # and what each does
    assert 'name="tools" value="archival_memory_insert"' in page  # the agent's tools to tick

    html = web.post(
        f"/agents/{agent.id}/breakpoints/add/", {"on": "tool_call", "tools": ["archival_memory_insert"]}
    ).content.decode()
    assert "Before a call of archival_memory_insert" in html and 'id="bp-added"' in html
    html = web.post(f"/agents/{agent.id}/breakpoints/add/", {"on": "tool_call"}).content.decode()
    assert "Before any tool call" in html
    html = web.post(f"/agents/{agent.id}/breakpoints/add/", {"on": "tokens_over", "tokens": "4000"}).content.decode()
    assert "Before a model call whose prompt passes 4000 tokens" in html
    # a kind's fields that do not apply (hidden on the page, still posted) are ignored, not refused
    web.post(f"/agents/{agent.id}/breakpoints/add/", {"on": "model_call", "tools": ["nope"], "tokens": "0"})
    points = _points(agent)
    assert [(p["on"], p["tools"], p["tokens"]) for p in points] == [
        ("tool_call", ["archival_memory_insert"], None),
        ("tool_call", [], None),
        ("tokens_over", [], 4000),
        ("model_call", [], None),
    ]
    page = web.get(f"/agents/{agent.id}/").content.decode()
    assert re.search(r'id="bp-count">4</span>', page)


@pytest.mark.parametrize(
    ("tokens", "told"),
    [
        ("", "Give the number of tokens the prompt must pass"),
        ("many", "Give the number of tokens as a whole number"),
        ("0", "must be at least 1"),
        ("2.5", "Give the number of tokens as a whole number"),
    ],
)
def test_a_bad_token_count_is_told_inline_and_nothing_is_stored(web, agent, tokens, told):
    response = web.post(f"/agents/{agent.id}/breakpoints/add/", {"on": "tokens_over", "tokens": tokens})
    html = response.content.decode()
    assert response.status_code == 200 and told in html
    assert 'id="bp-tokens-error"' in html and 'aria-invalid="true"' in html
    assert '<option value="tokens_over" selected>' in html  # the form keeps what was chosen
    assert _points(agent) == []


def test_an_unknown_kind_or_tool_is_refused_inline(web, agent):
    html = web.post(f"/agents/{agent.id}/breakpoints/add/", {"on": "sometimes"}).content.decode()
    assert "Select a valid choice" in html
    html = web.post(f"/agents/{agent.id}/breakpoints/add/", {"on": "tool_call", "tools": ["nope"]}).content.decode()
    assert "Select a valid choice" in html
    assert _points(agent) == []


def test_a_breakpoint_is_disabled_enabled_and_removed_and_a_stale_panel_is_told(web, agent):
    point = breakpoint_set(agent=agent, data={"on": "model_call"})
    html = web.post(f"/agents/{agent.id}/breakpoints/{point['id']}/toggle/", {}).content.decode()
    assert _points(agent)[0]["enabled"] is False
    assert 'class="bp-item disabled"' in html and ">disabled</span>" in html
    web.post(f"/agents/{agent.id}/breakpoints/{point['id']}/toggle/", {"enabled": "on"})
    assert _points(agent)[0]["enabled"] is True
    html = web.post(f"/agents/{agent.id}/breakpoints/{point['id']}/remove/").content.decode()
    assert _points(agent) == [] and 'id="bp-none"' in html
    html = web.post(f"/agents/{agent.id}/breakpoints/{point['id']}/remove/").content.decode()
    assert "already removed" in html
    html = web.post(f"/agents/{agent.id}/breakpoints/{point['id']}/toggle/", {"enabled": "on"}).content.decode()
    assert "That breakpoint is gone" in html


def test_the_panel_is_only_for_its_owner_posts_only_and_escapes_tool_names(web, api, agent, other_account):
    r = api.post(f"/v1/agents/{agent.id}/breakpoints", {"on": "tool_call", "tools": ["<img src=x onerror=alert(1)>"]})
    assert r.status_code == 201
    html = web.get(f"/agents/{agent.id}/breakpoints/").content.decode()
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert web.get(f"/agents/{agent.id}/breakpoints/add/").status_code == 405
    stranger = Client()
    stranger.force_login(other_account.user)
    assert stranger.get(f"/agents/{agent.id}/breakpoints/").status_code == 404
    assert stranger.post(f"/agents/{agent.id}/breakpoints/add/", {"on": "model_call"}).status_code == 404
    assert len(_points(agent)) == 1
    assert Client().post(f"/agents/{agent.id}/breakpoints/add/", {"on": "model_call"}).status_code == 302


# --------------------------------------------------------------------------- the pause before a model call


def test_a_run_that_waits_before_a_model_call_shows_its_card_and_the_request_it_waits_to_send(
    web, api, agent, fake_llm
):
    breakpoint_set(agent=agent, data={"on": "model_call"})
    out = _say(api, agent, HOSTILE)
    run = Run.objects.get(pk=out["run_id"])
    page = web.get(f"/agents/{agent.id}/").content.decode()
    card = _model_call_card(page)
    assert f'data-run="{run.id}"' in card and 'data-state="waiting"' in card
    assert "Paused before the model call" in card and "before every model call" in card
    assert f"{run.waiting['tokens']} tokens" in card
    assert 'data-pause="continue"' in card and 'data-pause="step"' in card and 'data-pause="stop"' in card
    assert "Edit a block, then Continue: the call is compiled from the state then." in card
    assert 'data-open-tab="tab-context" data-scroll="#next-request"' in card  # the compiled request
    assert 'data-open-tab="tab-memory"' in card
    assert 'id="held-note"' in page and run.id[-8:] in page  # the context panel says it is that call
    assert "<script>alert" not in page
    assert f'hx-get="/agents/{agent.id}/waits/model-call/{run.id}/?shown=waiting"' in card  # it reads itself again
    alone = web.get(f"/agents/{agent.id}/waits/model-call/{run.id}/").content.decode()
    assert 'data-state="waiting"' in alone and "Paused before the model call" in alone
    assert 'id="held-note"' in web.get(f"/agents/{agent.id}/context/").content.decode()

    # Continue: the call goes out, the card says so (and the page no longer draws it)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "You are Alice."}))
    resumed = executor.wait_answer(owner=agent.owner, run_id=run.id)
    assert _ended(resumed.id).stop_reason == "end_turn"
    alone = web.get(f"/agents/{agent.id}/waits/model-call/{run.id}/").content.decode()
    assert 'data-state="continued"' in alone and resumed.id[-8:] in alone and "data-pause" not in alone
    page = web.get(f"/agents/{agent.id}/").content.decode()
    assert "wait-model-call" not in page and 'id="held-note"' not in page


def test_a_pause_card_read_again_and_the_size_the_context_tab_compiles(web, api, agent, fake_llm):
    breakpoint_set(agent=agent, data={"on": "model_call"})
    run = Run.objects.get(pk=_say(api, agent, "what is my name?")["run_id"])
    url = f"/agents/{agent.id}/waits/model-call/{run.id}/"
    page = web.get(f"/agents/{agent.id}/").content.decode()
    card = _model_call_card(page)
    assert f'hx-get="{url}?shown=waiting"' in card and "pauses-changed from:body" in card
    assert 'hx-include="find input[name=asked]"' in card  # once let go, it keeps saying why it paused
    assert web.get(url, {"shown": "waiting"}).status_code == 204
    # the Context tab compiles the held call again (a block edited): it tells the card its size, out of band
    panel = web.get(f"/agents/{agent.id}/context/").content.decode()
    now = int(re.search(r'id="held-note" data-run="[^"]+" data-tokens="(\d+)"', panel).group(1))
    oob = re.search(r"<template>(.*?)</template>", panel, re.S).group(1)
    assert f'id="pause-tokens-{run.id}" hx-swap-oob="true">{now} tokens</span>' in oob
    assert f'id="pause-asked-{run.id}"' in oob and f"{now} tokens" in oob.split('id="pause-asked-')[1]
    assert "<template>" not in page.split('id="context-panel"')[1].split('id="steps-list"')[0]  # the page draws it
    assert f'id="pause-tokens-{run.id}">{now} tokens</span>' in card  # as the tab counts it now

    fake_llm.script(FakeLLM.tool("send_message", {"message": "You are Alice."}))
    resumed = executor.wait_answer(owner=agent.owner, run_id=run.id)
    _ended(resumed.id)
    asked = f"Paused before the model call — before every model call · {now} tokens"
    again = web.get(url, {"shown": "waiting", "asked": asked}).content.decode()
    assert 'data-state="continued"' in again and f'data-asked="{asked}"' in again
    assert f'<div class="small muted pause-was">{asked}</div>' in again and "hx-get" not in again


def test_step_and_stop_show_on_the_card(web, api, agent, fake_llm):
    breakpoint_set(agent=agent, data={"on": "model_call"})
    first = _say(api, agent)["run_id"]
    fake_llm.script(FakeLLM.tool("conversation_search", {"query": "name"}, heartbeat=True))
    stepped = executor.wait_answer(owner=agent.owner, run_id=first, step=True)
    # Step: the model call went out, and the run stops again before the tool call it made
    assert _ended(stepped.id).stop_reason == "requires_approval"
    assert 'data-state="stepped"' in web.get(f"/agents/{agent.id}/waits/model-call/{first}/").content.decode()
    card = _calls_card(web.get(f"/agents/{agent.id}/").content.decode())
    assert "Paused before a call of conversation_search" in card and 'data-bp="step"' in card

    stopped = executor.wait_answer(owner=agent.owner, run_id=stepped.id, stop=True)
    assert stopped.stop_reason == "cancelled"
    card = _calls_card(web.get(f"/agents/{agent.id}/").content.decode())
    assert ">stopped</span>" in card and 'data-bp="step"' not in card

    out = _say(api, agent, "again")  # the model_call breakpoint holds the next run too
    executor.wait_answer(owner=agent.owner, run_id=out["run_id"], stop=True)
    alone = web.get(f"/agents/{agent.id}/waits/model-call/{out['run_id']}/").content.decode()
    assert 'data-state="stopped"' in alone and "without calling the model" in alone


def test_the_model_call_card_is_only_for_its_owner_and_a_run_that_waited_there(
    web, api, agent, fake_llm, other_account
):
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Hi."}))
    plain = _say(api, agent, "hi")["run_id"]
    assert web.get(f"/agents/{agent.id}/waits/model-call/{plain}/").status_code == 404  # ended end_turn: never paused
    breakpoint_set(agent=agent, data={"on": "tool_call", "tools": ["send_message"]})
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Hi."}))
    at_tool = _say(api, agent, "hi")["run_id"]
    assert web.get(f"/agents/{agent.id}/waits/model-call/{at_tool}/").status_code == 404  # waits before a tool call
    stranger = Client()
    stranger.force_login(other_account.user)
    assert stranger.get(f"/agents/{agent.id}/waits/model-call/{at_tool}/").status_code == 404


# --------------------------------------------------------------------------- tool-call breakpoints, edited calls


def test_a_tool_call_breakpoint_card_has_step_and_stop_and_an_approval_card_keeps_its_own(web, api, account, fake_llm):
    agent = make_agent(account.org, name="Debuggee")
    breakpoint_set(agent=agent, data={"on": "tool_call", "tools": ["archival_memory_insert"]})
    fake_llm.script(FakeLLM.tool("archival_memory_insert", {"content": HOSTILE}, heartbeat=True))
    _say(api, agent, "store it")
    page = web.get(f"/agents/{agent.id}/").content.decode()
    card = _calls_card(page)
    assert 'data-breakpoint="tool_call"' in card and "<span>breakpoint</span>" in card
    assert "Paused before a call of archival_memory_insert" in card
    assert "Approve &amp; continue" in card and "Deny (skip it)" in card
    assert 'data-bp="step"' in card and 'data-bp="stop"' in card
    assert "<script>alert" not in page

    careful = make_agent(
        account.org, name="Careful", tool_rules=[{"type": "requires_approval", "tool_name": "archival_memory_insert"}]
    )
    fake_llm.script(FakeLLM.tool("archival_memory_insert", {"content": "x"}, heartbeat=True))
    _say(api, careful, "store it")
    card = _calls_card(web.get(f"/agents/{careful.id}/").content.decode())
    assert "<span>approval request</span>" in card and "waiting for you" in card
    assert "data-bp" not in card and "data-breakpoint" not in card and ">Approve</button>" in card


def test_the_step_inspector_shows_a_call_that_ran_with_edited_arguments(web, api, agent, fake_llm):
    breakpoint_set(agent=agent, data={"on": "tool_call", "tools": ["archival_memory_insert"]})
    fake_llm.script(FakeLLM.tool("archival_memory_insert", {"content": "draft"}, heartbeat=True))
    run_id = _say(api, agent, "store it")["run_id"]
    wait = Run.objects.get(pk=run_id).waiting
    call_id, step_id = wait["calls"][0]["tool_call_id"], wait["step_id"]
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Stored."}))
    edited = {"content": "final <b>fact</b>", "request_heartbeat": True}
    answer = {"type": "approval", "tool_call_id": call_id, "approve": True, "arguments": edited}
    resumed = executor.wait_answer(owner=agent.owner, run_id=run_id, approvals=[answer])
    assert _ended(resumed.id).stop_reason == "end_turn"
    assert list(Passage.objects.filter(agent=agent).values_list("text", flat=True)) == ["final <b>fact</b>"]
    html = web.get(f"/agents/{agent.id}/steps/{step_id}/").content.decode()
    tools = re.search(r'<ul class="step-tools".*?</ul>', html, re.S).group(0)
    assert "ran with edited arguments" in tools and "archival_memory_insert" in tools
    assert "final &lt;b&gt;fact&lt;/b&gt;" in tools and "<b>fact</b>" not in html
    assert "&quot;content&quot;: &quot;draft&quot;" in tools  # the model's own arguments, beside
    # a step whose calls ran as the model wrote them says nothing of the kind
    later = Message.objects.filter(agent=agent, role="tool", name="send_message").first()
    html = web.get(f"/agents/{agent.id}/steps/{later.step_id}/").content.decode()
    assert "ran with edited arguments" not in html


# --------------------------------------------------------------------------- the card's form, posted


def _go(web, agent, run_id: str, go: str, **fields):
    return web.post(f"/agents/{agent.id}/waits/model-call/{run_id}/", {"go": go, **fields})


def test_continue_from_a_card_goes_on_and_a_later_answer_is_refused_with_the_card(web, api, agent, fake_llm):
    from core.agents.breakpoints import breakpoint_clear

    point = breakpoint_set(agent=agent, data={"on": "model_call"})
    held = _say(api, agent, "hello")["run_id"]
    breakpoint_clear(agent=agent, breakpoint_id=point["id"])
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Hello back."}, latency=1.0))
    asked = "Paused before the model call — before every model call · 12 tokens"
    r = _go(web, agent, held, "continue", asked=asked)
    assert r.status_code == 200, r.content
    card = r.content.decode()
    going = re.search(r'data-answer-run="([^"]+)"', card).group(1)
    assert re.search(r'data-state="(answering|continued)"', card) and asked in card  # it keeps saying why it paused

    # another tab's Stop, while it goes on or after: refused (422), the card saying why and what happened
    r = _go(web, agent, held, "stop")
    assert r.status_code == 422 and "Not sent" in r.content.decode()
    assert _ended(going).stop_reason == "end_turn"
    assert Message.objects.filter(agent=agent, role="tool", name="send_message").exists()
    r = _go(web, agent, held, "continue")
    late = r.content.decode()
    assert r.status_code == 422 and "no longer waits" in late and 'data-state="continued"' in late
    assert "data-pause" not in late
    assert Run.objects.get(pk=held).stop_reason == "requires_approval"
    # the answering run names the wait it answers; one stored before the rename (`resumes`) still reads
    inputs = Run.objects.get(pk=going).input_messages
    assert inputs[0]["wait_run_id"] == held
    inputs[0]["resumes"] = inputs[0].pop("wait_run_id")
    Run.objects.filter(pk=going).update(input_messages=inputs)
    card = web.get(f"/agents/{agent.id}/waits/model-call/{held}/").content.decode()
    assert 'data-state="continued"' in card and going[-8:] in card


def test_stop_from_a_card_ends_the_pause(web, api, agent, fake_llm):
    breakpoint_set(agent=agent, data={"on": "model_call"})
    held = _say(api, agent, "hello")["run_id"]
    r = _go(web, agent, held, "stop")
    assert r.status_code == 200, r.content
    assert 'data-state="stopped"' in r.content.decode() and "without calling the model" in r.content.decode()
    assert Run.objects.get(pk=held).stop_reason == "cancelled"
    assert fake_llm.chat_requests == []  # the model was never called


def test_a_malformed_continue_is_refused_before_reaching_the_run(web, api, agent, fake_llm, other_account):
    breakpoint_set(agent=agent, data={"on": "model_call"})
    held = _say(api, agent, "hello")["run_id"]
    r = _go(web, agent, held, "jump")
    assert r.status_code == 422 and "Continue, Step or Stop?" in r.content.decode()
    assert 'data-state="waiting"' in r.content.decode()
    assert _go(web, agent, "run-nope", "continue").status_code == 404
    other = make_agent(agent.owner, name="Other")
    assert _go(web, other, held, "continue").status_code == 404  # a run of another agent is not its card's
    stranger = Client()
    stranger.force_login(other_account.user)
    assert stranger.post(f"/agents/{agent.id}/waits/model-call/{held}/", {"go": "stop"}).status_code == 404
    assert Run.objects.get(pk=held).waiting_until is not None
    assert fake_llm.chat_requests == []


def test_step_at_a_tool_call_breakpoint_runs_the_calls_as_edited_from_the_card(web, api, agent, fake_llm):
    breakpoint_set(agent=agent, data={"on": "tool_call", "tools": ["archival_memory_insert"]})
    fake_llm.script(FakeLLM.tool("archival_memory_insert", {"content": "draft"}, heartbeat=True))
    out = _say(api, agent, "remember it")
    ask = next(m for m in out["messages"] if m["message_type"] == "approval_request_message")
    call_id = ask["tool_call"]["tool_call_id"]
    url = f"/agents/{agent.id}/waits/calls/{ask['id']}/"
    r = web.post(url, {"go": "step", f"arguments:{call_id}": "{not json"})
    assert r.status_code == 422 and "not valid JSON" in r.content.decode() and "{not json" in r.content.decode()
    assert Run.objects.get(pk=out["run_id"]).waiting_until is not None  # nothing was taken
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Stored."}))
    r = web.post(url, {"go": "step", f"arguments:{call_id}": '{"content": "edited", "request_heartbeat": true}'})
    assert r.status_code == 200, r.content
    going = re.search(r'data-answer-run="([^"]+)"', r.content.decode()).group(1)
    _ended(going)
    assert list(Passage.objects.filter(agent=agent).values_list("text", flat=True)) == ["edited"]
