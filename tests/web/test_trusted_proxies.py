"""Behind a reverse proxy: a real daphne serving the project's ASGI application believes X-Forwarded-For only from a
peer in TRUSTED_PROXIES, so two clients behind the same proxy are locked out separately, and a client that writes
the header itself changes nothing — with the test as the proxy, and through a real proxy process."""

import re
import socket
import subprocess
import sys

import httpx
import pytest

from agents_ide.proxies import _networks, client_address
from tests.factories import make_account
from tests.helpers import ROOT, daphne_start, free_port, until

TRUSTED = _networks(("127.0.0.1", "10.0.0.0/8"))


@pytest.mark.parametrize(
    ("peer", "forwarded", "client"),
    [
        ("127.0.0.1", ["203.0.113.7"], "203.0.113.7"),
        ("127.0.0.1", ["198.51.100.1, 203.0.113.7"], "203.0.113.7"),  # the left entry is the client's own writing
        ("127.0.0.1", ["203.0.113.7, 10.1.2.3"], "203.0.113.7"),  # a second trusted hop is skipped
        ("127.0.0.1", ["203.0.113.7", "10.1.2.3"], "203.0.113.7"),  # the header sent twice reads as one list
        ("127.0.0.1", ["10.1.2.3, 10.4.5.6"], "10.1.2.3"),  # all trusted: the farthest
        ("127.0.0.1", ["[2001:db8::1]:443"], "2001:db8::1"),
        ("127.0.0.1", ["203.0.113.7:5000"], "203.0.113.7"),
        ("127.0.0.1", ["not-an-address"], "127.0.0.1"),
        ("127.0.0.1", [], "127.0.0.1"),
        ("192.0.2.9", ["203.0.113.7"], "192.0.2.9"),  # an untrusted peer's header is ignored
    ],
)
def test_the_client_is_the_rightmost_address_no_trusted_proxy_owns(peer, forwarded, client):
    assert client_address(peer, forwarded, TRUSTED) == client


def test_nothing_is_believed_without_trusted_proxies():
    assert client_address("127.0.0.1", ["203.0.113.7"], ()) == "127.0.0.1"


def _failed_login(server, forwarded_for: str | None, *, url: str | None = None, source: str | None = None) -> int:
    """One failed login through the real login form (its CSRF token and cookie), as a client behind the proxy (or
    connecting to `url` from the loopback address `source`)."""
    headers = {"X-Forwarded-For": forwarded_for} if forwarded_for else {}
    transport = httpx.HTTPTransport(local_address=source) if source else None
    with httpx.Client(base_url=url or server.url, headers=headers, transport=transport) as web:
        page = web.get("/login/")
        assert page.status_code == 200, page.status_code
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        data = {"csrfmiddlewaretoken": token, "username": "nobody", "password": "guess"}
        return web.post("/login/", data=data).status_code


@pytest.fixture
def serve(tmp_path, transactional_db):
    make_account("alice")  # an installed server: the login page, not the first account's setup
    servers = []

    def start(trusted: str):
        env = {"TRUSTED_PROXIES": trusted, "LOGIN_FAILURES_PER_ADDRESS": "3", "LOGIN_FAILURES_PER_ACCOUNT": "100"}
        servers.append(daphne_start(env={**env, "AIDE_WARM_UP": "0"}, log=tmp_path / f"daphne{len(servers)}.log"))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def test_clients_behind_a_trusted_proxy_are_locked_out_separately(serve):
    server = serve("127.0.0.1")  # the tests' requests come from loopback: the proxy
    assert [_failed_login(server, "203.0.113.1") for _ in range(4)] == [200, 200, 200, 429]
    assert _failed_login(server, "203.0.113.2") == 200  # another client behind the same proxy is not locked out
    assert _failed_login(server, "198.51.100.9, 203.0.113.1") == 429  # writing another address first changes nothing


def test_an_untrusted_peers_forwarded_address_is_ignored(serve):
    server = serve("10.0.0.0/8")  # some other proxy: loopback is not it
    statuses = [_failed_login(server, f"203.0.113.{i}") for i in range(4)]
    assert statuses == [200, 200, 200, 429]  # one address (the peer's) whatever the header says


PROXY_ADDRESS = "127.0.0.10"  # the proxy's own loopback address; its clients connect from 127.0.0.2 and 127.0.0.3


@pytest.fixture
def proxy(serve):
    """A real reverse proxy process (tests/web/forwarding_proxy.py) in front of a daphne that trusts only it."""
    server = serve(PROXY_ADDRESS)
    port = free_port()
    command = [sys.executable, "-m", "tests.web.forwarding_proxy", str(port), str(server.port), PROXY_ADDRESS]
    process = subprocess.Popen(command, cwd=ROOT)

    def listening() -> bool:
        assert process.poll() is None, "the proxy exited"
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", port)) == 0

    until(listening, timeout=30, what="the proxy to listen")
    yield server, f"http://127.0.0.1:{port}"
    process.terminate()
    process.wait(timeout=10)


def test_clients_behind_a_real_proxy_process_are_locked_out_by_their_own_address(proxy):
    server, url = proxy
    statuses = [_failed_login(server, None, url=url, source="127.0.0.2") for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    assert _failed_login(server, None, url=url, source="127.0.0.3") == 200  # the next client behind it is not
    # A client naming another address itself: the proxy appends the real one, which is what counts.
    assert _failed_login(server, "127.0.0.3", url=url, source="127.0.0.2") == 429
    assert _failed_login(server, "198.51.100.9", url=url, source="127.0.0.3") == 200
    assert _failed_login(server, None, url=url, source="127.0.0.3") == 200  # 3 failures so far: not yet locked


def test_a_direct_client_is_not_believed_as_the_proxy(proxy):
    server, _url = proxy
    statuses = [_failed_login(server, f"203.0.113.{i}", source="127.0.0.2") for i in range(4)]
    assert statuses == [200, 200, 200, 429]  # its own header, not from the proxy's address: one client
