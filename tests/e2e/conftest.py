"""Browser tests: Debian's Chromium (never a downloaded browser) driving a daphne process that serves
agents_ide.asgi against this test run's database, with the fake LLM as the `openai` provider. A module's tests share
one browser (a context each), and its fake LLM and servers (tests/shared_servers.py)."""

import os
from pathlib import Path

import pytest

from agents_ide.settings import redis_channel_layers
from tests.helpers import daphne_start, free_port, redis_test_url, require_redis
from tests.shared_servers import fake_llm, module_fake_llm, module_servers  # noqa: F401 - fixtures

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
    """The session provided Chromium before any test ran (tests/system_needs.py); a browser test never skips."""
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing (apt-get install -y chromium); browser tests never skip", pytrace=False)


REDIS_TEST_URL = redis_test_url("e2e")


@pytest.fixture
def redis_layer(settings):
    """Share a Redis channel layer between this test and the server, so the test can send events to the page's
    agent group itself (core.events.send_events). Request it before `live_server_url`. Channels drops the layers it
    made when the setting changes, and again when it is restored."""
    require_redis(REDIS_TEST_URL)
    settings.CHANNEL_LAYERS = redis_channel_layers(REDIS_TEST_URL)  # the layer the server gets from REDIS_URL
    return REDIS_TEST_URL


@pytest.fixture
def live_server_url(request, transactional_db, fake_llm, module_servers):  # noqa: F811 - the fixtures imported above
    """A daphne process serving the ASGI app against the test database (with the `redis_layer` fixture, on that
    channel layer; otherwise its own in-process one), shared by a module's tests (tests/shared_servers.py)."""
    _require_chromium()
    redis_url = request.getfixturevalue("redis_layer") if "redis_layer" in request.fixturenames else ""
    env = {"REDIS_URL": redis_url}

    def start():
        artifacts = ROOT / "test-artifacts"
        port = free_port()
        return daphne_start(env=env, port=port, log=artifacts / f"daphne-{port}.log" if artifacts.exists() else None)

    yield module_servers.get(env, start).url
    module_servers.release(env, fake_llm)


@pytest.fixture(scope="module")
def chromium():
    """One browser for a module's tests (each test gets its own context: cookies and storage apart)."""
    _require_chromium()
    from playwright.sync_api import sync_playwright

    with pytest.MonkeyPatch.context() as patch, sync_playwright() as pw:
        # Playwright's sync API keeps an event loop on this thread; the test's own ORM calls are still synchronous.
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
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
