"""Saving an agent's settings from the workspace records only what the person changed: the version diff of a
rename is the name, whatever the browser did to the prompt's line ends and with the temperature left alone."""

from core.agents import versions
from tests.factories import make_agent


def test_a_rename_from_the_settings_form_changes_only_the_name(web, account):
    agent = make_agent(account.org, name="Before", system="Line one.\nLine two.\n\n  Indented line.\n")
    number = versions.versions_list(agent=agent)[0].number
    form = {
        "name": "After",
        "model": agent.model,
        "system": agent.system.replace("\n", "\r\n"),  # as a browser submits a textarea
        "temperature": "0.7",
        "max_steps": str(agent.max_steps),
        "context_window_limit": str(agent.context_window_limit),
        "tags": "",
        "version_message": "",
    }
    assert web.post(f"/agents/{agent.id}/settings/", form).status_code == 200
    agent.refresh_from_db()
    assert agent.name == "After" and agent.system == "Line one.\nLine two.\n\n  Indented line.\n"
    latest = versions.versions_list(agent=agent)[0].number
    assert latest == number + 1
    changes = versions.version_diff(agent=agent, number=latest)["changes"]
    assert [c["field"] for c in changes] == ["name"], changes
    form.update(temperature="0.2")
    web.post(f"/agents/{agent.id}/settings/", form)
    agent.refresh_from_db()
    assert agent.model_settings["temperature"] == 0.2
    changes = versions.version_diff(agent=agent, number=latest + 1)["changes"]
    assert [c["field"] for c in changes] == ["model_settings"], changes
