"""The egress guard: which addresses a request made for a user may reach, decided before any connection; the
connection goes to the address that was checked (no second lookup), and every redirect hop is checked too.
Only loopback is ever targeted; the other ranges are judged without connecting."""

import ipaddress
import socket
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from core import egress
from tests.helpers import serve_in_thread


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "127.8.9.10",
        "::1",
        "::ffff:127.0.0.1",
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "169.254.169.254",
        "fe80::1",
        "fd00::1",
        "100.64.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "2002:7f00:1::",
    ],
)
def test_addresses_inside_are_refused(address):
    assert egress.refusal_reason(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111"])
def test_public_addresses_pass(address, monkeypatch):
    monkeypatch.setattr(egress, "own_addresses", lambda: frozenset())
    assert egress.refusal_reason(ipaddress.ip_address(address)) is None


@pytest.mark.parametrize(
    ("address", "inside"),
    [
        ("64:ff9b::a9fe:a9fe", "169.254.169.254 inside a NAT64 address"),  # the metadata address, translated
        ("64:ff9b::7f00:1", "127.0.0.1 inside a NAT64 address"),
        ("64:ff9b:1::a00:1", "inside a local-use NAT64 address"),
        ("64:ff9b:1:a00:0:100::", "10.0.0.1 inside a local-use NAT64 address"),  # a /48 translator's reading
        ("::127.0.0.1", "127.0.0.1 inside an IPv4-compatible address"),
        ("::ffff:127.0.0.1", "127.0.0.1 inside an IPv4-mapped address"),
        ("::ffff:0:7f00:1", "127.0.0.1 inside an IPv4-translated address"),
        ("2002:a9fe:a9fe::1", "169.254.169.254 inside a 6to4 address"),
        ("2001:0:808:808:0:f227:f5ff:fffe", "10.0.0.1 inside a Teredo address (its client)"),  # obfuscated client
        ("2001:0:a00:1::", "10.0.0.1 inside a Teredo address (its server)"),
    ],
)
def test_ipv6_forms_that_carry_an_internal_ipv4_address_are_refused(address, inside, monkeypatch):
    monkeypatch.setattr(egress, "own_addresses", lambda: frozenset())
    assert inside in egress.refusal_reason(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    "address",
    [
        "64:ff9b::808:808",  # a DNS64 answer for 8.8.8.8
        "64:ff9b:1:808:8:808:808:808",  # 8.8.8.8 at every prefix length a local-use translator may use
        "::ffff:8.8.8.8",
        "2002:808:808::1",
    ],
)
def test_ipv6_forms_that_carry_a_public_ipv4_address_pass(address, monkeypatch):
    monkeypatch.setattr(egress, "own_addresses", lambda: frozenset())
    assert egress.refusal_reason(ipaddress.ip_address(address)) is None


def test_ipv6_forms_are_refused_when_the_ipv4_inside_is_this_hosts_own(monkeypatch):
    monkeypatch.setattr(egress, "own_addresses", lambda: frozenset({ipaddress.ip_address("8.8.4.4")}))
    assert "one of this host's own" in egress.refusal_reason(ipaddress.ip_address("64:ff9b::808:404"))


def test_a_name_answering_a_nat64_form_of_the_metadata_address_is_refused(settings, monkeypatch):
    settings.EGRESS_ALLOW = []
    answer = [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("64:ff9b::a9fe:a9fe", 80, 0, 0))]
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: answer)
    with pytest.raises(egress.EgressRefused, match="169.254.169.254 inside a NAT64 address"):
        egress.checked_addresses("dns64.example", 80)


def test_the_hosts_own_public_address_is_refused(monkeypatch):
    monkeypatch.setattr(egress, "own_addresses", lambda: frozenset({ipaddress.ip_address("8.8.4.4")}))
    assert egress.refusal_reason(ipaddress.ip_address("8.8.4.4")) == "one of this host's own addresses"


def test_own_addresses_are_read_from_the_kernel():
    assert ipaddress.ip_address("127.0.0.1") in egress.own_addresses()


def test_allowances_parse_every_documented_form():
    a = egress.parse_allowance
    assert a("10.0.0.5:11434") == egress.Allowance(network=ipaddress.ip_network("10.0.0.5/32"), port=11434)
    assert a("10.0.0.0/8").network == ipaddress.ip_network("10.0.0.0/8") and a("10.0.0.0/8").port is None
    assert a("[fd00::1]:8080") == egress.Allowance(network=ipaddress.ip_network("fd00::1/128"), port=8080)
    assert a("Ollama.internal:11434") == egress.Allowance(host="ollama.internal", port=11434)
    assert a("http://ollama:11434/v1") == egress.Allowance(host="ollama", port=11434)
    assert a("https://proxy.corp") == egress.Allowance(host="proxy.corp", port=443)


def test_the_deployments_own_endpoints_are_allowed_at_their_model_apis_paths_only(settings, monkeypatch):
    settings.EGRESS_ALLOW = []
    monkeypatch.setenv("OLLAMA_API_BASE", "http://127.0.0.1:11434")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9000/v1")
    loopback = [ipaddress.ip_address("127.0.0.1")]
    for path in ("/api/chat", "/api/generate", "/api/embed", "/api/embeddings", "/api/tags", "/api/show"):
        assert egress.check_url(f"http://127.0.0.1:11434{path}") == loopback
    for path in ("/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/models", "/v1/models/llama3"):
        assert egress.check_url(f"http://127.0.0.1:11434{path}") == loopback
    assert egress.check_url("http://127.0.0.1:9000/v1/chat/completions") == loopback
    assert egress.check_url("http://127.0.0.1:11434", base=True) == loopback  # a provider's base URL leads there
    with pytest.raises(egress.EgressRefused, match="loopback"):
        egress.check_url("http://127.0.0.1:6379/")  # another port of the same address


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:11434/api/delete",
        "http://127.0.0.1:11434/api/pull",
        "http://127.0.0.1:11434/api/create",
        "http://127.0.0.1:11434/",
        "http://127.0.0.1:11434/api/chat/../delete",
        "http://127.0.0.1:11434/api/chat/%2e%2e/delete",
        "http://127.0.0.1:11434/api/chat%2F..%2Fdelete",
        "http://127.0.0.1:11434//api/delete",
        "http://127.0.0.1:11434/api/chatter",
        "http://127.0.0.1:9000/admin/",  # OPENAI_BASE_URL's host, outside its /v1
        "http://127.0.0.1:9000/chat/completions",
    ],
)
def test_the_rest_of_an_operators_endpoint_is_refused(url, settings, monkeypatch):
    settings.EGRESS_ALLOW = []
    monkeypatch.setenv("OLLAMA_API_BASE", "http://127.0.0.1:11434")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9000/v1")
    with pytest.raises(egress.EgressRefused, match="model endpoint, which requests made for users reach only"):
        egress.check_url(url)


def test_the_sandboxs_raw_connections_reach_this_server_but_not_an_operators_endpoint(settings, monkeypatch):
    """A tunnel shows no path: the model endpoint is not admitted whole; tools still call back into the API."""
    settings.EGRESS_ALLOW = []
    settings.PUBLIC_BASE_URL = "http://127.0.0.1:8123"
    monkeypatch.setenv("OLLAMA_API_BASE", "http://127.0.0.1:11434")
    assert egress.checked_addresses("127.0.0.1", 8123) == [ipaddress.ip_address("127.0.0.1")]
    with pytest.raises(egress.EgressRefused, match="model endpoint"):
        egress.checked_addresses("127.0.0.1", 11434)


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8123/admin/", "http://localhost:8123/v1/agents", "http://[::1]:8123/"]
)
def test_requests_made_for_users_never_reach_this_server(url, settings, monkeypatch):
    settings.EGRESS_ALLOW = ["127.0.0.1", "::1", "localhost"]  # even where the operator allows loopback
    settings.PUBLIC_BASE_URL = "https://ide.example.org"
    monkeypatch.setenv("PORT", "8123")
    with pytest.raises(egress.EgressRefused, match="this server's own address"):
        egress.check_url(url)
    assert egress.check_url("http://127.0.0.1:8124/") == [ipaddress.ip_address("127.0.0.1")]  # another port


def test_requests_made_for_users_never_reach_public_base_url(settings, monkeypatch):
    settings.EGRESS_ALLOW = []
    settings.PUBLIC_BASE_URL = "https://ide.example.org"
    monkeypatch.setattr(
        socket, "getaddrinfo", lambda *a, **k: [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", 443))]
    )
    with pytest.raises(egress.EgressRefused, match=r"this server's own address \(PUBLIC_BASE_URL\)"):
        egress.check_url("https://IDE.example.org./admin/")
    assert egress.check_url("https://other.example.org/admin/")


def test_a_name_is_used_only_at_its_checked_addresses(settings, monkeypatch):
    settings.EGRESS_ALLOW = []
    answers = [("93.184.216.34", 80), ("127.0.0.1", 80)]
    monkeypatch.setattr(
        socket, "getaddrinfo", lambda *a, **k: [(socket.AF_INET, socket.SOCK_STREAM, 6, "", sa) for sa in answers]
    )
    assert egress.checked_addresses("mixed.example", 80) == [ipaddress.ip_address("93.184.216.34")]
    answers[:] = [("169.254.169.254", 80)]
    with pytest.raises(egress.EgressRefused, match=r"mixed.example \(169.254.169.254\) is a link-local"):
        egress.checked_addresses("mixed.example", 80)


def test_urls_that_are_not_http_or_malformed_are_refused():
    for url in ("ftp://example.com/", "http://[::1", "file:///etc/passwd", "http:///nohost"):
        with pytest.raises(egress.EgressRefused):
            egress.check_url(url)


def _server(redirect_to: str = "") -> ThreadingHTTPServer:
    """A local HTTP server that answers with the Host header it got (or redirects), counting its requests."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            server.hits += 1
            body = b"" if redirect_to else f"host={self.headers['Host']}".encode()
            self.send_response(302 if redirect_to else 200)
            if redirect_to:
                self.send_header("Location", redirect_to)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.hits = 0
    serve_in_thread(server)
    return server


@pytest.fixture
def web():
    """Two local HTTP servers: `first` redirects to `second`, which answers."""
    second = _server()
    first = _server(redirect_to=f"http://127.0.0.1:{second.server_port}/landed")
    yield first, second
    for server in (first, second):
        server.shutdown()
        server.server_close()


def test_the_guarded_client_connects_to_the_checked_address_with_the_names_host_header(settings, monkeypatch, web):
    _first, second = web
    settings.EGRESS_ALLOW = ["rebind.test"]
    lookups = []
    real = socket.getaddrinfo

    def resolve(host, port, *args, **kwargs):
        if host != "rebind.test":
            return real(host, port, *args, **kwargs)
        lookups.append(host)
        # The first answer is the one that was checked; a later one (rebinding) would point elsewhere.
        ip = "127.0.0.1" if len(lookups) == 1 else "10.9.9.9"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port))]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    with egress.guarded_client() as client:
        resp = client.get(f"http://rebind.test:{second.server_port}/")
    assert resp.text == f"host=rebind.test:{second.server_port}"
    assert lookups == ["rebind.test"] and second.hits == 1


def test_every_redirect_hop_is_checked(settings, web):
    first, second = web
    settings.EGRESS_ALLOW = [f"127.0.0.1:{first.server_port}"]  # the first hop only
    with egress.guarded_client(follow_redirects=True) as client:
        with pytest.raises(egress.EgressRefused, match="loopback"):
            client.get(f"http://127.0.0.1:{first.server_port}/")
    assert first.hits == 1 and second.hits == 0
    settings.EGRESS_ALLOW = [f"127.0.0.1:{first.server_port}", f"127.0.0.1:{second.server_port}"]
    with egress.guarded_client(follow_redirects=True) as client:
        assert client.get(f"http://127.0.0.1:{first.server_port}/").status_code == 200
    assert second.hits == 1


def test_the_guarded_client_reaches_an_operators_endpoint_at_its_model_api_only(settings, monkeypatch, web):
    _first, second = web
    settings.EGRESS_ALLOW = []
    monkeypatch.setenv("OLLAMA_API_BASE", f"http://127.0.0.1:{second.server_port}")
    with egress.guarded_client() as client:
        assert client.get(f"http://127.0.0.1:{second.server_port}/api/tags").status_code == 200
        for path in ("/api/delete", "/api/pull", "/admin/"):
            with pytest.raises(egress.EgressRefused, match="model endpoint"):
                client.get(f"http://127.0.0.1:{second.server_port}{path}")
    assert second.hits == 1


def test_environment_proxies_cannot_bypass_the_guard(settings, monkeypatch, web):
    _first, second = web
    settings.EGRESS_ALLOW = []
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{second.server_port}")
    with egress.guarded_client() as client, pytest.raises(egress.EgressRefused):
        client.get("http://169.254.169.254/latest/meta-data/")
    assert second.hits == 0
    assert isinstance(egress.guarded_client(), httpx.Client)
