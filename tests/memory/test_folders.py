"""Folders of files: real documents the tests write (PDF, DOCX, HTML) parsed, chunked with their lines and pages,
embedded with the fake embedder or stored for full text only, a corrupt file ending `error` with nothing written,
and an agent's open files closed least recently used first."""

import io

import pytest
from django.db import connection

from core.agents.services import agent_update
from memory.files import selectors, services
from memory.files.chunk import chunk_lines
from memory.files.ingest import file_ingest
from memory.files.lines import numbered_lines, window
from memory.files.parse import ParseError, parse
from memory.models import FileAgent, FileStatus, FolderFile, Passage
from memory.search.fulltext import ranked_ids

pytestmark = pytest.mark.django_db

EMBEDDING = "openai/text-embedding-3-small"
# One word found on one page only, for searches that must land on that page.
CODEWORDS = ("fjord", "amber", "birch", "cobalt", "dahlia", "ember", "garnet")


def pdf_bytes(pages: int) -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=11)
    for n in range(1, pages + 1):
        pdf.add_page()
        pdf.multi_cell(
            0,
            8,
            f"Chapter {n}\nOn page {n} the keeper guards the lighthouse number {n * 7}.",
            new_x="LMARGIN",
            new_y="NEXT",
        )
        for k in range(6):
            pdf.multi_cell(
                0, 8, f"Filler sentence {k} about harbours and tides on page {n}.", new_x="LMARGIN", new_y="NEXT"
            )
        pdf.multi_cell(0, 8, f"Codeword: {CODEWORDS[n % len(CODEWORDS)]}.", new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def docx_bytes() -> bytes:
    import docx

    document = docx.Document()
    document.add_heading("Recipe book", level=1)
    document.add_paragraph("The secret ingredient of the soup is smoked paprika.")
    document.add_paragraph("Serve it warm with bread.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


HTML = b"""<!doctype html><html><head><title>Trains</title><script>var hidden = 1;</script></head>
<body><h1>Timetable</h1><p>The <b>night train</b> to Lisbon leaves at 22:40.</p><ul><li>Platform 4</li></ul></body></html>"""


@pytest.fixture
def folder(account):
    return services.folder_create(owner=account.org, name="docs")


def upload(folder, name: str, data: bytes, content_type: str = "application/octet-stream") -> FolderFile:
    file, skipped = services.file_upload(folder=folder, file_name=name, content_type=content_type, data=data)
    assert not skipped
    return file


# --------------------------------------------------------------------------- parsing, lines, chunks


def test_pdf_pages_survive_parsing_and_chunking():
    parsed = parse(data=pdf_bytes(3), mime="application/pdf", file_name="book.pdf")
    assert parsed.pages == 3
    lines = numbered_lines(parsed.text)
    keeper = [line for line in lines if "lighthouse number 14" in line.text]
    assert keeper and keeper[0].page == 2
    chunks = chunk_lines(lines, chunk_tokens=50)
    assert len(chunks) > 3
    assert chunks[0].start_line == 1 and chunks[-1].end_line == len(lines)
    # consecutive chunks overlap by whole lines and never skip one
    for before, after in zip(chunks, chunks[1:], strict=False):
        assert after.start_line <= before.end_line + 1
        assert after.start_line > before.start_line
    assert any(c.start_page == 1 and c.end_page == 2 for c in chunks) or all(c.start_page == c.end_page for c in chunks)


def test_docx_and_html_become_text_without_markup():
    text = parse(
        data=docx_bytes(),
        mime="application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        file_name="r.docx",
    ).text
    assert "smoked paprika" in text and "Recipe book" in text
    html = parse(data=HTML, mime="text/html", file_name="t.html").text
    assert "night train" in html and "Platform 4" in html
    assert "<b>" not in html and "hidden" not in html


def test_corrupt_pdf_and_non_utf8_text_are_parse_errors():
    with pytest.raises(ParseError, match="application/pdf"):
        parse(data=b"%PDF-1.4 this is not really a pdf", mime="application/pdf", file_name="bad.pdf")
    with pytest.raises(ParseError, match="not UTF-8"):
        parse(data=b"\xff\xfe\xfa broken", mime="text/plain", file_name="bad.txt")


def test_window_numbers_lines_and_says_what_it_shows():
    lines = numbered_lines("alpha\n\n  beta\ngamma\ndelta\n")
    assert window(lines) == "[Viewing file start (out of 4 lines)]\n1: alpha\n2: beta\n3: gamma\n4: delta"
    assert window(lines, start=2, end=3) == "[Viewing lines 2 to 3 (out of 4 lines)]\n2: beta\n3: gamma"
    assert window(lines, start=3) == "[Viewing lines 3 to end (out of 4 lines)]\n3: gamma\n4: delta"
    code = numbered_lines("def f():\n    return 1\n", keep_indent=True)
    assert code[1].text == "    return 1"


# --------------------------------------------------------------------------- upload checks


def test_upload_checks_type_size_and_duplicates(folder, settings):
    with pytest.raises(
        services.UnsupportedType, match=r"Unsupported file type: application/x-msdownload \(filename: a.exe\)"
    ):
        services.file_upload(folder=folder, file_name="a.exe", content_type="application/x-msdownload", data=b"MZ")
    settings.FOLDER_FILE_MAX_BYTES = 10
    with pytest.raises(services.TooLarge, match="at most 10 bytes"):
        services.file_upload(folder=folder, file_name="a.txt", content_type="text/plain", data=b"x" * 11)
    settings.FOLDER_FILE_MAX_BYTES = 1000
    first = upload(folder, "notes.txt", b"one")
    second = upload(folder, "notes.txt", b"two")
    assert (first.file_name, second.file_name) == ("notes.txt", "notes_(1).txt")
    same, skipped = services.file_upload(
        folder=folder, file_name="notes.txt", content_type="text/plain", data=b"x", duplicate_handling="skip"
    )
    assert skipped and same.id == first.id
    with pytest.raises(services.DomainError, match="already exists in folder 'docs'"):
        services.file_upload(
            folder=folder, file_name="notes.txt", content_type="text/plain", data=b"x", duplicate_handling="error"
        )


# --------------------------------------------------------------------------- ingest


def test_pdf_ingest_without_embedder_is_searchable_by_full_text(folder):
    file = upload(folder, "harbour.pdf", pdf_bytes(4))
    assert file.status == FileStatus.PENDING
    assert file_ingest(file_id=file.id) == FileStatus.COMPLETED
    file.refresh_from_db()
    assert file.raw is None and file.page_count == 4 and file.line_count > 20
    assert file.total_chunks == file.chunks_embedded == Passage.objects.filter(file=file).count() > 0
    passages = Passage.objects.filter(file=file).order_by("metadata__chunk")
    assert all(p.agent_id is None and p.embedding is None and p.source == "file" for p in passages)
    hits = ranked_ids(queryset=Passage.objects.filter(folder=folder), query="lighthouse number 21", limit=3)
    best = Passage.objects.get(pk=hits[0])
    assert "lighthouse number 21" in best.text and best.metadata["start_page"] <= 3 <= best.metadata["end_page"]


def test_ingest_embeds_in_batches_with_the_folder_model(account, fake_llm):
    folder = services.folder_create(owner=account.org, name="embedded", embedding=EMBEDDING, embedding_chunk_size=60)
    file = upload(folder, "harbour.pdf", pdf_bytes(6))
    assert file_ingest(file_id=file.id) == FileStatus.COMPLETED
    rows = list(Passage.objects.filter(file=file))
    assert len(rows) > 1 and all(p.embedding_model == EMBEDDING and p.embedding_dim > 0 for p in rows)
    assert fake_llm.embedding_requests, "the fake embedder was called"


def test_corrupt_file_ends_error_with_nothing_written(folder):
    file = upload(folder, "broken.pdf", b"%PDF-1.7\n garbage that no parser reads")
    assert file_ingest(file_id=file.id) == FileStatus.ERROR
    file.refresh_from_db()
    assert file.status == "error" and "Could not parse the file" in file.error_message
    assert not Passage.objects.filter(file=file).exists() and file.raw is None


def test_embedding_failure_ends_error_and_writes_no_passage(account, fake_llm):
    fake_llm.stop()  # the provider is down
    folder = services.folder_create(owner=account.org, name="down", embedding=EMBEDDING)
    file = upload(folder, "n.md", b"# Title\n\nSome text to embed.\n")
    assert file_ingest(file_id=file.id) == FileStatus.ERROR
    file.refresh_from_db()
    assert file.error_message and not Passage.objects.filter(file=file).exists()


def test_deleting_a_file_deletes_its_passages_and_agent_views(folder, agent):
    file = upload(folder, "a.md", b"alpha\nbeta\n")
    file_ingest(file_id=file.id)
    services.folder_attach(agent=agent, folder=folder)
    assert Passage.objects.filter(file=file).exists() and FileAgent.objects.filter(file=file).exists()
    services.file_delete(file=file)
    assert not Passage.objects.filter(folder=folder).exists() and not FileAgent.objects.filter(agent=agent).exists()


def test_archival_memory_of_agents_is_untouched_by_file_passages(folder, agent):
    from memory import selectors as memory_selectors
    from memory import services as memory_services

    memory_services.passage_insert(agent=agent, text="archival lighthouse note")
    file_ingest(file_id=upload(folder, "l.txt", b"the lighthouse keeper\n").id)
    services.folder_attach(agent=agent, folder=folder)
    found = memory_selectors.passages_search(agent=agent, query="lighthouse")
    assert [p.text for p in found] == ["archival lighthouse note"]
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM memory_passage_rev WHERE agent_id IS NULL")
            assert cursor.fetchone()[0] == 0


# --------------------------------------------------------------------------- agents' views


def test_attach_opens_up_to_the_limit_and_open_closes_the_least_recently_used(account, agent):
    agent = agent_update(agent=agent, changes={"context_window_limit": 8000})  # 3 open files at most
    assert selectors.file_limits(agent).max_files_open == 3
    folder = services.folder_create(owner=account.org, name="lib")
    files = [upload(folder, f"f{i}.txt", f"file {i} line\nsecond line\n".encode()) for i in range(5)]
    for f in files:
        file_ingest(file_id=f.id)
    services.folder_attach(agent=agent, folder=folder)
    states = {s.file_id: s for s in selectors.agent_file_states(agent=agent)}
    assert [states[f.id].is_open for f in files] == [True, True, True, False, False]
    services.files_touch(agent=agent, file_ids={files[0].id})  # f0 used most recently: f1 is the oldest
    closed = services.file_open(agent=agent, file_id=files[4].id, start=2, end=2)
    assert closed == ["lib/f1.txt"]
    opened = {s.file_id for s in selectors.agent_file_states(agent=agent, is_open=True)}
    assert opened == {files[0].id, files[2].id, files[4].id}
    state = selectors.agent_file_states(agent=agent).get(file=files[4])
    assert (state.start_line, state.end_line) == (2, 2)
    with pytest.raises(services.Invalid, match="has only 2 lines"):
        services.file_open(agent=agent, file_id=files[3].id, start=9)
    services.file_close(agent=agent, file_id=files[0].id)
    assert sorted(services.files_close_all(agent=agent)) == ["lib/f2.txt", "lib/f4.txt"]
    services.folder_detach(agent=agent, folder_id=folder.id)
    assert not FileAgent.objects.filter(agent=agent).exists()


def test_a_file_finished_after_attach_joins_the_agents_view(folder, agent):
    services.folder_attach(agent=agent, folder=folder)
    file = upload(folder, "late.txt", b"arrived late\n")
    assert not FileAgent.objects.filter(agent=agent).exists()
    file_ingest(file_id=file.id)
    state = FileAgent.objects.get(agent=agent, file=file)
    assert state.is_open


def test_another_owners_folder_cannot_be_attached(folder, other_account):
    from tests.factories import make_agent

    stranger = make_agent(other_account.org, name="stranger", include_base_tools=False)
    with pytest.raises(services.NotFound):
        services.folder_attach(agent=stranger, folder=folder)
