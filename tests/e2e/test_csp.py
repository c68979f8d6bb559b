"""The Content-Security-Policy in Chromium: every IDE page loads with no policy violation, and what the pages do
with scripts (htmx swaps, the workspace websocket, the code editor) still works under it."""

import re

from playwright.sync_api import expect

from tests.e2e.conftest import shot
from tests.factories import make_agent


def _watch(page) -> list[str]:
    """Collect CSP violations the page reports (console errors and securitypolicyviolation events)."""
    seen: list[str] = []
    page.on("console", lambda m: seen.append(m.text) if "Content Security Policy" in m.text else None)
    page.add_init_script(
        "document.addEventListener('securitypolicyviolation', e => "
        "console.error('Content Security Policy violation: ' + e.violatedDirective + ' ' + e.blockedURI))"
    )
    return seen


def test_ide_pages_run_under_the_csp_without_violations(signed_in, account):
    agent = make_agent(account.org, name="Ada")
    block = agent.blocks.get(label="persona")
    page = signed_in.new_page()
    violations = _watch(page)

    response = page.goto("/")
    assert "script-src 'self' 'nonce-" in response.headers["content-security-policy"]
    page.fill("input[name=q]", "Ad")  # htmx: the list is re-rendered as you type
    expect(page.locator("#agents-rows")).to_contain_text("Ada")

    page.goto(f"/agents/{agent.id}/")
    expect(page.locator("body[data-ws=open]")).to_have_count(1)  # workspace.js ran and its websocket connected
    expect(page.locator("#context-panel")).not_to_be_empty()
    shot(page, "40-workspace-under-csp")

    page.goto("/tools/")
    expect(page.locator(".CodeMirror")).to_have_count(1)  # the editor's scripts ran
    page.goto(f"/blocks/{block.id}/")
    page.fill("textarea[name=value]", "x" * (block.limit + 1))
    expect(page.locator(".limit-error")).to_be_visible()  # the page's nonce'd inline script ran
    for url in ("/blocks/", "/settings/"):
        page.goto(url)
        expect(page.locator("main")).to_be_visible()
    assert violations == []


def test_login_and_import_pages_under_the_csp(chromium, live_server_url, account, tmp_path):
    import json

    from core.agents.agentfile.exporter import agentfile_export

    context = chromium.new_context(base_url=live_server_url)
    page = context.new_page()
    violations = _watch(page)
    page.goto("/login/")
    page.fill("input[name=username]", "alice")
    page.fill("input[name=password]", "correct horse battery staple")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/$"))

    path = tmp_path / "a.af"
    path.write_text(json.dumps(agentfile_export(agent=make_agent(account.org, name="Exported")), default=str))
    page.set_input_files("#import-form input[type=file]", str(path))
    page.click("#preview-import")  # htmx posts the file (multipart) and swaps the preview in
    expect(page.locator("#import-preview")).to_contain_text("Exported")
    shot(page, "41-import-preview-inline")
    context.close()
    assert violations == []
