"""The approval card, server side: a reply whose calls wait shows in the workspace as a card (the calls' arguments to
edit, Approve / Deny, the calls that run with the answers, the expiry), fetched alone by the page when a run pauses
or a wait ends; after the answer, a cancel or an expiry it shows what was decided, also after a reload; the runs
view says what a run waits for; everything the model wrote is escaped."""

import json
import re
from datetime import timedelta

import pytest
from django.template.loader import render_to_string
from django.test import Client
from django.utils import timezone

from core.models import Message, Run
from core.runs import waits
from core.runs.request import RunRequest
from core.web.runs import notice_context
from tests.factories import make_agent
from tests.fake_llm import FakeLLM

pytestmark = pytest.mark.django_db(transaction=True)
APPROVE_INSERT = [{"type": "requires_approval", "tool_name": "archival_memory_insert"}]
HOSTILE = 'the code is <script>alert("x")</script> & <b>42</b>'


@pytest.fixture
def agent(account, fake_llm):
    return make_agent(account.org, name="Careful", tool_rules=APPROVE_INSERT)


def _pause(api, agent, fake_llm, *replies, content=HOSTILE):
    fake_llm.script(
        replies[0] if replies else FakeLLM.tool("archival_memory_insert", {"content": content}, heartbeat=True)
    )
    r = api.post(f"/v1/agents/{agent.id}/messages", {"messages": [{"role": "user", "content": "remember it"}]})
    assert r.status_code == 200, r.content
    ask = next(m for m in r.json()["messages"] if m["message_type"] == "approval_request_message")
    return r.json()["run_id"], ask


def _answer(api, agent, approvals):
    r = api.post(f"/v1/agents/{agent.id}/messages", {"messages": [{"type": "approval", "approvals": approvals}]})
    assert r.status_code == 200, r.content
    return r.json()


def _card(html: str) -> str:
    found = re.search(
        r'<div class="msg approval_request_message wait-calls wait-card".*?(?=\n<div class="msg |\Z)', html, re.S
    )
    assert found, "no approval card"
    return found.group(0)


def test_a_waiting_reply_is_a_card_with_editable_arguments_buttons_and_the_expiry(web, api, agent, fake_llm):
    run_id, ask = _pause(api, agent, fake_llm)
    page = web.get(f"/agents/{agent.id}/").content.decode()
    card = _card(page)
    assert 'data-state="waiting"' in card and f'data-id="{ask["id"]}"' in card
    assert "waiting for you" in card and "Nothing runs until you answer" in card
    assert "archival_memory_insert" in card and 'class="code approval-args"' in card
    assert 'data-answer="approve"' in card and 'data-answer="deny"' in card and 'class="approval-reason"' in card
    expires = Run.objects.get(pk=run_id).waiting_until
    assert f"expires {expires:%b} {expires.day}, {expires:%H:%M}" in card
    # the model's words are text: escaped in the textarea, never markup
    assert "<script>alert" not in page and "<b>42</b>" not in page
    assert "&lt;script&gt;alert(\\&quot;x\\&quot;)&lt;/script&gt;" in card
    assert '"thinking"' not in card  # shown as the reasoning above, not as an argument to edit
    # the card knows where to read itself again
    assert f'hx-get="/agents/{agent.id}/waits/calls/{ask["id"]}/?shown=waiting"' in card
    alone = web.get(f"/agents/{agent.id}/waits/calls/{ask['id']}/")
    assert alone.status_code == 200 and 'data-state="waiting"' in alone.content.decode()


def test_the_card_alone_is_only_for_its_owner_and_only_for_a_reply_that_waited(
    web, api, agent, fake_llm, other_account
):
    _, ask = _pause(api, agent, fake_llm)
    user_row = Message.objects.filter(agent=agent, role="user").first()
    assert web.get(f"/agents/{agent.id}/waits/calls/{user_row.id}/").status_code == 404
    stranger = Client()
    stranger.force_login(other_account.user)
    assert stranger.get(f"/agents/{agent.id}/waits/calls/{ask['id']}/").status_code == 404
    assert Client().get(f"/agents/{agent.id}/waits/calls/{ask['id']}/").status_code == 302  # to the login page


def test_approved_with_edited_arguments_shows_what_ran_also_after_a_reload(web, api, agent, fake_llm):
    _, ask = _pause(api, agent, fake_llm)
    call_id = ask["tool_call"]["tool_call_id"]
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Saved."}))
    edited = {"content": "the code is <i>43</i>", "request_heartbeat": True}
    _answer(api, agent, [{"type": "approval", "tool_call_id": call_id, "approve": True, "arguments": edited}])
    card = web.get(f"/agents/{agent.id}/waits/calls/{ask['id']}/").content.decode()
    assert 'data-state="answered"' in card and "approved with edited arguments" in card
    assert "the code is &lt;i&gt;43&lt;/i&gt;" in card and "<i>43</i>" not in card
    assert "approval-args" not in card and 'data-answer="approve"' not in card  # nothing left to answer
    page = web.get(f"/agents/{agent.id}/").content.decode()
    assert 'data-state="answered"' in _card(page)
    # the stored answer is the person's line in the conversation, naming the call
    answer = re.search(r'<div class="msg approval_response_message".*?</div>\s*</div>', page, re.S).group(0)
    assert "approved, edited" in answer and "archival_memory_insert" in answer
    assert "Saved." in page


def test_a_card_read_again_is_204_while_it_still_waits_and_keeps_a_refusal_once_decided(web, api, agent, fake_llm):
    _, ask = _pause(api, agent, fake_llm)
    url = f"/agents/{agent.id}/waits/calls/{ask['id']}/"
    card = _card(web.get(f"/agents/{agent.id}/").content.decode())
    # the card reads itself (htmx) when a wait may have ended, one read at a time, saying what it shows
    assert f'hx-get="{url}?shown=waiting"' in card and 'hx-trigger="wait-check, waits-changed from:body"' in card
    assert 'hx-sync="this:queue last"' in card and 'hx-sync="closest .wait-card:replace"' in card  # an answer wins
    still = web.get(url, {"shown": "waiting"})
    assert still.status_code == 204 and still.content == b""  # the page keeps its card and what is typed in it
    assert 'data-state="waiting"' in web.get(url).content.decode()  # asked without saying: drawn
    call_id = ask["tool_call"]["tool_call_id"]
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Saved."}))
    _answer(api, agent, [{"type": "approval", "tool_call_id": call_id, "approve": True}])
    told = "Not sent: already answered <elsewhere>"
    read = web.get(url, {"shown": "waiting", "error": told})
    again = read.content.decode()
    assert read.status_code == 200 and 'data-state="answered"' in again
    assert "Not sent: already answered &lt;elsewhere&gt;" in again  # the refusal it said stays told, as text
    assert "hx-get" not in again  # decided: nothing more to read


def test_denied_with_a_reason_shows_the_reason_escaped(web, api, agent, fake_llm):
    _, ask = _pause(api, agent, fake_llm)
    call_id = ask["tool_call"]["tool_call_id"]
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Understood."}))
    _answer(api, agent, [{"type": "approval", "tool_call_id": call_id, "approve": False, "reason": "not <em>now</em>"}])
    page = web.get(f"/agents/{agent.id}/").content.decode()
    card = _card(page)
    assert 'data-verdict="denied"' in card and "Reason: not &lt;em&gt;now&lt;/em&gt;" in card
    assert "<em>now</em>" not in page


def test_several_calls_one_card_with_send_answers_and_the_deferred_call(web, api, account, fake_llm):
    agent = make_agent(
        account.org,
        tool_rules=[
            {"type": "requires_approval", "tool_name": "archival_memory_insert"},
            {"type": "requires_approval", "tool_name": "core_memory_append"},
        ],
    )
    _, ask = _pause(
        api,
        agent,
        fake_llm,
        FakeLLM.tools(
            ("archival_memory_insert", {"content": "first", "request_heartbeat": True}),
            ("core_memory_append", {"label": "human", "content": "Likes tea.", "request_heartbeat": True}),
            ("conversation_search", {"query": "tea", "request_heartbeat": True}),
        ),
    )
    card = _card(web.get(f"/agents/{agent.id}/").content.decode())
    assert card.count('class="approval-call"') == 2 and "data-send-answers" in card
    assert "Will run with the answers:</span> <code>conversation_search</code>" in card
    assert "these 2 tools" in card


def test_a_cancelled_or_expired_wait_says_so(web, api, agent, fake_llm, account):
    _, ask = _pause(api, agent, fake_llm)
    api.post(f"/v1/agents/{agent.id}/messages/cancel", {})
    card = web.get(f"/agents/{agent.id}/waits/calls/{ask['id']}/").content.decode()
    assert 'data-state="cancelled"' in card and "denied · cancelled" in card

    other = make_agent(account.org, name="Later", tool_rules=APPROVE_INSERT)
    run_id, ask = _pause(api, other, fake_llm)
    Run.objects.filter(pk=run_id).update(waiting_until=timezone.now() - timedelta(seconds=1))
    waits.expire_due()
    card = web.get(f"/agents/{other.id}/waits/calls/{ask['id']}/").content.decode()
    assert 'data-state="expired"' in card and "nobody answered in time" in card


def test_the_runs_view_says_what_a_run_waits_for_and_until_when(web, api, agent, fake_llm):
    run_id, _ = _pause(api, agent, fake_llm)
    html = web.get(f"/agents/{agent.id}/runs/").content.decode()
    row = re.search(rf'<tbody class="run-row" data-run="{run_id}".*?</tbody>', html, re.S).group(0)
    assert 'data-status="waiting"' in row and "waiting for approval" in row
    assert "<code>archival_memory_insert</code>" in row and "expires " in row
    assert f'data-cancel-run="{run_id}" data-waiting' in row
    api.post(f"/v1/agents/{agent.id}/messages/cancel", {})
    html = web.get(f"/agents/{agent.id}/runs/").content.decode()
    row = re.search(rf'<tbody class="run-row" data-run="{run_id}".*?</tbody>', html, re.S).group(0)
    assert "waiting for approval" not in row and "cancelled" in row


def test_an_answers_run_lists_its_answer_and_leaves_nothing_to_retry(web, api, agent, fake_llm):
    _, ask = _pause(api, agent, fake_llm)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Fine."}))
    out = _answer(
        api, agent, [{"type": "approval", "tool_call_id": ask["tool_call"]["tool_call_id"], "approve": False}]
    )
    html = web.get(f"/agents/{agent.id}/runs/").content.decode()
    assert "answer: 1 denied" in html
    notice = render_to_string(
        "core/_run_notice.html", {"agent": agent, **notice_context(Run.objects.get(pk=out["run_id"]))}
    )
    assert "data-retry" not in notice


def test_an_answer_in_progress_shows_as_answering_and_a_second_answer_is_told(web, api, agent, fake_llm):
    from django.db import transaction

    from core.errors import Conflict
    from core.runs.runner import run_start
    from core.web.waits import answer_refused

    _, ask = _pause(api, agent, fake_llm)
    approve = {"type": "approval", "tool_call_id": ask["tool_call"]["tool_call_id"], "approve": True}
    with transaction.atomic():  # the first answer, claimed and not yet run: the wait is not taken until it commits
        first = run_start(
            RunRequest(
                owner=agent.owner, agent_id=agent.id, input_messages=[{"type": "approval", "approvals": [approve]}]
            )
        )
    card = web.get(f"/agents/{agent.id}/waits/calls/{ask['id']}/").content.decode()
    assert 'data-state="answering"' in card and first.id[-8:] in card and "approval-args" not in card
    refused = answer_refused(
        agent_id=agent.id, thread=None, message_id=ask["id"], exc=Conflict("busy", detail={"run_id": first.id})
    )
    assert refused["code"] == "ALREADY_ANSWERED" and refused["run_id"] == first.id
    assert "already answered in another tab" in refused["message"] and "being run" in refused["message"]
    # a refusal of its own (here: another conversation's run holds the agent) keeps its text
    Run.objects.filter(pk=first.pk).update(status="failed")
    other = answer_refused(
        agent_id=agent.id, thread=None, message_id=ask["id"], exc=Conflict("Agent is busy", detail={"run_id": "r"})
    )
    assert other == {"code": "BUSY", "message": "Agent is busy", "run_id": "r"}


def test_the_card_is_its_form_an_answer_posted_is_checked_taken_once_and_drawn(web, api, agent, fake_llm):
    run_id, ask = _pause(api, agent, fake_llm, content="the code is 42")
    call_id = ask["tool_call"]["tool_call_id"]
    url = f"/agents/{agent.id}/waits/calls/{ask['id']}/"
    for typed, told in (('{"content": ', "not valid JSON"), ("[1, 2]", "must be a JSON object")):
        r = web.post(url, {f"choice:{call_id}": "approve", f"arguments:{call_id}": typed, f"reason:{call_id}": "ok"})
        card = r.content.decode()
        assert r.status_code == 422 and told in card and 'data-state="waiting"' in card
        assert 'aria-invalid="true"' in card and 'value="ok"' in card  # what was typed stays
    assert r.content.decode().count("[1, 2]") == 1
    r = web.post(url, {f"reason:{call_id}": "no choice"})  # Enter in a field: nothing chosen, nothing sent
    assert r.status_code == 422 and "Choose Approve or Deny" in r.content.decode()
    assert Run.objects.get(pk=run_id).waiting_until is not None

    fake_llm.script(FakeLLM.tool("send_message", {"message": "Saved."}))
    edited = {"content": "the code is 43", "request_heartbeat": True}
    r = web.post(url, {f"choice:{call_id}": "approve", f"arguments:{call_id}": json.dumps(edited)})
    assert r.status_code == 200, r.content
    going = re.search(r'data-answer-run="([^"]+)"', r.content.decode()).group(1)
    from core.runs import executor

    assert executor.run_wait(run=Run.objects.get(pk=going), timeout=30).stop_reason == "end_turn"
    r = web.post(url, {f"choice:{call_id}": "deny", f"reason:{call_id}": "late"})  # a second tab, too late
    card = r.content.decode()
    assert r.status_code == 422 and "already answered in another tab" in card
    assert 'data-state="answered"' in card and "approved with edited arguments" in card and "the code is 43" in card
