"""Browser tests: Debian's Chromium (never a downloaded browser) driving a daphne process that serves
agents_ide.asgi against this test run's database, with the fake LLM as the `openai` provider."""

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from agents_ide.settings import redis_channel_layers
from tests.conftest import IN_CI
from tests.helpers import database_url, free_port, require_redis

CHROMIUM = "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-artifacts" / "screenshots"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _require_chromium():
    if not os.path.exists(CHROMIUM):
        if IN_CI:
            pytest.fail(f"{CHROMIUM} is missing (apt-get install -y chromium); browser tests must run in CI")
        pytest.skip(f"{CHROMIUM} not installed (apt-get install -y chromium)")


REDIS_TEST_URL = os.environ.get("AIDE_TEST_REDIS_URL", "redis://127.0.0.1:6379/9")


@pytest.fixture
def redis_layer(settings):
    """Share a Redis channel layer between this test and the server, so the test can send events to the page's
    agent group itself (core.events.send_events). Request it before `live_server_url`. Channels drops the layers it
    made when the setting changes, and again when it is restored."""
    require_redis(REDIS_TEST_URL)
    settings.CHANNEL_LAYERS = redis_channel_layers(REDIS_TEST_URL)  # the layer the server gets from REDIS_URL
    return REDIS_TEST_URL


@pytest.fixture
def live_server_url(request, transactional_db, fake_llm):
    """A daphne process on a free port serving the ASGI app against the test database (with the `redis_layer`
    fixture, on that channel layer; otherwise its own in-process one)."""
    _require_chromium()
    port = free_port()
    redis_url = request.getfixturevalue("redis_layer") if "redis_layer" in request.fixturenames else ""
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "CSRF_TRUSTED_ORIGINS": f"http://127.0.0.1:{port}",
        "REDIS_URL": redis_url,
        "RUNS_IN_WORKER": "",
        "PYTHONUNBUFFERED": "1",
        # as scripts/serve does: the server derives the tools' callback address (PUBLIC_BASE_URL) from these
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "PUBLIC_BASE_URL": "",
    }
    log = (
        open(ROOT / "test-artifacts" / f"daphne-{port}.log", "w")
        if (ROOT / "test-artifacts").exists()
        else subprocess.DEVNULL
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "agents_ide.asgi:application"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=1) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the daphne test server did not start")
        time.sleep(0.2)
    try:
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def chromium(monkeypatch):
    _require_chromium()
    # Playwright's sync API keeps an event loop on this thread; the test's own ORM calls are still synchronous.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def signed_in(chromium, live_server_url, account):
    """A browser context logged in as the test account (session made through Django's own login)."""
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(account.user)
    context = chromium.new_context(viewport={"width": 1280, "height": 860}, base_url=live_server_url)
    context.add_cookies(
        [
            {
                "name": settings.SESSION_COOKIE_NAME,
                "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
                "url": live_server_url,
            }
        ]
    )
    context.set_default_timeout(15000)
    try:
        yield context
    finally:
        context.close()


def shot(page, name: str) -> None:
    """A screenshot in test-artifacts/screenshots/ (and /tmp/shots/ when it exists, for a quick look)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=False)
    if Path("/tmp/shots").is_dir():
        page.screenshot(path=f"/tmp/shots/{name}.png", full_page=False)
