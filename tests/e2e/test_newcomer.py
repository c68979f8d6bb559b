"""What a newcomer meets first: the API docs render with no network beyond this server, no request fails and
nothing is logged as an error on a visit to every page, and a block's history opens the step that changed it."""

import re
from urllib.parse import urlsplit

from playwright.sync_api import expect

from memory import services as memory_services
from tests.e2e.conftest import shot
from tests.factories import make_agent
from tests.fake_llm import FakeLLM
from tests.helpers import in_thread
from tools import services as tool_services


def _offline(page) -> list[str]:
    """Abort every request that leaves this machine; returns the URLs that tried."""
    tried: list[str] = []

    def route(r):
        if urlsplit(r.request.url).hostname in ("127.0.0.1", "localhost"):
            r.continue_()
        else:
            tried.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    return tried


def _watch(page) -> list[str]:
    """Console errors, uncaught exceptions, failed requests and error responses seen by the page."""
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"exception: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"failed: {r.url} {r.failure}"))
    page.on("response", lambda r: problems.append(f"{r.status}: {r.url}") if r.status >= 400 else None)
    return problems


DOCS_DRAWN = 30_000  # ms: how long Swagger UI may take to draw the API docs (see test_api_docs_render_offline)


def test_api_docs_render_offline(signed_in):
    page = signed_in.new_page()
    tried = _offline(page)
    problems = _watch(page)
    page.goto("/v1/docs")
    # Swagger UI draws the page in the browser from a large bundle and the whole spec: on a slow, shared runner that
    # alone outlasts Playwright's default 5 s wait, so this readiness wait is longer (speed is measured in bench/)
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Agents IDE", timeout=DOCS_DRAWN)
    operations = page.locator(".opblock")
    expect(operations.first).to_be_visible()
    assert operations.count() > 40
    expect(page.locator(".opblock-summary-path", has_text="/v1/agents/{agent_id}/messages").first).to_be_visible()
    shot(page, "wb-docs-offline")
    assert tried == [] and problems == []


def test_a_visit_to_every_page_logs_no_error_and_no_failed_request(signed_in, account):
    agent = make_agent(account.org, name="Ada")
    block = agent.blocks.get(label="persona")
    tool = tool_services.tool_create(
        owner=account.org, source_code='def ping() -> str:\n    """Ping."""\n    return "pong"\n'
    )
    page = signed_in.new_page()
    _offline(page)
    problems = _watch(page)
    for url, ready in [
        ("/", "#agents-rows"),
        (f"/agents/{agent.id}/", "body[data-ws=open]"),
        ("/blocks/", "main"),
        (f"/blocks/{block.id}/", "#history"),
        ("/tools/", ".CodeMirror"),
        (f"/tools/?tool={tool.id}", ".CodeMirror"),
        ("/settings/", "main"),
        (f"/agents/{agent.id}/delete/", "main"),
        ("/v1/docs", ".opblock"),
    ]:
        page.goto(url)
        expect(page.locator(ready).first).to_be_attached(timeout=DOCS_DRAWN if url == "/v1/docs" else None)
        page.wait_for_load_state("networkidle")
        assert problems == [], (url, problems)
    # the favicon is linked and served
    page.goto("/")
    href = page.locator("link[rel=icon]").get_attribute("href")
    assert page.request.get(href).status == 200


def test_block_history_opens_the_step_that_made_the_edit(signed_in, account, fake_llm):
    agent = make_agent(account.org, name="Ada")
    fake_llm.script(
        FakeLLM.tool("core_memory_append", {"label": "human", "content": "Loves oolong tea."}, heartbeat=True),
        FakeLLM.tool("send_message", {"message": "Noted."}),
    )
    from core.runs.runner import run_agent

    # on a plain thread: outside Playwright's event loop, where the runner's sync event sending belongs
    in_thread(
        run_agent, agent_id=agent.id, owner=agent.owner, input_messages=[{"role": "user", "content": "I love oolong"}]
    )
    human = agent.blocks.get(label="human")
    policies = memory_services.block_create(owner=account.org, label="policies", value="Refunds within 30 days.")
    memory_services.block_attach(agent=agent, block=policies)
    other = make_agent(account.org, name="Bob")
    page = signed_in.new_page()
    page.goto(f"/blocks/{human.id}/")
    page.locator("a.history-step").click()
    expect(page).to_have_url(re.compile(rf"/agents/{agent.id}/#step="))
    expect(page.locator("#step-detail .step-card strong").first).to_have_text("Step 1")
    expect(page.locator("#step-detail")).to_contain_text("core_memory_append")
    # another agent can attach this block from its workspace's first load, which says who uses it
    page.goto(f"/agents/{other.id}/")
    page.click("[data-tab=tab-memory]")
    option = page.locator("#attach-existing option", has_text="policies — used by Ada")
    expect(option).to_have_count(1)
    page.select_option("#attach-existing select", option.get_attribute("value"))
    page.click("#attach-existing button")
    expect(page.locator("#agent-blocks textarea", has_text="Refunds within 30 days.")).to_have_count(1)
    expect(page.locator("#attach-existing option", has_text="policies")).to_have_count(0)
