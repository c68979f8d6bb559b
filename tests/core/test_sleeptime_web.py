"""The workspace's sleep-time panel through Django's client: enable with a frequency, inline errors, trigger a
run, read the companion's edits (escaped) and its runs; another owner's agent is a 404."""

import pytest

from core.models import Run, SleeptimeCompanion
from core.runs import queue
from core.runs.request import RunRequest
from memory.selectors import agent_block_by_label
from memory.services import block_update
from tests.factories import make_agent
from tests.fake_llm import FakeLLM
from tests.helpers import until


@pytest.fixture(autouse=True)
def _queue_stopped_after(transactional_db):
    yield
    queue.shutdown()


def test_panel_enables_runs_and_shows_what_the_companion_changed(web, account, fake_llm):
    agent = make_agent(account.org, name="Ada")
    assert 'id="sleeptime-panel"' in web.get(f"/agents/{agent.id}/").content.decode()
    html = web.get(f"/agents/{agent.id}/sleeptime/").content.decode()
    assert "none" in html and "sleeptime-companion" not in html
    bad = web.post(f"/agents/{agent.id}/sleeptime/save/", {"enabled": "on", "frequency": "0"}).content.decode()
    assert 'id="sleeptime-error"' in bad and not SleeptimeCompanion.objects.exists()
    html = web.post(f"/agents/{agent.id}/sleeptime/save/", {"enabled": "on", "frequency": "3"}).content.decode()
    link = SleeptimeCompanion.objects.get(agent=agent)
    assert link.frequency == 3 and 'id="sleeptime-companion"' in html and "every 3 turns" in html
    nothing = web.post(f"/agents/{agent.id}/sleeptime/run/").content.decode()
    assert "nothing new" in nothing
    fake_llm.script(
        FakeLLM.tool("send_message", {"message": "hi"}),
        FakeLLM.tool("core_memory_append", {"label": "human", "content": "<script>x</script>"}, heartbeat=False),
    )
    from core.runs.executor import run_submit, run_wait

    run_wait(
        run=run_submit(
            RunRequest(owner=agent.owner, agent_id=agent.id, input_messages=[{"role": "user", "content": "hey"}])
        )
    )
    started = web.post(f"/agents/{agent.id}/sleeptime/run/").content.decode()
    assert 'id="sleeptime-started"' in started
    until(
        lambda: Run.objects.filter(agent_id=link.companion_id, status="completed").exists(), what="the companion's run"
    )
    html = web.get(f"/agents/{agent.id}/sleeptime/").content.decode()
    assert "&lt;script&gt;x&lt;/script&gt;" in html and "<script>x</script>" not in html
    assert "completed" in html and "<code>human</code>" in html
    # An edit by someone else is not listed as the companion's.
    block_update(
        block=agent_block_by_label(agent=agent, label="human"),
        changes={"value": "by a person"},
        actor_user=account.user,
    )
    assert "by a person" not in web.get(f"/agents/{agent.id}/sleeptime/").content.decode()


def test_another_owners_agent_is_not_found(web, other_account):
    agent = make_agent(other_account.org)
    assert web.get(f"/agents/{agent.id}/sleeptime/").status_code == 404
    assert web.post(f"/agents/{agent.id}/sleeptime/save/", {"enabled": "on", "frequency": "2"}).status_code == 404
    assert not SleeptimeCompanion.objects.exists()
