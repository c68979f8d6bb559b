"""The workspace's scheduled-messages panel through Django's client: add a recurring and a one-time message, see
their next time and cron expression, inline errors that store nothing, delete; another owner's agent is a 404."""

from datetime import UTC, datetime, timedelta

import pytest

from core.models import ScheduledMessage
from core.runs import cron
from core.runs.schedules import scheduled_message_create
from tests.factories import make_agent


@pytest.fixture
def agent(account):
    return make_agent(account.org, name="Ada")


def test_panel_adds_lists_and_deletes(web, agent):
    assert 'id="schedule-panel"' in web.get(f"/agents/{agent.id}/").content.decode()
    assert "none" in web.get(f"/agents/{agent.id}/schedule/").content.decode()
    html = web.post(
        f"/agents/{agent.id}/schedule/add/", {"text": "Morning <b>check</b>", "cron_expression": "0 9 * * 1-5"}
    ).content.decode()
    row = ScheduledMessage.objects.get(agent=agent)
    nine = cron.parse("0 9 * * 1-5").next_after(datetime.now(UTC))
    assert 'id="schedule-saved"' in html and "<code>0 9 * * 1-5</code>" in html
    assert nine.strftime("%Y-%m-%d 09:00") in html and row.next_run_at == nine
    assert "Morning &lt;b&gt;check&lt;/b&gt;" in html and "<b>check</b>" not in html
    at = (datetime.now(UTC) + timedelta(days=2)).replace(second=0, microsecond=0)
    html = web.post(
        f"/agents/{agent.id}/schedule/add/", {"text": "Once", "at": at.strftime("%Y-%m-%dT%H:%M")}
    ).content.decode()
    assert at.strftime("%Y-%m-%d %H:%M") in html and ScheduledMessage.objects.filter(agent=agent).count() == 2
    html = web.post(f"/agents/{agent.id}/schedule/{row.id}/delete/").content.decode()
    assert f'id="schedule-{row.id}"' not in html and "Once" in html
    assert list(ScheduledMessage.objects.values_list("kind", flat=True)) == ["one-time"]


@pytest.mark.parametrize(
    ("form", "says"),
    [
        ({"text": "x", "cron_expression": "0 9 * *"}, "5 fields"),
        ({"text": "x", "at": "2001-01-01T00:00"}, "must be in the future"),
        ({"text": "x"}, "give a cron expression, or a time"),
        ({"text": " ", "cron_expression": "@daily"}, "has no text"),
    ],
)
def test_a_refused_schedule_says_why_inline_and_stores_nothing(web, agent, form, says):
    html = web.post(f"/agents/{agent.id}/schedule/add/", form).content.decode()
    assert 'id="schedule-error"' in html and says in html and not ScheduledMessage.objects.exists()


def test_another_owners_agent_is_not_found(web, other_account):
    theirs = make_agent(other_account.org)
    row = scheduled_message_create(
        agent=theirs,
        messages=[{"role": "user", "content": "theirs"}],
        schedule={"type": "recurring", "cron_expression": "@hourly"},
    )
    assert web.get(f"/agents/{theirs.id}/schedule/").status_code == 404
    assert web.post(f"/agents/{theirs.id}/schedule/add/", {"text": "x", "cron_expression": "@daily"}).status_code == 404
    assert web.post(f"/agents/{theirs.id}/schedule/{row.id}/delete/").status_code == 404
    assert list(ScheduledMessage.objects.values_list("id", flat=True)) == [row.id]
