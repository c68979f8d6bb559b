"""Nothing lost, server side: what a tab opened mid-run is given (the run's inputs, stored by its claim), the notices
of runs that ended before a step took the person's message, the messages a tab's socket missed, and the events that let
every tab show every input and a reply from its start (core.runs.emit)."""

import asyncio
import json
import re

from core.models import Message, Run
from core.runs import emit
from core.runs.request import RunRequest
from core.runs.runner import run_agent, run_start
from core.web.history import in_flight
from tests.factories import make_agent
from tests.fake_llm import FakeLLM


def _config(html: str) -> dict:
    return json.loads(re.search(r'<script id="ide-config" type="application/json">(.*?)</script>', html, re.S).group(1))


def test_a_page_opened_mid_run_shows_the_inputs_the_claim_stored(web, account, fake_llm):
    agent = make_agent(account.org, name="In flight")
    run = run_start(
        RunRequest(
            owner=account.org,
            agent_id=agent.id,
            input_messages=[{"role": "user", "content": "Still <b>on</b> its way", "otid": "o-1"}],
        )
    )
    html = web.get(f"/agents/{agent.id}/").content.decode()
    config = _config(html)
    # stored when the run was claimed: the history draws it, so the page has nothing left to add from the run
    assert in_flight(agent=agent) == [] and "pending-label" not in html.split('<template id="conv-bubble">')[0]
    assert config["activeRunId"] == run.id
    assert 'data-otid="o-1"' in html and "Still &lt;b&gt;on&lt;/b&gt; its way" in html
    assert html.count("Still &lt;b&gt;on&lt;/b&gt; its way") == 1


def test_a_run_holding_inputs_no_message_stores_yet_shows_them_as_sent(web, account, fake_llm):
    agent = make_agent(account.org, name="In flight, unstored")
    run = run_start(RunRequest(owner=account.org, agent_id=agent.id, input_messages=[{"role": "user", "content": "x"}]))
    Message.objects.filter(run_id=run.id, role="user").delete()  # as a run claimed before claims stored its inputs
    Run.objects.filter(pk=run.id).update(input_messages=[{"role": "user", "text": "Held <b>here</b>", "otid": "o-9"}])
    html = web.get(f"/agents/{agent.id}/").content.decode()
    live = html.split('<div id="live">')[1].split('<template id="conv-bubble">')[0]
    bubble = re.search(r'<div class="msg user_message pending"[^>]*>.*?</div>\s*</div>', live, re.S).group(0)
    assert f'data-otid="o-9" data-run="{run.id}" data-state="sent"' in bubble
    assert '<span class="pending-label">sent · waiting for the agent</span>' in bubble
    assert "Held &lt;b&gt;here&lt;/b&gt;" in bubble and "<b>here</b>" not in html


def test_a_page_opened_when_nothing_runs_has_no_inputs_in_flight(web, account, fake_llm):
    agent = make_agent(account.org)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Hi."}))
    run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "hello"}])
    assert in_flight(agent=agent) == []
    assert (
        "pending-label" not in web.get(f"/agents/{agent.id}/").content.decode().split('<template id="conv-bubble">')[0]
    )


def test_a_failed_runs_undelivered_message_shows_again_until_it_is_sent_again(web, account, fake_llm):
    agent = make_agent(account.org, name="Notices")
    fake_llm.script(FakeLLM.error(500, "upstream exploded"))
    run = run_agent(
        agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "Lost <i>words</i>?"}]
    )
    assert run.status == "failed"
    html = web.get(f"/agents/{agent.id}/").content.decode()
    notice = re.search(rf'<div class="run-notice" data-run="{run.run_id}".*?</div>\s*</div>\s*</div>', html, re.S)
    assert notice, "the failed run's notice is not on the page"
    assert "Lost &lt;i&gt;words&lt;/i&gt;?" in notice.group(0) and "data-retry" in notice.group(0)
    # stored when it was accepted, the message shows once: in the notice that offers it again, not also in the history
    assert Message.objects.filter(run_id=run.run_id, role="user").exists()
    assert html.count("Lost &lt;i&gt;words&lt;/i&gt;?") == 1
    assert "upstream exploded" in html

    # a later send of other text completes: the failed message is still offered (its text was lost before)
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Something else."}))
    run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "another thing"}])
    html = web.get(f"/agents/{agent.id}/").content.decode()
    assert f'class="run-notice" data-run="{run.run_id}"' in html and "Something else." in html

    fake_llm.script(FakeLLM.tool("send_message", {"message": "Got it now."}))
    run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "Lost <i>words</i>?"}])
    html = web.get(f"/agents/{agent.id}/").content.decode()
    assert f'class="run-notice" data-run="{run.run_id}"' not in html  # sent again and delivered: no notice any more
    assert "Got it now." in html


def test_a_run_in_progress_does_not_hide_the_notice_of_a_failed_run_before_it(web, account, fake_llm):
    agent = make_agent(account.org, name="Busy")
    fake_llm.script(FakeLLM.error(500, "upstream exploded"))
    failed = run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "first try"}])
    assert failed.status == "failed"
    going = run_start(
        RunRequest(
            owner=account.org,
            agent_id=agent.id,
            input_messages=[{"role": "user", "content": "second try", "otid": "o-2"}],
        )
    )
    html = web.get(f"/agents/{agent.id}/").content.decode()
    assert f'class="run-notice" data-run="{failed.run_id}"' in html and "first try" in html
    assert _config(html)["activeRunId"] == going.id


def test_a_retry_in_progress_replaces_the_failed_copy_of_its_message(web, account, fake_llm):
    agent = make_agent(account.org, name="Retrying")
    fake_llm.script(FakeLLM.error(500, "upstream exploded"))
    failed = run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "again?"}])
    assert failed.status == "failed"
    run_start(RunRequest(owner=account.org, agent_id=agent.id, input_messages=[{"role": "user", "content": "again?"}]))
    html = web.get(f"/agents/{agent.id}/").content.decode()
    assert f'class="run-notice" data-run="{failed.run_id}"' not in html  # the retry, still running, replaces it


def test_the_messages_after_a_seq_are_what_a_socket_that_was_away_missed(web, account, fake_llm):
    agent = make_agent(account.org)
    fake_llm.script(
        FakeLLM.tool("send_message", {"message": "First."}), FakeLLM.tool("send_message", {"message": "Second."})
    )
    run_agent(
        agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "one", "otid": "o-one"}]
    )
    last = Message.objects.filter(agent=agent).order_by("-seq").first().seq
    run_agent(agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "two"}])
    html = web.get(f"/agents/{agent.id}/history/?after={last}").content.decode()
    seqs = [int(s) for s in re.findall(r'data-seq="(\d+)"', html)]
    assert seqs and min(seqs) > last and "Second." in html and "First." not in html
    assert "No messages yet" not in web.get(f"/agents/{agent.id}/history/?after={max(seqs)}").content.decode()
    assert web.get(f"/agents/{agent.id}/history/?after=x").status_code == 404
    # a stored user message carries the otid its tab matches its bubble by
    assert 'data-otid="o-one"' in web.get(f"/agents/{agent.id}/").content.decode()


def test_every_tab_is_told_the_inputs_a_run_was_given(account, monkeypatch):
    agent = make_agent(account.org)
    sent = []
    monkeypatch.setattr(emit, "send_events", lambda group, events, **extra: sent.append((group, events, extra)))
    monkeypatch.setattr(emit, "group_listened", lambda group: True)
    run = run_start(
        RunRequest(
            owner=account.org,
            agent_id=agent.id,
            input_messages=[{"role": "user", "content": "hello tabs", "otid": "o-2"}],
            refuse_unconfigured=False,  # no provider here: the claim alone is under test
        )
    )
    emit.inputs_accepted(run)
    (group, events, extra), *_ = [s for s in sent if s[1][0]["message_type"] == "input_accepted"]
    assert events[0]["inputs"] == [{"content": "hello tabs", "otid": "o-2"}] and events[0]["run_id"] == run.id
    assert extra["caller"] == [False]  # never in the caller's SSE stream


def test_a_tab_that_joins_mid_reply_gets_what_was_streamed_so_far(account, monkeypatch):
    agent = make_agent(account.org)
    sent = []
    monkeypatch.setattr(emit, "send_events", lambda group, events, **extra: sent.extend(events))
    emitter = emit.Emitter(agent.id, "run-1")
    chunk = {"id": "m-1", "message_type": "assistant_message", "delta": True, "run_id": "run-1", "step_id": "s-1"}
    emitter.stream({**chunk, "content": "Hello "})
    emitter.RESYNC_CHECK_S = 0
    emitter.stream({**chunk, "content": "wor"})
    emitter.flush()
    assert not [e for e in sent if e["message_type"] == "stream_snapshot"]  # nobody asked
    asyncio.run(emit.resync_request(agent.id))
    emitter.stream({**chunk, "content": "ld"})
    emitter.flush()
    snapshots = [e for e in sent if e["message_type"] == "stream_snapshot"]
    assert len(snapshots) == 1 and snapshots[0]["parts"][0]["text"] == "Hello world"
    emitter.stream({**chunk, "content": "!"})
    emitter.flush()
    assert len([e for e in sent if e["message_type"] == "stream_snapshot"]) == 1  # once per request
    emitter.emit({"message_type": "assistant_message", "id": "m-1", "content": "Hello world!"})
    assert emitter._snapshot()["parts"] == []  # stored: nothing streamed is kept
