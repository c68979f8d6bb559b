"""A run seen whole, server side: the run view draws its timeline (model call, each tool call with its sandbox, the
commit, a wait for a person) and its graph (steps numbered within the conversation, tool nodes, another agent's run
as a branch linking into that agent's steps), with the trace id always shown and a link only under TRACE_UI_URL."""

import re

import pytest

from core.models import Run, Step
from core.runs.runner import run_agent
from core.telemetry import tracing
from tests.factories import make_agent
from tests.fake_llm import FakeLLM

pytestmark = pytest.mark.django_db(transaction=True)
WAIT = "send_message_to_agent_and_wait_for_reply"


def _send(agent, text="hi"):
    return run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": text}])


def _run_html(web, agent, run_id) -> str:
    r = web.get(f"/agents/{agent.id}/runs/{run_id}/")
    assert r.status_code == 200
    return r.content.decode()


def test_a_run_shows_its_timeline_and_graph_with_steps_numbered_in_the_conversation(web, account, fake_llm, settings):
    settings.TRACE_UI_URL = ""
    agent = make_agent(account.org, name="solo")
    fake_llm.script(FakeLLM.tool("send_message", {"message": "one"}))
    _send(agent, "first")
    fake_llm.script(
        FakeLLM.tool("archival_memory_insert", {"content": "note"}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "two"}),
    )
    second = _send(agent, "second")
    html = _run_html(web, agent, second.run_id)
    # the graph numbers this run's steps as the thread's 2nd and 3rd, not "step 0" and "step 1" again
    titles = re.findall(r'<text [^>]*class="rg-title">(step [^<]*)</text>', html)
    assert titles == ["step 2 · model call", "step 3 · model call"]
    rows = re.findall(r'<li class="rt-row rt-(\w+)', html)
    assert rows.count("model") == 2 and "tool" in rows and "commit" in rows
    assert "archival_memory_insert" in html and "sandbox " in html
    assert tracing.trace_id_hex(second.run_id) in html and "open ↗" not in html
    nodes = re.findall(r'data-node="(\w+)"', html)
    assert nodes[0] == "run" and nodes.count("model") == 2 and nodes.count("tool") == 2
    step = Step.objects.get(run_id=second.run_id, index=0)
    assert f'data-open-step="{step.id}"' in html and f"?step={step.id}" in html
    card = web.get(f"/agents/{agent.id}/steps/{step.id}/").content.decode()
    assert "<strong>Step 2</strong>" in card and "step 0 of its run" in card
    last = Step.objects.get(run_id=second.run_id, index=1)  # numbered among all its thread's steps, not the card's few
    card = web.get(f"/agents/{agent.id}/steps/{last.id}/").content.decode()
    assert "<strong>Step 3</strong>" in card and "step 1 of its run" in card and "What changed since step 2" in card


def test_the_trace_links_out_only_when_a_trace_ui_is_set(web, account, fake_llm, settings):
    settings.TRACE_UI_URL = "https://traces.example/t/{trace_id}"
    agent = make_agent(account.org, name="solo")
    fake_llm.script(FakeLLM.tool("send_message", {"message": "one"}))
    run = _send(agent)
    html = _run_html(web, agent, run.run_id)
    assert f'href="https://traces.example/t/{tracing.trace_id_hex(run.run_id)}"' in html


def test_a_supervisors_run_branches_to_the_workers_run_and_links_into_its_steps(web, account, fake_llm):
    boss = make_agent(account.org, name="supervisor", include_multi_agent_tools=True)
    worker = make_agent(account.org, name="worker")
    fake_llm.script(
        FakeLLM.tool(WAIT, {"message": "do it", "other_agent_id": worker.id}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "done"}),
        FakeLLM.tool("send_message", {"message": "worker said done"}),
    )
    run = _send(boss)
    worker_run = Run.objects.get(agent=worker)
    worker_step = Step.objects.get(run=worker_run)
    html = _run_html(web, boss, run.run_id)
    assert "run of worker" in html  # the timeline's row for the worker's run
    nodes = re.findall(r'data-node="(\w+)" data-agent="([\w-]+)"', html)
    assert ("run", worker.id) in nodes and ("model", worker.id) in nodes
    # the worker's step opens in the worker's workspace, not in this one's inspector
    assert f'href="/agents/{worker.id}/?step={worker_step.id}"' in html
    assert f'data-open-step="{worker_step.id}"' not in html
    assert html.count('class="rg-edge"') == len(nodes) - 1  # a tree: every node but the first has one way in


def _thread_say(api, thread, text):
    body = {"messages": [{"type": "message", "role": "user", "content": [{"type": "text", "text": text}]}]}
    r = api.post(f"/v1/conversations/{thread}/messages", {**body, "streaming": False})
    assert r.status_code == 200, r.content
    return r.json()


def test_runs_are_labelled_with_their_thread_and_filter_by_it(web, api, account, fake_llm):
    agent = make_agent(account.org, name="threads")
    conv = api.post(f"/v1/conversations/?agent_id={agent.id}", {"summary": "planning trip"}).json()
    fake_llm.script(FakeLLM.tool("send_message", {"message": "own"}))
    _send(agent, "in the own thread")
    fake_llm.script(FakeLLM.tool("send_message", {"message": "there"}))
    _thread_say(api, conv["id"], "in planning")
    every = web.get(f"/agents/{agent.id}/runs/").content.decode()
    labels = re.findall(r'<div class="small run-thread"[^>]*>([^<]*)</div>', every)
    assert sorted(labels) == ["Agent&#x27;s own thread", "planning trip"]
    one = web.get(f"/agents/{agent.id}/runs/?thread={conv['id']}").content.decode()
    assert re.findall(r'<div class="small run-thread"[^>]*>([^<]*)</div>', one) == ["planning trip"]
    own = web.get(f"/agents/{agent.id}/runs/?thread=own").content.decode()
    assert re.findall(r'<div class="small run-thread"[^>]*>([^<]*)</div>', own) == ["Agent&#x27;s own thread"]
    bad = web.get(f"/agents/{agent.id}/runs/?thread=conv-nope")
    assert bad.status_code == 400 and b"conv-nope" in bad.content
    # the conversation picker (htmx on its select) opens the chosen thread, or the agent's own
    page = web.get(f"/agents/{agent.id}/").content.decode()
    assert f'<select name="conversation" id="thread-select" hx-get="/agents/{agent.id}/" hx-trigger="change"' in page
    picked = web.get(f"/agents/{agent.id}/", {"conversation": conv["id"]}, HTTP_HX_REQUEST="true")
    assert picked["HX-Redirect"] == f"/agents/{agent.id}/?conversation={conv['id']}" and picked.content == b""
    assert (
        web.get(f"/agents/{agent.id}/", {"conversation": ""}, HTTP_HX_REQUEST="true")["HX-Redirect"]
        == f"/agents/{agent.id}/"
    )


def test_the_header_says_when_another_thread_waits_for_a_person(web, api, account, fake_llm):
    rules = [{"type": "requires_approval", "tool_name": "archival_memory_insert"}]
    agent = make_agent(account.org, name="careful", tool_rules=rules)
    conv = api.post(f"/v1/conversations/?agent_id={agent.id}", {"summary": "side thread"}).json()
    url = f"/agents/{agent.id}/threads/waiting/"
    assert web.get(url).content.decode().strip() == ""
    fake_llm.script(FakeLLM.tool("archival_memory_insert", {"content": "x"}, heartbeat=True))
    _thread_say(api, conv["id"], "remember it")
    note = web.get(url).content.decode()  # seen from the agent's own thread
    assert "Another conversation of this agent waits for you (an approval)" in note
    assert f"?conversation={conv['id']}" in note and "side thread" in note
    assert web.get(f"{url}?conversation={conv['id']}").content.decode().strip() == ""  # not of its own thread


def test_branch_here_makes_a_thread_holding_the_context_up_to_that_message(web, account, fake_llm):
    from core.models import Conversation, Message

    agent = make_agent(account.org, name="brancher")
    fake_llm.script(FakeLLM.tool("send_message", {"message": "first answer"}))
    _send(agent, "first question")
    fake_llm.script(FakeLLM.tool("send_message", {"message": "second answer"}))
    _send(agent, "second question")
    asked = Message.objects.get(agent=agent, role="user", text__contains="first question")
    page = web.get(f"/agents/{agent.id}/").content.decode()
    assert page.count('class="small ghost branch-here"') == 4  # each question and each answer
    r = web.post(f"/agents/{agent.id}/conversations/branch/", {"message_id": asked.id}, HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    conv = Conversation.objects.get(agent=agent)
    assert r["HX-Redirect"] == f"/agents/{agent.id}/?conversation={conv.id}"
    kept = list(Message.objects.filter(id__in=conv.message_ids[1:]).values_list("text", flat=True))
    assert kept == ["first question"]
    # an answer's branch keeps the send_message call's tool return with it
    answer = Message.objects.filter(agent=agent, role="assistant", conversation=None).order_by("seq").first()
    web.post(f"/agents/{agent.id}/conversations/branch/", {"message_id": answer.id})
    newest = Conversation.objects.filter(agent=agent).order_by("-created_at").first()
    roles = [Message.objects.get(pk=i).role for i in newest.message_ids[1:]]
    assert roles == ["user", "assistant", "tool"]
    bad = web.post(f"/agents/{agent.id}/conversations/branch/", {"message_id": "message-nope"})
    assert bad.status_code == 400 and b"message-nope" in bad.content
