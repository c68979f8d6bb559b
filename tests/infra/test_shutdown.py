"""A stopped server exits although a request is still on its thread: the event loop that request would answer on is
gone, so it can never answer, and its thread must not hold the process open (it did, for good, with the thread
waiting on the stopped loop — `docker stop` and Ctrl-C then waited for SIGKILL)."""

import signal
import subprocess
import threading
import urllib.error
import urllib.request

from tests.helpers import daphne_start, until


def test_a_server_stopped_mid_request_exits(tmp_path, transactional_db):
    server = daphne_start(env={"DJANGO_SETTINGS_MODULE": "tests.infra.shutdown_settings"}, log=tmp_path / "daphne.log")
    try:
        # a request whose view outlives the server: it sleeps far longer than the wait below
        started = tmp_path / "started"
        slow = threading.Thread(
            target=_get_quietly, args=(f"{server.url}/stall?sleep=600&started={started}",), daemon=True
        )
        slow.start()
        until(started.exists, timeout=30, what="the request to reach its view")
        server.proc.send_signal(signal.SIGTERM)
        try:
            code = server.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                "the server did not exit after SIGTERM while a request was in its view:\n" + server.log_tail()
            ) from None
        assert code in (0, -signal.SIGTERM), (code, server.log_tail())
    finally:
        server.stop(timeout=0)


def _get_quietly(url: str) -> None:
    try:
        urllib.request.urlopen(url, timeout=700).read()
    except (OSError, urllib.error.URLError):
        pass  # the server went away, as the test meant
