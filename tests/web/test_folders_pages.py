"""The Folders page and the workspace's Files pane, server side: folders listed with their model, files and agents;
bad names refused inline; real uploads (Markdown, HTML, text) queued and their rows polled until processed, a wrong
type or too big a file refused with a message; the viewer's numbered lines and chunks, escaped; attach, detach, open
and close from the pane; a file tool's result linked to the lines it returned; another account's folders not found."""

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.runs.runner import run_agent
from memory.files import services
from memory.files.ingest import file_ingest
from memory.models import FileAgent, Folder, FolderFile
from tests.factories import make_agent
from tests.fake_llm import FakeLLM

pytestmark = pytest.mark.django_db

NOTES = (
    "# Harbour notes\n\nThe night ferry leaves at 22:40.\n\nThe <script>alert('x')</script> keeper waves.\n"
    + "".join(f"Line {n} about tides and the harbour wall.\n" for n in range(1, 120))
)


def _post_file(web, folder, name: str, data: bytes, content_type: str = "text/plain"):
    return web.post(
        f"/folders/{folder.id}/upload/", {"file": SimpleUploadedFile(name, data, content_type=content_type)}
    )


@pytest.fixture
def folder(account):
    return services.folder_create(owner=account.org, name="docs", description="Harbour papers")


def _ingested(folder, name: str = "notes.md", data: bytes = NOTES.encode()) -> FolderFile:
    file, _ = services.file_upload(folder=folder, file_name=name, content_type="text/markdown", data=data)
    assert file_ingest(file_id=file.id) == "completed"
    file.refresh_from_db()
    return file


def test_the_folders_page_lists_each_folder_with_its_model_files_and_agents(web, account, folder):
    _ingested(folder)
    agent = make_agent(account.org, name="Reader")
    services.folder_attach(agent=agent, folder=folder)
    services.folder_create(owner=account.org, name="empty", embedding="openai/text-embedding-3-small")
    page = web.get("/folders/").content.decode()
    assert '<a href="/folders/">Folders</a>' in page.replace(' class="active"', "")  # in the top navigation
    rows = page[page.index('id="folders-list"') :]
    docs = rows[rows.index(f'data-folder="{folder.id}"') :]
    docs = docs[: docs.index("</tr>")]
    assert "<strong>docs</strong>" in docs and "Harbour papers" in docs and "full-text search" in docs
    assert '<td class="small">1 file</td>' in docs and f'href="/agents/{agent.id}/">Reader</a>' in docs
    assert "<code>openai/text-embedding-3-small</code>" in rows and "no agent" in rows


def test_the_folders_page_reads_the_same_number_of_times_for_one_folder_or_many(web, account, folder):
    _ingested(folder)
    with CaptureQueriesContext(connection) as one:
        assert web.get("/folders/").status_code == 200
    for n in range(3):
        more = services.folder_create(owner=account.org, name=f"more-{n}")
        _ingested(more)
        services.folder_attach(agent=make_agent(account.org, name=f"agent-{n}"), folder=more)
    with CaptureQueriesContext(connection) as many:
        page = web.get("/folders/").content.decode()
    assert page.count("data-folder=") == 4 and "agent-2" in page
    assert len(many) == len(one), [q["sql"] for q in many]


def test_a_bad_or_taken_name_is_refused_inline(web, folder):
    for name, message in (
        ("", "This field is required."),
        ("a/b", "without &#x27;/&#x27;"),
        ("docs", "already exists"),
    ):
        response = web.post("/folders/new/", {"name": name})
        assert response.status_code == 400
        form = response.content.decode()
        form = form[form.index('id="create-folder"') : form.index("</section>", form.index('id="create-folder"'))]
        assert 'class="error field-error"' in form and message in form, (name, form)
    created = web.post("/folders/new/", {"name": "papers", "embedding": ""})
    assert created.status_code == 302
    renamed = web.post(created["Location"] + "rename/", {"name": "docs"})
    assert renamed.status_code == 400 and "A folder named &#x27;docs&#x27; already exists" in renamed.content.decode()


@pytest.mark.parametrize(
    ("name", "data", "content_type", "expected"),
    [
        ("notes.md", NOTES.encode(), "text/markdown", "Harbour notes"),
        (
            "page.html",
            b"<html><body><h1>Timetable</h1><p>The ferry leaves at 22:40.</p></body></html>",
            "text/html",
            "Timetable",
        ),
        ("plain.txt", b"Just one line of text.", "text/plain", "Just one line of text."),
    ],
    ids=["markdown", "html", "text"],
)
def test_an_upload_is_queued_and_its_row_polls_until_it_is_processed(web, folder, name, data, content_type, expected):
    response = _post_file(web, folder, name, data, content_type)
    assert response.status_code == 201, response.content
    file = FolderFile.objects.get(folder=folder, file_name=name)
    row = response.content.decode()
    assert f'id="file-{file.id}"' in row and 'data-status="pending"' in row
    assert f'hx-get="/folders/{folder.id}/files/{file.id}/row/" hx-trigger="every 1s"' in row

    assert file_ingest(file_id=file.id) == "completed"
    done = web.get(f"/folders/{folder.id}/files/{file.id}/row/").content.decode()
    assert 'data-status="completed"' in done and "hx-trigger" not in done  # polling stops
    assert f'href="/folders/{folder.id}/files/{file.id}/"' in done
    assert re.search(r"\d+ chunks? · \d+ lines", done)
    assert expected in web.get(f"/folders/{folder.id}/files/{file.id}/").content.decode()


def test_a_wrong_type_or_too_big_a_file_is_refused_with_a_message(web, folder, settings):
    wrong = _post_file(web, folder, "setup.exe", b"MZ\x90\x00", "application/x-msdownload")
    assert wrong.status_code == 415
    assert wrong.content.decode().startswith("Unsupported file type: application/x-msdownload (filename: setup.exe)")
    settings.FOLDER_FILE_MAX_BYTES = 100
    big = _post_file(web, folder, "big.txt", b"x" * 101)
    assert big.status_code == 413
    assert big.content.decode() == "big.txt is 101 bytes; files in folders may be at most 100 bytes."
    missing = web.post(f"/folders/{folder.id}/upload/", {})
    assert missing.status_code == 400 and missing.content.decode() == "Choose a file to upload."
    assert not FolderFile.objects.filter(folder=folder).exists()


def test_a_file_that_cannot_be_parsed_shows_error_with_its_reason(web, folder):
    response = _post_file(web, folder, "broken.pdf", b"%PDF-1.4 not really", "application/pdf")
    file = FolderFile.objects.get(folder=folder)
    assert file_ingest(file_id=file.id) == "error"
    row = web.get(f"/folders/{folder.id}/files/{file.id}/row/").content.decode()
    assert response.status_code == 201 and '<span class="badge err">error</span>' in row
    assert "Could not parse the file as application/pdf" in row and "hx-trigger" not in row


def test_the_viewer_shows_numbered_lines_and_chunk_boundaries_with_the_text_escaped(web, folder):
    file = _ingested(folder)
    page = web.get(f"/folders/{folder.id}/files/{file.id}/?start=4&end=6").content.decode()
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page and "<script>alert" not in page
    assert (
        '<div class="fl" id="L1"><a class="ln" href="#L1" aria-label="line 1">1</a><span class="tx"># Harbour notes'
        in page
    )
    assert re.search(r'<div class="fl hit" id="L4">.*Line 1 about tides', page)
    assert re.search(r'<div class="fl hit" id="L6">', page) and '<div class="fl" id="L7">' in page
    starts = re.findall(
        r'<div class="chunk-start" id="chunk-(\d+)">chunk #\d+ · lines (\d+)–(\d+) · page 1</div>', page
    )
    assert len(starts) == file.total_chunks > 1 and starts[0] == ("0", "1", starts[0][2])
    assert int(starts[1][1]) <= int(starts[0][2])  # chunks overlap: the second begins before the first ends
    assert f'href="?start={starts[1][1]}&amp;end={starts[1][2]}#L{starts[1][1]}"' in page  # the chunk list


def test_the_viewer_marks_where_each_page_of_a_pdf_begins(web, folder):
    from tests.memory.test_folders import pdf_bytes

    file = _ingested(folder, "harbour.pdf", pdf_bytes(3))
    page = web.get(f"/folders/{folder.id}/files/{file.id}/").content.decode()
    breaks = re.findall(
        r'<div class="page-break">page (\d+)</div>(?:<div class="chunk-start"[^>]*>[^<]*</div>)*<div class="fl" id="L\d+">'
        r'<a[^>]*>\d+</a><span class="tx">Chapter (\d+)',
        page,
    )
    assert breaks == [("2", "2"), ("3", "3")]
    assert "3 pages" in page


def test_another_accounts_folders_and_files_are_not_found(web, account, other_account):
    theirs = services.folder_create(owner=other_account.org, name="secret")
    file = _ingested(theirs)
    agent = make_agent(other_account.org, name="Theirs")
    base = f"/folders/{theirs.id}"
    for url in (f"{base}/", f"{base}/files/{file.id}/", f"{base}/files/{file.id}/row/", f"/agents/{agent.id}/files/"):
        assert web.get(url).status_code == 404, url
    for url in (f"{base}/rename/", f"{base}/delete/", f"{base}/upload/", f"{base}/files/{file.id}/delete/"):
        assert web.post(url, {"name": "mine"}).status_code == 404, url
    assert "secret" not in web.get("/folders/").content.decode()
    mine = make_agent(account.org, name="Mine")
    assert web.post(f"/agents/{mine.id}/files/attach/", {"folder_id": theirs.id}).status_code == 404
    assert FolderFile.objects.filter(pk=file.id).exists()


def test_the_files_pane_attaches_opens_closes_and_detaches(web, account, folder):
    file = _ingested(folder)
    agent = make_agent(account.org, name="Reader")
    pane = web.get(f"/agents/{agent.id}/files/").content.decode()
    assert f'<option value="{folder.id}">docs</option>' in pane and "No folder attached" in pane

    attached = web.post(f"/agents/{agent.id}/files/attach/", {"folder_id": folder.id})
    body = attached.content.decode()
    assert "context-changed" in attached["HX-Trigger"]
    assert 'hx-swap-oob="true"' in body and "open_files" in body  # the tools section gained the file tools
    assert "open · whole file" in body and "<strong>1</strong> of at most" in body

    closed = web.post(f"/agents/{agent.id}/files/{file.id}/close/").content.decode()
    assert '<span class="badge open-state">closed</span>' in closed and not FileAgent.objects.get(file=file).is_open
    services.file_open(agent=agent, file_id=file.id, start=3, end=9)
    pane = web.get(f"/agents/{agent.id}/files/").content.decode()
    assert "open · lines 3–9" in pane and "?start=3&amp;end=9#L3" in pane
    assert "open · whole file" in web.post(f"/agents/{agent.id}/files/{file.id}/open/").content.decode()

    stranger = web.post(f"/agents/{agent.id}/files/file-nope/open/").content.decode()
    assert 'id="files-error"' in stranger and "is not attached to agent" in stranger
    detached = web.post(f"/agents/{agent.id}/files/detach/{folder.id}/").content.decode()
    assert "No folder attached" in detached and not FileAgent.objects.filter(agent=agent).exists()


def test_a_file_tool_result_links_to_the_lines_it_returned(web, account, folder, fake_llm):
    file = _ingested(folder)
    agent = make_agent(account.org, name="Reader", agent_type="letta_v1_agent")
    web.post(f"/agents/{agent.id}/files/attach/", {"folder_id": folder.id})
    fake_llm.script(
        FakeLLM.tool("grep_files", {"pattern": "night ferry"}),
        FakeLLM.tool("open_files", {"file_requests": [{"file_name": "docs/notes.md", "offset": 9, "length": 5}]}),
        FakeLLM.tool("semantic_search_files", {"query": "keeper waves"}),
        FakeLLM.text("The ferry leaves at 22:40."),
    )
    result = run_agent(agent_id=agent.id, owner=account.org, input_messages=[{"role": "user", "content": "When?"}])
    assert result.status == "completed", result.error
    page = web.get(f"/agents/{agent.id}/").content.decode()
    links = re.findall(r'<a class="small file-result-link" href="(/agents/[^"]+/file-links/([^"]+)/)"', page)
    assert len(links) == 3
    viewer = f"/folders/{folder.id}/files/{file.id}/"
    grep, opened, searched = (web.get(url) for url, _ in links)
    assert grep.status_code == 302 and grep["Location"] == f"{viewer}?start=2&end=2#L2"
    assert opened.status_code == 302 and opened["Location"] == f"{viewer}?start=10&end=14#L10"
    assert searched.status_code == 302 and re.fullmatch(
        re.escape(viewer) + r"\?start=\d+&end=\d+#L\d+", searched["Location"]
    )
    assert web.get(f"/agents/{agent.id}/file-links/message-nope/").status_code == 404

    # a result citing several places lists them, each linked to its line
    fake_llm.script(FakeLLM.tool("grep_files", {"pattern": "harbour wall"}), FakeLLM.text("Many."))
    run_agent(agent_id=agent.id, owner=account.org, input_messages=[{"role": "user", "content": "Walls?"}])
    page = web.get(f"/agents/{agent.id}/").content.decode()
    url = re.findall(r'<a class="small file-result-link" href="([^"]+)"', page)[-1]
    listing = web.get(url)
    assert listing.status_code == 200
    body = listing.content.decode()
    assert body.count(f'<a href="{viewer}?start=') == 20  # grep_files shows 20 matches a page
    assert (
        f'<a href="{viewer}?start=4&amp;end=4#L4">docs/notes.md</a> <span class="muted small">match at line 4' in body
    )


def test_a_folder_whose_embedding_model_cannot_be_used_says_so_and_that_search_is_by_full_text(web, account, fake_llm):
    unusable = services.folder_create(owner=account.org, name="unserved", embedding="openai/text-embedding-3-small")
    usable = services.folder_create(owner=account.org, name="served", embedding="openai/text-embedding-3-small")
    assert 'id="embedding-problem"' not in web.get(f"/folders/{usable.id}/").content.decode()

    Folder.objects.filter(pk=unusable.pk).update(embedding="nowhere/<b>embed</b>")  # a provider since removed
    html = web.get(f"/folders/{unusable.id}/").content.decode()
    problem = re.search(r'<span class="error" id="embedding-problem"[^>]*>(.*?)</span>', html, re.S)
    assert problem, "the page does not say the folder's model cannot be used"
    assert "nowhere" in problem.group(1) and "searched by full text" in problem.group(1)
    assert "<b>" not in html.split('id="embedding-problem"')[0].rsplit("<code>", 1)[-1]  # the handle, escaped
