"""A machine without bubblewrap: the workbench says so, with the one command that installs it."""

from django.test import Client


def test_the_workbench_names_the_install_command_when_bubblewrap_is_missing(account, monkeypatch):
    web = Client()
    web.force_login(account.user)
    monkeypatch.setattr("tools.sandbox.local.find_bwrap", lambda: None)
    page = web.get("/tools/").content.decode()
    assert 'id="sandbox-notice">Local tool runs are refused: bubblewrap is not installed' in page
    assert "on Debian/Ubuntu: sudo apt-get install bubblewrap)" in page
