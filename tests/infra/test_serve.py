"""The launcher's daphne server (agents_ide.serve): its access log leaves HTTP requests to the request log (each has
its line there) and keeps websocket actions; `--access-log` given by name brings daphne's whole log back."""

import pytest

from agents_ide.serve import FormlessServer, ServeCommand


def _logged(*, http_access_log: bool) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    server_class = type("Probe", (FormlessServer,), {"http_access_log": http_access_log})
    server = server_class(application=None, endpoints=["tcp:port=0"], action_logger=lambda p, a, d: seen.append((p, a)))
    server.log_action("http", "complete", {"path": "/v1/agents"})
    server.log_action("websocket", "connected", {"path": "/ws/agents/x/"})
    return seen


def test_http_requests_are_left_to_the_request_log_and_websockets_stay():
    assert _logged(http_access_log=False) == [("websocket", "connected")]


def test_an_access_log_asked_for_by_name_has_every_action():
    assert _logged(http_access_log=True) == [("http", "complete"), ("websocket", "connected")]


@pytest.mark.parametrize(("args", "whole"), [(["-p", "0"], False), (["--access-log", "-", "-p", "0"], True)])
def test_the_command_asks_for_the_whole_log_only_when_named(monkeypatch, args, whole):
    monkeypatch.setattr(FormlessServer, "http_access_log", None)
    monkeypatch.setattr("daphne.cli.CommandLineInterface.run", lambda self, args: None)
    ServeCommand().run(args)
    assert FormlessServer.http_access_log is whole
