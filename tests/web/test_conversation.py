"""The workspace as a debugger, server side: which messages are in the context window and what evicted the others,
system notices, imported conversations, the readable payload and its per-step diff, the runs view, the notice of a
failed run, and saves that are refused (a model no provider serves, rules naming missing tools)."""

import json
import re

from django.template.loader import render_to_string

from core.agents.services import BlockInput
from core.models import Agent, Message, Run, Step
from core.runs.runner import run_agent
from core.web.runs import notice_context
from tests.factories import make_agent
from tests.fake_llm import FakeLLM


def _say(agent, text):
    return run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": text}])


def _overflowed(org, turns: int = 14):
    agent = make_agent(
        org,
        system="You are a concise test agent. Reply with send_message.",
        include_base_tools=False,
        tools=["send_message", "conversation_search"],
        context_window_limit=2000,
        memory_blocks=[BlockInput(label="human", value="Name: Alice")],
    )
    for i in range(turns):
        _say(agent, f"Turn {i}: remember marker{i:02d}. " + "Filler to make the turn long enough to matter. " * 3)
    agent.refresh_from_db()
    assert Message.objects.filter(agent=agent, kind="summary").exists(), "the window never overflowed"
    return agent


def _marks(html: str) -> dict[str, str]:
    return dict(re.findall(r'data-id="([^"]+)" data-seq="\d+"[^>]*data-ctx="(in|out)"', html))


def test_history_marks_the_window_and_what_evicted_the_rest(web, account, fake_llm):
    agent = _overflowed(account.org)
    summary = Message.objects.filter(agent=agent, kind="summary").order_by("seq").first()
    step = Step.objects.get(pk=summary.step_id)
    html = web.get(f"/agents/{agent.id}/history/?before=100000").content.decode()
    marks = _marks(html)
    in_window = set(agent.message_ids)
    assert marks and all((state == "in") == (mid in in_window) for mid, state in marks.items())
    assert "out" in marks.values() and "in" in marks.values()
    # the summary is a divider with the summarizer step, not a message from "you"
    assert 'class="divider summary"' in html and f'data-step="{step.id}"' in html and f"step {step.index}" in html
    first = Message.objects.get(agent=agent, role="user", kind="", text__contains="marker00")
    html = web.get(f"/agents/{agent.id}/history/?before={first.seq + 1}").content.decode()
    item = re.search(rf'data-id="{first.id}".*?</div>\s*</div>', html, re.S).group(0)
    assert 'data-ctx="out"' in item and "evicted at" in item and f'data-step="{step.id}"' in item

    marks_json = web.get(f"/agents/{agent.id}/window/").json()
    assert set(marks_json["in_context"]) == in_window
    assert marks_json["evicted"][first.id]["step_id"] == step.id


def test_a_reset_is_a_divider_and_marks_older_messages_out(web, account, fake_llm):
    agent = make_agent(account.org)
    _say(agent, "before the reset")
    web.post(f"/agents/{agent.id}/reset/")
    html = web.get(f"/agents/{agent.id}/").content.decode()
    assert 'class="divider reset"' in html and "Conversation reset" in html
    said = Message.objects.get(agent=agent, role="user", text="before the reset")
    assert _marks(html)[said.id] == "out"
    assert "out · reset" in html


def test_injected_messages_are_notices_and_imported_v1_json_shows_its_text(web, account, fake_llm):
    from core.agents.agentfile.importer import agentfile_import
    from core.agents.agentfile.parse import parse_agent_file
    from tests.core.agentfile_docs import edited, v1_doc

    def letta_v1_wrapping(doc):  # how Letta v1 stored what the agent was told
        doc["messages"][1]["content"] = [
            {
                "type": "text",
                "text": json.dumps({"type": "user_message", "message": "roll a <b>d20</b>", "time": "now"}),
            }
        ]
        doc["messages"].insert(
            2,
            {
                "role": "user",
                "content": [{"type": "text", "text": json.dumps({"type": "login", "last_login": "never"})}],
            },
        )
        doc["in_context_message_indices"] = list(range(len(doc["messages"])))

    result = agentfile_import(owner=account.org, parsed=parse_agent_file(edited(v1_doc(), letta_v1_wrapping)))
    imported = Agent.objects.get(id=result.agent_ids[0])
    page = web.get(f"/agents/{imported.id}/").content.decode()
    html = page[page.index('<div id="history">') : page.index('<div id="live">')]  # the payload keeps the JSON, as sent
    assert "roll a &lt;b&gt;d20&lt;/b&gt;" in html and "&quot;type&quot;: &quot;user_message&quot;" not in html
    assert 'data-type="notice"' in html and "<span>login</span>" in html
    assert 'data-type="tool_return_message"' in html and "roll_dice" in html

    agent = make_agent(account.org)
    fake_llm.script(
        FakeLLM.tool("conversation_search", {"query": "x"}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "done"}),
    )
    _say(agent, "search please")
    page = web.get(f"/agents/{agent.id}/").content.decode()
    html = page[page.index('<div id="history">') : page.index('<div id="live">')]
    assert 'data-type="heartbeat"' in html
    assert len(re.findall(r"^\s*you\s*$", html, re.M)) == 1  # the heartbeat is not shown as the person's message


def test_step_shows_readable_parts_and_the_memory_change_as_a_diff(web, account, fake_llm):
    agent = make_agent(account.org)
    fake_llm.script(
        FakeLLM.tool("core_memory_append", {"label": "human", "content": "Loves oolong tea."}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "Noted."}),
    )
    _say(agent, "I love oolong")
    first, second = Step.objects.filter(agent=agent, kind="agent").order_by("created_at")
    html = web.get(f"/agents/{agent.id}/steps/{second.id}/").content.decode()
    # numbered within the conversation: the first run's two steps are its 1st and 2nd
    assert "<strong>Step 2</strong>" in html and "What changed since step 1" in html
    assert 'class="part part-tool"' in html and 'class="part part-message"' in html  # each tool and message apart
    diff = re.search(r'<div id="step-text-diff">(.*?)<h3>Request sent', html, re.S).group(1)
    assert re.search(r'<span class="add">\+ .*Loves oolong tea\.', diff)  # the block change, as added text
    assert "core_memory_append" in diff  # the new messages of the step
    # the next request is readable too: the core memory section with its own token count
    ctx = web.get(f"/agents/{agent.id}/context/").content.decode()
    assert re.search(r'data-key="core_memory" data-tokens="\d+"', ctx) and "Loves oolong tea." in ctx
    block = re.search(r'data-key="block:human" data-tokens="(\d+)".*?</details>', ctx, re.S)  # each block apart
    assert block and int(block.group(1)) > 0 and "Loves oolong tea." in block.group(0)


def test_runs_view_lists_runs_with_outcome_and_steps(web, account, fake_llm):
    agent = make_agent(account.org)
    fake_llm.script(FakeLLM.error(500, "upstream exploded"))
    _say(agent, "this one fails")
    _say(agent, "this one works")
    html = web.get(f"/agents/{agent.id}/runs/").content.decode()
    failed, done = Run.objects.get(status="failed"), Run.objects.get(status="completed")
    assert html.index(done.id) < html.index(failed.id)  # newest first
    assert "upstream exploded" in html and "llm_api_error" in html
    # each row's steps are read when it is opened (its checkbox: kept as it is when the table updates)
    assert f'hx-get="/agents/{agent.id}/runs/{done.id}/" hx-trigger="intersect once"' in html
    assert f'<input type="checkbox" class="run-toggle" id="run-open-{done.id}" hx-preserve' in html
    steps = web.get(f"/agents/{agent.id}/runs/{done.id}/").content.decode()
    for step in Step.objects.filter(run=done):
        assert f'data-step="{step.id}"' in steps and f"step {step.index}" in steps
    # the failed run's notice (as the socket sends it, core.web.live) gives the undelivered message back with a Retry
    notice = render_to_string("core/_run_notice.html", {"agent": agent, **notice_context(failed)})
    assert "this one fails" in notice and "data-retry" in notice and "upstream exploded" in notice
    assert "data-retry" not in render_to_string("core/_run_notice.html", {"agent": agent, **notice_context(done)})


def test_saving_a_model_no_provider_serves_is_refused_with_the_available_ones(web, account, fake_llm):
    agent = make_agent(account.org)
    form = {
        "name": "Ada",
        "model": "openai/not-a-model",
        "system": "s",
        "temperature": "0.7",
        "max_steps": "10",
        "context_window_limit": "8000",
        "tags": "",
    }
    html = web.post(f"/agents/{agent.id}/settings/", form).content.decode()
    assert "does not serve" in html and "openai/fake-model" in html
    assert Agent.objects.get(id=agent.id).model == "openai/fake-model"
    html = web.post(f"/agents/{agent.id}/settings/", {**form, "model": "nobody/x"}).content.decode()
    assert "No configured provider serves" in html and "openai/fake-model" in html
    html = web.post(
        f"/agents/{agent.id}/settings/", {**form, "model": "openai/fake-model", "max_steps": "12"}
    ).content.decode()
    assert "Saved." in html and Agent.objects.get(id=agent.id).max_steps == 12


def test_rules_naming_tools_the_agent_lacks_are_refused(web, account):
    agent = make_agent(account.org)
    rules = [{"type": "constrain_child_tools", "tool_name": "send_message", "children": ["web_search"]}]
    html = web.post(f"/agents/{agent.id}/rules/", {"tool_rules": json.dumps(rules)}).content.decode()
    assert "web_search" in html and "does not have" in html
    assert Agent.objects.get(id=agent.id).tool_rules == []
    ok = [{"type": "exit_loop", "tool_name": "send_message"}]
    assert "Saved." in web.post(f"/agents/{agent.id}/rules/", {"tool_rules": json.dumps(ok)}).content.decode()


def test_history_and_runs_cost_the_same_queries_however_long_the_history(web, account, fake_llm):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    agent = make_agent(account.org)

    def count(url: str) -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert web.get(url).status_code == 200
        return len(ctx.captured_queries)

    _say(agent, "one")
    urls = [
        f"/agents/{agent.id}/history/?before=100000",
        f"/agents/{agent.id}/runs/",
        f"/agents/{agent.id}/steps/",
        f"/agents/{agent.id}/window/",
    ]
    before = [count(u) for u in urls]
    # session and user included; runs: one more for the agent's usage totals; steps: one to number them in their
    # conversations
    assert before == [9, 7, 7, 7]
    for i in range(5):
        _say(agent, f"more {i}")
    assert [count(u) for u in urls] == before


def test_an_imported_letta_v1_conversation_reads_like_a_native_one(web, account):
    from core.agents.agentfile.importer import agentfile_import
    from core.agents.agentfile.parse import parse_agent_file
    from tests.core.agentfile_fixtures import fixture_path

    result = agentfile_import(
        owner=account.org, parsed=parse_agent_file(fixture_path("memgpt_agent_with_convo.af").read_bytes())
    )
    agent = Agent.objects.get(id=result.agent_ids[0])
    page = web.get(f"/agents/{agent.id}/history/?before=40").content.decode()  # the first 40 messages
    assert "Conversation reset" not in page  # Letta v1 rebuilt its prompt mid-conversation: not resets
    assert "hi my name is actually sarah not chad" in page and "&quot;type&quot;: &quot;user_message&quot;" not in page
    assert 'data-type="heartbeat"' in page
    # tool returns are named after their call (the file names them after the agent) and send_message's receipts hidden
    assert re.search(r'data-type="tool_return_message".*?core_memory_replace', page, re.S)
    labels = re.findall(r'data-type="tool_return_message".*?<summary>(.*?)</summary>', page, re.S)
    assert labels and not any("memgpt_agent" in label for label in labels), labels
    # the inner monologue of a tool-calling message shows as reasoning
    assert re.search(r'data-type="reasoning_message".*?Updating core memory to reflect this change', page, re.S)
