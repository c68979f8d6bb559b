"""The scheduled-messages panel in Chromium: an agent's schedules listed in its settings pane with their next time
and cron expression, one added from the form and one deleted; nothing cut off or overlapping and text readable
(layout_checks.js) at 390, 1280 and 1920 px, light and dark, with screenshots."""

from playwright.sync_api import expect

from core.models import ScheduledMessage
from core.runs.schedules import scheduled_message_create
from tests.e2e.test_layout import _audit, _shot
from tests.factories import make_agent

LONG = "Summarize-the-overnight-alerts-for-the-northern-european-region-" * 3


def test_schedules_are_listed_added_and_deleted_in_the_settings_pane(signed_in, account):
    agent = make_agent(account.org, name="Scheduler")
    daily = scheduled_message_create(
        agent=agent,
        messages=[{"role": "user", "content": LONG}],
        schedule={"type": "recurring", "cron_expression": "0 9 * * MON-FRI"},
    )
    page = signed_in.new_page()
    page.goto(f"/agents/{agent.id}/")
    panel = page.locator("#schedule-panel")
    expect(panel.locator(f"#schedule-{daily.id}")).to_contain_text("0 9 * * MON-FRI")
    expect(panel.locator(f"#schedule-{daily.id} time")).to_contain_text(daily.next_run_at.strftime("%Y-%m-%d 09:00"))
    panel.locator("#schedule-text").fill("Hourly check-in")
    panel.locator("#schedule-cron").fill("@hourly")
    panel.locator("#schedule-add").click()
    expect(panel.locator("#schedule-saved")).to_be_visible()
    expect(panel.locator("#schedule-list li")).to_have_count(2)
    problems = []
    for width in (390, 1280, 1920):
        page.set_viewport_size({"width": width, "height": 860})
        if width < 768:
            page.click('.ws-tabs [data-pane="settings"]')
        panel.scroll_into_view_if_needed()
        for theme in ("light", "dark"):
            page.evaluate(f"document.documentElement.dataset.theme = '{theme}'")
            problems += [f"{width} {theme}: {p}" for p in _audit(page)]
            _shot(page, f"schedule-{width}-{theme}")
    assert problems == [], "\n".join(problems)
    page.once("dialog", lambda dialog: dialog.accept())
    panel.locator(f"#schedule-{daily.id} button").click()
    expect(panel.locator(f"#schedule-{daily.id}")).to_have_count(0)
    assert list(ScheduledMessage.objects.values_list("cron_expression", flat=True)) == ["@hourly"]
