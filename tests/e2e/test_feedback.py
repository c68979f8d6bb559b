"""Feedback in Chromium: every action that can take a while disables its button and shows progress until it is
done (provider save, MCP add, import, replay, test runs); a provider's URL is asked when saved and one that does not
answer says so beside the button; a new API token is shown in view with a Copy button; a run whose provider cannot
be reached says 'The model provider at … is not reachable'; styled 404/500 pages. Slow requests are made slow by a
local server that answers only when the test opens its gate, or by holding the browser's request until the test
lets it go: the tests wait on conditions, never on time. Screenshots at 390/1280/1920 px, light and dark."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.test import RequestFactory
from django.views import defaults
from playwright.sync_api import expect

from core.agents import agent_tests
from core.models import ProviderConfig, Step
from core.runs.runner import run_agent
from tests.e2e.conftest import shot
from tests.e2e.test_debugger import FIRST_CALL_S, _open, _send
from tests.factories import make_agent
from tests.fake_llm import FakeLLM
from tests.helpers import free_port, in_thread, serve_in_thread

WIDTHS = (390, 1280, 1920)
SHOTS_FB = Path("/tmp/shots-fb")


def _shots(page, name: str) -> None:
    """The page as it is now at each width, light and dark."""
    size = page.viewport_size
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 860})
        for theme in ("light", "dark"):
            page.evaluate(f"document.documentElement.dataset.theme = '{theme}'")
            shot(page, f"feedback-{name}-{width}-{theme}")
            if SHOTS_FB.is_dir():
                page.screenshot(path=str(SHOTS_FB / f"{name}-{width}-{theme}.png"), full_page=False)
    page.evaluate("document.documentElement.dataset.theme = 'light'")
    page.set_viewport_size(size)


class _Gated(BaseHTTPRequestHandler):
    """Answers nothing until the test opens the gate; then a model list (GET …/models) or a 500."""

    def log_message(self, *args):
        pass

    def _answer(self, status: int, body: dict) -> None:
        self.server.asked.set()
        self.server.gate.wait(60)
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # noqa: N802
        if self.path.rstrip("/").endswith("/models"):
            self._answer(200, {"object": "list", "data": [{"id": "slow-model", "object": "model"}]})
        else:
            self._answer(404, {"error": "not found"})

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer(500, {"error": "this is not an MCP server"})


@pytest.fixture
def gated():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Gated)
    server.daemon_threads = True
    server.gate, server.asked = threading.Event(), threading.Event()
    server.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    serve_in_thread(server)
    try:
        yield server
    finally:
        server.gate.set()
        server.shutdown()
        server.server_close()


@pytest.fixture
def loopback_egress(monkeypatch):
    """The test's servers are on loopback: the IDE server may reach them for owners (request before signed_in)."""
    monkeypatch.setenv("EGRESS_ALLOW", "127.0.0.1")


def _held(page, pattern: str) -> list:
    """Requests to `pattern` wait in the browser until the test continues them."""
    held: list = []
    page.route(pattern, lambda route: held.append(route))
    return held


def _release(page, held: list) -> None:
    """Let the held requests go (waiting, a condition, until Playwright has handed the route to the test)."""
    for _ in range(200):
        if held:
            break
        page.wait_for_timeout(50)  # lets Playwright dispatch its events; the condition is `held`
    assert held, "the request was not held"
    for route in held:
        route.continue_()
    held.clear()


def _watch_busy(page, button: str, status: str) -> None:
    """Record, in the page's session storage, how `button` and `status` look once the button is disabled: a plain
    form's post navigates, and Playwright reads no page while a navigation is under way; the record survives it."""
    page.evaluate(
        """([button, status]) => {
            const b = document.querySelector(button);
            new MutationObserver(() => {
                const s = document.querySelector(status);
                if (!b.disabled || sessionStorage.getItem("fb-busy")) return;
                sessionStorage.setItem("fb-busy", JSON.stringify({
                    busy: b.getAttribute("aria-busy"), status: s && s.offsetParent !== null ? s.textContent.trim() : null,
                }));
            }).observe(b, {attributes: true});
            sessionStorage.removeItem("fb-busy");
        }""",
        [button, status],
    )


def _seen_busy(page) -> dict:
    return json.loads(page.evaluate("sessionStorage.getItem('fb-busy')") or "{}")


def _provider_form(page, name: str, url: str) -> None:
    page.goto("/settings/")
    page.select_option("#provider-form select[name=kind]", "openai_compatible")
    page.fill("#provider-form input[name=name]", name)
    page.fill("#provider-form input[name=base_url]", url)
    page.fill("#provider-form input[name=api_key]", "sk-mine")


def test_saving_a_provider_waits_for_its_answer_with_the_button_disabled(loopback_egress, gated, signed_in, account):
    page = signed_in.new_page()
    _provider_form(page, "slow", gated.url)
    _watch_busy(page, "#save-provider", "#provider-form .busy")
    page.click("#save-provider", no_wait_after=True)
    assert gated.asked.wait(30)  # the server is asked for its models, and answers only when the gate opens
    gated.gate.set()
    message = page.locator("#provider-message")
    expect(message).to_have_text("Saved slow. Its server answered.")
    expect(message).to_be_in_viewport()
    assert _seen_busy(page) == {"busy": "true", "status": "checking the provider…"}
    expect(page.locator("#save-provider")).to_be_enabled()
    assert ProviderConfig.objects.get(owner=account.org, name="slow").base_url == gated.url


def test_an_unreachable_provider_says_so_beside_the_button_then_in_the_run(
    loopback_egress, signed_in, account, fake_llm
):
    url = f"http://127.0.0.1:{free_port()}/v1"
    page = signed_in.new_page()
    page.set_viewport_size({"width": 390, "height": 800})
    _provider_form(page, "mine", url)
    page.click("#save-provider")
    beside = page.locator("#provider-form-error")
    expect(beside).to_contain_text(f"The model provider at {url} is not reachable")
    expect(beside).to_be_in_viewport()  # the page opens where the error is, not at its top
    expect(page.locator("#base-url-error")).to_contain_text(f"The model provider at {url} is not reachable")
    assert not ProviderConfig.objects.filter(owner=account.org).exists()
    _shots(page, "provider-unreachable")

    page.check("#save-anyway input")
    page.fill("#provider-form input[name=api_key]", "sk-mine")
    page.click("#save-provider")
    expect(page.locator("#provider-message")).to_contain_text("Saved mine, but it cannot be used yet.")
    expect(page.locator("#provider-message")).to_be_in_viewport()
    _shots(page, "provider-saved-anyway")

    agent = make_agent(account.org, name="Unreachable", model="mine/some-model")
    work = _open(signed_in, agent.id)
    _send(work, "hello?")
    expect(work.locator("#live .run-failed")).to_contain_text(
        f"The model provider at {url} is not reachable", timeout=FIRST_CALL_S
    )
    expect(work.locator("#live .msg.user_message.failed [data-retry]")).to_be_visible()


def test_a_new_token_is_shown_in_view_with_a_copy_button(signed_in, live_server_url):
    signed_in.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server_url)
    page = signed_in.new_page()
    page.set_viewport_size({"width": 390, "height": 740})
    page.goto("/settings/")
    page.fill("#tokens input[name=name]", "laptop")
    page.click("#create-token")
    copy = page.locator("#copy-token")
    expect(copy).to_be_in_viewport()
    expect(copy).to_be_focused()
    token = page.locator("#new-token-value").inner_text()
    assert token.startswith("aide_") and len(token) > 20
    _shots(page, "token-new")
    copy.click()
    expect(copy).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == token


def test_adding_an_mcp_server_disables_the_button_until_it_answered(loopback_egress, gated, signed_in, account):
    page = signed_in.new_page()
    page.goto("/mcp-servers/")
    page.fill("#mcp-name", "slowmcp")
    page.select_option("#mcp-type", "streamable_http")
    page.fill("#mcp-url", gated.url.removesuffix("/v1") + "/mcp")
    page.click("#mcp-add")
    expect(page.locator("#mcp-add")).to_be_disabled()
    expect(page.locator("#mcp-busy")).to_be_visible()
    assert gated.asked.wait(30)
    _shots(page, "mcp-connecting")
    gated.gate.set()
    expect(page.locator("#mcp-list")).to_contain_text("slowmcp", timeout=FIRST_CALL_S)
    expect(page.locator("#mcp-add")).to_be_enabled()
    expect(page.locator("#mcp-busy")).to_be_hidden()


def test_an_mcp_form_error_shows_beside_the_button(signed_in, account):
    page = signed_in.new_page()
    page.goto("/mcp-servers/")
    page.fill("#mcp-name", "nocommand")
    page.click("#mcp-add")
    beside = page.locator("#mcp-add-error")
    expect(beside).to_be_visible()
    expect(beside).to_contain_text("Not added")
    expect(page.locator("#mcp-add")).to_be_enabled()
    _shots(page, "mcp-error")


def test_import_preview_and_import_show_progress(signed_in, account, tmp_path):
    from core.agents.agentfile.exporter import agentfile_export

    path = tmp_path / "a.af"
    path.write_text(json.dumps(agentfile_export(agent=make_agent(account.org, name="Exported")), default=str))
    page = signed_in.new_page()
    page.goto("/")
    held = _held(page, "**/agents/import/")
    page.set_input_files("#import-form input[type=file]", str(path))
    page.click("#preview-import")
    expect(page.locator("#preview-import")).to_be_disabled()
    expect(page.locator("#preview-import")).to_have_class("small htmx-request")
    _release(page, held)
    expect(page.locator("#import-preview")).to_contain_text("Exported")
    expect(page.locator("#preview-import")).to_be_enabled()

    _watch_busy(page, "#confirm-import", "#import-preview .busy")
    page.click("#confirm-import", no_wait_after=True)
    _release(page, held)
    page.wait_for_url("**/agents/agent-*/")
    assert _seen_busy(page) == {"busy": "true", "status": "importing…"}


def test_replay_disables_its_button_while_the_models_answer(signed_in, account, fake_llm):
    agent = make_agent(account.org, name="Replayed")
    fake_llm.script(FakeLLM.tool("send_message", {"message": "Hello."}))
    in_thread(run_agent, agent_id=agent.id, owner=account.org, input_messages=[{"role": "user", "content": "hi"}])
    step = Step.objects.filter(agent=agent).order_by("-created_at").first()
    page = signed_in.new_page()
    page.goto(f"/agents/{agent.id}/steps/{step.id}/replay/")
    held = _held(page, "**/replay/run/")
    _watch_busy(page, "#replay-submit", "#replay-waiting")
    page.click("#replay-submit", no_wait_after=True)
    _release(page, held)
    expect(page.locator("#replay-columns")).to_be_visible(timeout=FIRST_CALL_S)
    assert _seen_busy(page) == {"busy": "true", "status": "waiting for the models…"}
    expect(page.locator("#replay-submit")).to_be_enabled()


def test_running_a_test_disables_run_buttons_until_it_started(signed_in, account, fake_llm):
    agent = make_agent(account.org, name="Tested")
    agent_tests.test_save(
        agent=agent, test={"name": "says hi", "turns": ["hi"], "expect": {"reply": {"contains": "ok"}}}
    )
    agent.refresh_from_db()
    page = _open(signed_in, agent.id)
    page.click('.pill-nav [data-tab="tab-tests"]')
    run = page.locator("[data-run-test]").first
    expect(run).to_be_visible()
    held = _held(page, "**/tests/run/")
    run.click()
    expect(run).to_be_disabled()
    expect(page.locator("#run-all-tests")).to_be_disabled()
    expect(run).to_have_class("small htmx-request")
    _release(page, held)
    expect(page.locator(".test-run").first).to_be_visible(timeout=FIRST_CALL_S)
    expect(run).to_be_enabled()
    expect(page.locator("#run-all-tests")).to_be_enabled()


def test_the_404_and_500_pages_are_styled(signed_in, account, settings):
    page = signed_in.new_page()
    response = page.goto("/agents/no-such-agent-page/at/all/")
    assert response.status == 404
    expect(page.locator("#error-page h1")).to_have_text("This page does not exist")
    expect(page.locator(".topbar")).to_be_visible()
    _shots(page, "404")

    settings.DEBUG = False
    html = defaults.server_error(RequestFactory().get("/")).content.decode()
    page.route("**/__500__/", lambda route: route.fulfill(status=500, body=html, content_type="text/html"))
    page.goto("/__500__/")
    expect(page.locator("#error-page h1")).to_have_text("Something went wrong on the server")
    assert page.evaluate("getComputedStyle(document.querySelector('.error-page')).textAlign") == "center"
    _shots(page, "500")


def test_agent_settings_errors_show_beside_save_settings(signed_in, account, fake_llm):
    agent = make_agent(account.org, name="Settled")
    page = _open(signed_in, agent.id)
    page.fill("#agent-settings input[name=model]", "openai/not-a-model")
    page.click("#save-settings")
    beside = page.locator("#settings-form-error")
    expect(beside).to_contain_text("does not serve")
    expect(beside).to_be_in_viewport()
    expect(page.locator("#save-settings")).to_be_enabled()
    _shots(page, "agent-settings-error")
