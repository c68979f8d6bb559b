"""Folders in Chromium: a file dropped on a folder's page uploads and processes to completed (a wrong type chosen with
the picker is refused in its row), the folder is attached from the workspace's Files tab, and the agent's grep_files
call in the conversation links to the file viewer at the matching line. No Content-Security-Policy violation."""

import re

from playwright.sync_api import expect

from memory.files import services
from tests.e2e.conftest import shot
from tests.e2e.test_layout import CHECKS
from tests.factories import make_agent
from tests.fake_llm import FakeLLM

NOTES = "# Harbour notes\n\nThe night ferry leaves at 22:40 from pier <b>4</b>.\n\n" + "".join(
    f"Line {n} about tides and the harbour wall.\n" for n in range(1, 60)
)


def _watch_csp(page) -> list[str]:
    seen: list[str] = []
    page.on("console", lambda m: seen.append(m.text) if "Content Security Policy" in m.text else None)
    return seen


def _fits(page, name: str, problems: list[str]) -> None:
    """The layout audit of every page (nothing cut off or overlapping, contrast) in both themes, at this width."""
    for theme in ("light", "dark"):
        page.evaluate(f"document.documentElement.dataset.theme = '{theme}'")
        page.evaluate("document.fonts.ready")
        problems += [f"{name} {theme}: {p}" for p in page.evaluate(CHECKS)]
    page.evaluate("document.documentElement.dataset.theme = 'light'")


def test_upload_process_attach_and_follow_a_file_tool_call(signed_in, account, fake_llm):
    folder = services.folder_create(owner=account.org, name="docs")
    agent = make_agent(account.org, name="Reader", agent_type="letta_v1_agent")
    page = signed_in.new_page()
    violations = _watch_csp(page)
    problems: list[str] = []

    page.goto("/folders/")
    expect(page.locator(f'#folders-list tr[data-folder="{folder.id}"]')).to_contain_text("full-text search")
    page.click(f'#folders-list a[href="/folders/{folder.id}/"]')
    expect(page.locator("#dropzone[data-ready=true]")).to_have_count(1)  # its (deferred) script listens

    # drop a Markdown file on the zone: its row uploads, then polls its status until the ingest completed
    dropped = page.evaluate_handle(
        """([name, text]) => {
            const dt = new DataTransfer();
            dt.items.add(new File([text], name, {type: "text/markdown"}));
            return dt;
        }""",
        ["notes.md", NOTES],
    )
    page.dispatch_event("#dropzone", "drop", {"dataTransfer": dropped})
    row = page.locator("#files-rows tr.file-row", has_text="notes.md")
    expect(row).to_have_attribute("data-status", "completed", timeout=30000)
    expect(row.locator(".file-status")).to_contain_text("lines")

    # a type no parser reads, chosen with the picker, is refused in its own row with the reason
    page.set_input_files(
        "#file-input", files=[{"name": "setup.exe", "mimeType": "application/x-msdownload", "buffer": b"MZ"}]
    )
    refused = page.locator("#files-rows tr.upload-row", has_text="setup.exe")
    expect(refused).to_have_attribute("data-status", "refused")
    expect(refused.locator(".file-error")).to_contain_text("Unsupported file type")
    shot(page, "files-01-folder-1280")
    _fits(page, "folder 1280", problems)
    page.set_viewport_size({"width": 390, "height": 844})
    shot(page, "files-02-folder-390")
    _fits(page, "folder 390", problems)
    page.set_viewport_size({"width": 1280, "height": 860})

    # the viewer: numbered lines, chunk boundaries, the <b> in the text shown as text
    row.locator("a").first.click()
    expect(page.locator("#L2 .tx")).to_have_text("The night ferry leaves at 22:40 from pier <b>4</b>.")
    expect(page.locator(".chunk-start").first).to_contain_text("chunk #0 · lines 1–")
    assert page.locator("#file-text b").count() == 0

    # attach the folder from the workspace's Files tab: the file is open in the agent's context
    page.goto(f"/agents/{agent.id}/")
    expect(page.locator("body[data-ws=open]")).to_have_count(1)
    page.click('.pill-nav [data-tab="tab-files"]')
    page.select_option("#attach-folder-select", label="docs")
    page.click("#attach-folder-btn")
    item = page.locator("#agent-files .agent-file", has_text="notes.md")
    expect(item.locator(".open-state")).to_have_text("open · whole file")
    expect(page.locator("#attached-tools")).to_contain_text("grep_files")  # the tools section gained the file tools
    shot(page, "files-03-workspace-files-1280")
    _fits(page, "workspace files 1280", problems)

    # the agent greps its file; the call's result links to the viewer at the matching line
    fake_llm.script(
        FakeLLM.tool("grep_files", {"pattern": "night ferry"}),
        FakeLLM.text("The night ferry leaves at 22:40."),
    )
    page.fill("#composer-input", "When does the night ferry leave?")
    page.press("#composer-input", "Enter")
    expect(page.locator("#live .msg.assistant_message")).to_contain_text("22:40", timeout=60000)
    link = page.locator("#live .msg.tool_return_message a.file-result-link")
    expect(link).to_have_text("Show in the file viewer")
    with signed_in.expect_page() as opened:
        link.click()
    viewer = opened.value
    expect(viewer.locator(".fl.hit")).to_have_count(1)
    expect(viewer.locator(".fl.hit")).to_contain_text("The night ferry leaves at 22:40")
    assert re.search(r"\?start=2&end=2#L2$", viewer.url)
    shot(viewer, "files-04-viewer-at-the-match-1280")
    _fits(viewer, "viewer 1280", problems)
    viewer.set_viewport_size({"width": 390, "height": 844})
    shot(viewer, "files-05-viewer-390")
    _fits(viewer, "viewer 390", problems)

    # after a reload the stored tool result carries the same link
    page.reload()
    expect(page.locator("#history .msg.tool_return_message a.file-result-link")).to_have_count(1)
    page.set_viewport_size({"width": 390, "height": 844})
    page.click('.ws-tabs [data-pane="inspector"]')
    page.click('.pill-nav [data-tab="tab-files"]')
    expect(page.locator("#agent-files .agent-file", has_text="notes.md")).to_be_visible()
    shot(page, "files-06-workspace-files-390")
    _fits(page, "workspace files 390", problems)
    page.goto("/folders/")
    expect(page.locator(f'#folders-list tr[data-folder="{folder.id}"]')).to_contain_text("Reader")
    shot(page, "files-07-folders-390")
    _fits(page, "folders 390", problems)
    assert problems == [], "\n".join(problems)
    assert violations == []


def test_a_file_over_the_size_limit_is_refused_before_it_is_sent_and_its_row_dismissed(signed_in, account):
    folder = services.folder_create(owner=account.org, name="small")
    page = signed_in.new_page()
    page.goto(f"/folders/{folder.id}/")
    expect(page.locator("#dropzone[data-ready=true]")).to_have_count(1)
    page.evaluate("document.getElementById('dropzone').dataset.maxBytes = '10'")
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.url) if r.method == "POST" else None)
    page.set_input_files("#file-input", files=[{"name": "big.txt", "mimeType": "text/plain", "buffer": b"x" * 2048}])
    row = page.locator("#files-rows tr.upload-row", has_text="big.txt")
    expect(row).to_have_attribute("data-status", "refused")
    expect(row.locator(".file-size")).to_have_text("2.0 KB")  # as the server's filesizeformat writes it
    expect(row.locator(".file-error")).to_have_text("big.txt is 2048 bytes; files in folders may be at most 10 bytes.")
    expect(row.locator("progress")).to_be_hidden()
    expect(page.locator("#no-files")).to_have_count(0)
    assert sent == []
    row.get_by_role("button", name="Dismiss").click()
    expect(row).to_have_count(0)
    # deleting the folder asks first; declined, nothing is sent
    page.once("dialog", lambda d: d.dismiss())
    page.click("#delete-folder")
    expect(page.locator("#folder-name")).to_have_text("small")
    assert sent == []
