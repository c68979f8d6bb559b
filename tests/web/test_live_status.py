"""Agents list running badges (the poller's partial), incoming agent messages in the history, and the
workspace's knowledge of a run already in progress."""

import re

from core.models import Agent, Message, Run
from tests.factories import make_agent


def _badges(html: str) -> dict[str, str]:
    return dict(re.findall(r'id="status-([^"]+)"[^>]*data-status="(\w+)"', html))


def test_status_partial_marks_running_agents_and_reads_only(web, account):
    busy = make_agent(account.org, name="Busy")
    calm = make_agent(account.org, name="Calm", tags=["quiet"])
    Run.objects.create(owner=account.org, agent=busy, status="running")
    Run.objects.create(owner=account.org, agent=calm, status="completed", stop_reason="end_turn")
    runs_before = list(Run.objects.values_list("id", "status"))

    html = web.get("/agents/status/").content.decode()
    assert _badges(html) == {busy.id: "running", calm.id: "idle"}
    assert html.count('hx-swap-oob="true"') == 2 and "<html" not in html
    # the same filters as the list: a tag filter only reports the agents shown
    assert _badges(web.get("/agents/status/?tag=quiet").content.decode()) == {calm.id: "idle"}
    assert list(Run.objects.values_list("id", "status")) == runs_before  # polling never writes

    page = web.get("/").content.decode()
    assert _badges(page) == {busy.id: "running", calm.id: "idle"}
    assert 'hx-get="/agents/status/?q=&amp;tag="' in page and 'hx-trigger="every 3s"' in page


def test_status_partial_is_per_owner(web, account, other_account):
    theirs = make_agent(other_account.org, name="Theirs")
    Run.objects.create(owner=other_account.org, agent=theirs, status="running")
    assert theirs.id not in web.get("/agents/status/").content.decode()


def test_history_marks_a_message_from_another_agent_with_its_name_and_link(web, account):
    sender = make_agent(account.org, name="Sender <b>one</b>")
    receiver = make_agent(account.org, name="Receiver")
    Message.objects.create(
        owner=account.org,
        agent=receiver,
        seq=10_000,
        role="system",
        kind="agent_message",
        sender_agent_id=sender.id,
        text=f"[Incoming message from agent with ID '{sender.id}'] hi",
    )
    html = web.get(f"/agents/{receiver.id}/").content.decode()
    item = html[html.index('class="msg system_message from-agent"') :]
    item = item[: item.index("</div>\n</div>")]
    assert f'href="/agents/{sender.id}/"' in item
    assert "Sender &lt;b&gt;one&lt;/b&gt;" in item and "<b>one" not in item
    assert ">message" in item.replace("\n", "").replace(" ", "")


def test_workspace_knows_a_run_in_progress(web, account):
    agent = make_agent(account.org, name="Worker")
    config = lambda: web.get(f"/agents/{agent.id}/").context_data["ide_config"]  # noqa: E731 - the page's JSON island
    assert config()["activeRunId"] == ""
    run = Run.objects.create(owner=account.org, agent=agent, status="created", background=True)
    assert config()["activeRunId"] == run.id
    assert Agent.objects.get(id=agent.id).name == "Worker"
