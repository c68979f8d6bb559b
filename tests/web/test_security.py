"""The server defends itself (issue 18, "Web"): login throttling per (account, address) and per address,
security headers, HTTPS settings, and model listings cached per owner."""

import json
import os
import re
import subprocess
import sys

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.factories import make_account, make_agent
from tests.helpers import serve_in_thread

PASSWORD = "correct horse battery staple"


def _login(username: str, password: str, addr: str = "10.0.0.1", client: Client | None = None):
    client = client or Client(REMOTE_ADDR=addr)
    return client, client.post("/login/", {"username": username, "password": password}, REMOTE_ADDR=addr)


def _logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


# --- login throttling ---


def test_an_account_is_throttled_from_the_address_that_failed(account, settings):
    for _ in range(settings.LOGIN_FAILURES_PER_ACCOUNT):
        _, r = _login("alice", "wrong")
        assert r.status_code == 200 and not _logged_in(_)
    client, r = _login("alice", PASSWORD)  # even the right password, from the address that failed
    assert r.status_code == 429 and b"Too many failed logins" in r.content
    assert not _logged_in(client)


def test_a_storm_from_one_address_does_not_lock_the_owner_out_from_another(account, settings):
    for _ in range(settings.LOGIN_FAILURES_PER_ACCOUNT * 3):
        _login("alice", "wrong", addr="10.66.0.1")
    _, r = _login("alice", PASSWORD, addr="10.66.0.1")
    assert r.status_code == 429
    client, r = _login("alice", PASSWORD, addr="10.9.9.9")
    assert r.status_code == 302 and _logged_in(client)
    _, r = _login("alice", PASSWORD, addr="10.66.0.1")  # the owner's login clears only its own address's count
    assert r.status_code == 429


def test_a_throttled_attempt_costs_no_password_hash(account, settings, monkeypatch):
    for _ in range(settings.LOGIN_FAILURES_PER_ACCOUNT):
        _login("alice", "wrong")
    calls = []
    real = User.check_password
    monkeypatch.setattr(User, "check_password", lambda self, raw: calls.append(raw) or real(self, raw))
    for _ in range(20):
        _login("alice", PASSWORD)
    assert calls == []


def test_an_address_is_throttled_across_accounts(db, settings):
    make_account("bob")
    for i in range(settings.LOGIN_FAILURES_PER_ADDRESS):
        _login(f"nobody{i}", "guess", addr="10.0.0.7")
    client, r = _login("bob", PASSWORD, addr="10.0.0.7")
    assert r.status_code == 429 and not _logged_in(client)
    client, r = _login("bob", PASSWORD, addr="10.0.0.8")
    assert r.status_code == 302 and _logged_in(client)


def test_a_successful_login_clears_its_addresss_count(account, settings):
    for _ in range(settings.LOGIN_FAILURES_PER_ACCOUNT - 1):
        _login("alice", "wrong", addr="10.1.0.1")
    client, r = _login("alice", PASSWORD, addr="10.1.0.1")
    assert r.status_code == 302
    for _ in range(settings.LOGIN_FAILURES_PER_ACCOUNT - 1):
        _login("alice", "wrong", addr="10.1.0.1")
    client, r = _login("alice", PASSWORD, addr="10.1.0.1")
    assert r.status_code == 302 and _logged_in(client)


def test_usernames_are_counted_case_insensitively(account, settings):
    for i in range(settings.LOGIN_FAILURES_PER_ACCOUNT):
        _login("ALICE" if i % 2 else "alice", "wrong", addr="10.2.0.1")
    _, r = _login("alice", PASSWORD, addr="10.2.0.1")
    assert r.status_code == 429


def test_the_admin_login_is_throttled_too(db, settings):
    from core.accounts import user_create

    user_create(username="root", password=PASSWORD, is_superuser=True)
    admin = Client(REMOTE_ADDR="10.3.0.1")
    for _ in range(settings.LOGIN_FAILURES_PER_ACCOUNT):
        admin.post("/admin/login/", {"username": "root", "password": "nope"}, REMOTE_ADDR="10.3.0.1")
    admin.post("/admin/login/", {"username": "root", "password": PASSWORD}, REMOTE_ADDR="10.3.0.1")
    assert not _logged_in(admin)
    assert admin.get("/admin/").status_code == 302


def test_limits_are_settings(account, settings):
    settings.LOGIN_FAILURES_PER_ACCOUNT = 2
    _login("alice", "wrong", addr="10.4.0.1")
    _, r = _login("alice", PASSWORD, addr="10.4.0.1")
    assert r.status_code == 302
    _login("alice", "wrong", addr="10.4.0.1")
    _login("alice", "wrong", addr="10.4.0.1")
    _, r = _login("alice", PASSWORD, addr="10.4.0.1")
    assert r.status_code == 429


# --- security headers ---


def _nonce(response) -> str:
    policy = response["Content-Security-Policy"]
    return re.search(r"'nonce-([^']+)'", policy).group(1)


def _pages(account):
    agent = make_agent(account.org, name="Ada")
    block = agent.blocks.get(label="persona")
    return ["/", f"/agents/{agent.id}/", "/blocks/", f"/blocks/{block.id}/", "/tools/", "/settings/"]


def test_every_page_has_a_csp_its_own_scripts_satisfy(account):
    web = Client()
    web.force_login(account.user)
    pages = _pages(account)
    for url in pages:
        r = web.get(url)
        assert r.status_code == 200, url
        policy = r["Content-Security-Policy"]
        assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy and "object-src 'none'" in policy
        assert "'unsafe-inline'" not in policy.split("script-src", 1)[1].split(";", 1)[0], url
        html = r.content.decode()
        for tag in re.findall(r"<script\b[^>]*>", html):
            assert "src=" in tag or f'nonce="{_nonce(r)}"' in tag or 'type="application/json"' in tag, (url, tag)
        assert not re.search(r"<[^>]+\son[a-z]+\s*=", html), url  # inline event handlers would be blocked
        assert "javascript:" not in html, url
    anonymous = Client().get("/login/")
    assert "script-src 'self' 'nonce-" in anonymous["Content-Security-Policy"]


def test_nonces_differ_per_request(account):
    web = Client()
    web.force_login(account.user)
    assert _nonce(web.get("/")) != _nonce(web.get("/"))


def test_api_docs_load_their_assets_from_this_server_under_a_strict_policy(api):
    docs = api.get("/v1/docs")
    page = docs.content.decode()
    assert docs.status_code == 200 and "/static/ninja/swagger-ui-bundle.js" in page and "cdn.jsdelivr.net" not in page
    policy = docs["Content-Security-Policy"]
    assert "script-src 'self';" in policy and "http" not in policy
    assert "http" not in api.get("/v1/agents/")["Content-Security-Policy"]


def test_clickjacking_and_sniffing_headers(account):
    r = Client().get("/login/")
    assert r["X-Frame-Options"] == "DENY" and r["X-Content-Type-Options"] == "nosniff"


def test_no_hsts_and_no_secure_cookies_by_default(account):
    web = Client()
    r = web.get("/login/", secure=True)
    assert "Strict-Transport-Security" not in r
    _, login = _login("alice", PASSWORD, client=web)
    assert not login.cookies["sessionid"]["secure"]


def test_hsts_and_secure_cookies_behind_settings(account, settings):
    settings.SECURE_HSTS_SECONDS = 31536000
    settings.SESSION_COOKIE_SECURE = settings.CSRF_COOKIE_SECURE = True
    web = Client()
    assert web.get("/login/", secure=True)["Strict-Transport-Security"].startswith("max-age=31536000")
    r = web.post("/login/", {"username": "alice", "password": PASSWORD}, secure=True)
    assert r.cookies["sessionid"]["secure"] and r.cookies["sessionid"]["httponly"]


def test_https_settings_come_from_the_environment():
    code = (
        "from django.conf import settings as s; import json; print(json.dumps([s.SESSION_COOKIE_SECURE, "
        "s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS, s.SECURE_PROXY_SSL_HEADER, s.MAX_REQUEST_BYTES, "
        "s.DATA_UPLOAD_MAX_MEMORY_SIZE, s.LOGIN_FAILURES_PER_ACCOUNT]))"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "SECURE_COOKIES": "true",
        "HSTS_SECONDS": "600",
        "TRUST_X_FORWARDED_PROTO": "1",
        "MAX_REQUEST_BYTES": "12345",
        "LOGIN_FAILURES_PER_ACCOUNT": "3",
    }
    out = subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); " + code],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert json.loads(out.strip().splitlines()[-1]) == [
        True,
        True,
        600,
        ["HTTP_X_FORWARDED_PROTO", "https"],
        12345,
        12345,
        3,
    ]


# --- model listings from owner-configured providers are per owner ---


class _FakeListing:
    """An OpenAI-compatible server on loopback whose model list depends on the key it is asked with."""

    def __init__(self):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        listing = self
        self.calls = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                key = self.headers.get("Authorization", "").removeprefix("Bearer ")
                listing.calls.append((self.path, key))
                body = json.dumps({"data": [{"id": f"model-of-{key}"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        serve_in_thread(self.server)
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("same_key", [False, True])
def test_model_listings_are_cached_per_owner(db, monkeypatch, settings, same_key):
    from core import providers
    from core.models import ProviderConfig

    settings.EGRESS_ALLOW = ["127.0.0.1"]  # the owners' server is the test's, on loopback
    fake = _FakeListing()
    monkeypatch.setattr(providers, "_listing_cache", {})
    alice, bob = make_account("alice"), make_account("bob")
    url = fake.url
    ProviderConfig.objects.create(
        owner=alice.org, kind="openai_compatible", name="mine", api_key="alice-key", base_url=url
    )
    ProviderConfig.objects.create(
        owner=bob.org,
        kind="openai_compatible",
        name="mine",
        api_key="alice-key" if same_key else "bob-key",
        base_url=url,
    )
    handles = lambda org: [m["handle"] for m in providers.models_list(owner=org) if m["provider_name"] == "mine"]  # noqa: E731
    assert handles(alice.org) == ["mine/model-of-alice-key"]
    assert handles(alice.org) == ["mine/model-of-alice-key"]  # cached: asked once
    assert handles(bob.org) == ["mine/model-of-" + ("alice-key" if same_key else "bob-key")]
    assert len(fake.calls) == 2  # bob's listing was fetched with bob's own credentials, never served from alice's
    fake.stop()
