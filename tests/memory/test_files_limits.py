"""Documents parse within limits: Office bombs (DOCX, XLSX, PPTX, a nested zip, a ratio bomb, too many entries, a lying
header) end `error` with the reason and stay failed; the parser's process is limited in CPU, memory and time and is
killed when its file is deleted; the text and passages of a file are bounded; an account's bytes and passages have
a quota; passages written in batches are invisible until the file completes and removed when it fails.

The bombs are built here with zipfile and the limits set low, so a few megabytes of expansion trip them."""

import io
import threading
import zipfile
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connections
from django.utils import timezone

from core.agents.recall import passages_search
from memory.files import recovery, selectors, services, types
from memory.files.archive import ArchiveRefused, archive_check
from memory.files.ingest import file_ingest
from memory.files.isolate import parse_isolated, parse_processes
from memory.files.limits import MB, ArchiveLimits, ParseLimits
from memory.files.parse import ParseError
from memory.files.tools import passages_for_query
from memory.models import FileStatus, FolderFile, Passage
from tests.fake_llm import Reply
from tests.helpers import until
from tests.memory.test_folders import docx_bytes

MAIN_PART = {".docx": "word/document.xml", ".xlsx": "xl/worksheets/sheet1.xml", ".pptx": "ppt/slides/slide1.xml"}
FILLER = b"<!-- the quick brown fox jumps over the lazy dog -->"
UNLIMITED_RATIO = 1e9


def office(ext: str) -> bytes:
    """A small real document of the type, as its library writes it."""
    out = io.BytesIO()
    if ext == ".docx":
        return docx_bytes()
    if ext == ".xlsx":
        import openpyxl

        book = openpyxl.Workbook()
        book.active["A1"] = "ledger"
        book.save(out)
    else:
        import pptx

        deck = pptx.Presentation()
        deck.slides.add_slide(deck.slide_layouts[5]).shapes.title.text = "Quarterly numbers"
        deck.save(out)
    return out.getvalue()


def rezipped(data: bytes, *, change: dict[str, bytes] | None = None, add: dict[str, bytes] | None = None) -> bytes:
    """The zip with some parts replaced and others added (deflated, as Office writes them)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, (change or {}).get(info.filename, src.read(info.filename)))
        for name, body in (add or {}).items():
            dst.writestr(name, body)
    return out.getvalue()


def inflated(ext: str, extra: int) -> bytes:
    """The document with `extra` bytes of XML comments inside its main part (still valid XML): ~1000 to 1."""
    data = office(ext)
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        xml = z.read(MAIN_PART[ext])
    end = xml.rindex(b"</")  # before the root element's end tag
    return rezipped(data, change={MAIN_PART[ext]: xml[:end] + FILLER * (extra // len(FILLER)) + xml[end:]})


def wordy_docx(paragraphs: int) -> bytes:
    """A DOCX of many real paragraphs: seconds of parsing for mammoth, little to unpack."""
    data = docx_bytes()
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        xml = z.read("word/document.xml")
    body = b"<w:p><w:r><w:t>" + b"lorem ipsum dolor sit amet " * 20 + b"</w:t></w:r></w:p>"
    return rezipped(data, change={"word/document.xml": xml.replace(b"<w:body>", b"<w:body>" + body * paragraphs)})


def zip_of(name: str, body: bytes, method=zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", method) as z:
        z.writestr(name, body)
    return out.getvalue()


@pytest.fixture
def folder(account):
    return services.folder_create(owner=account.org, name="inbox")


def ingested(folder, name: str, data: bytes) -> FolderFile:
    file, _ = services.file_upload(folder=folder, file_name=name, content_type=None, data=data)
    file_ingest(file_id=file.id)
    return FolderFile.objects.get(pk=file.pk)


def assert_failed(file: FolderFile, reason: str) -> None:
    assert file.status == FileStatus.ERROR, (file.status, file.error_message)
    assert reason in file.error_message
    assert file.raw is None and not Passage.objects.filter(file_id=file.id).exists()


# --------------------------------------------------------------------------- archives


@pytest.mark.django_db
@pytest.mark.parametrize("ext", [".docx", ".xlsx", ".pptx"])
def test_an_office_bomb_ends_error_and_stays_failed(folder, settings, ext):
    settings.FOLDER_FILE_MAX_EXPANDED_BYTES = 2 * MB
    settings.FOLDER_FILE_MAX_RATIO = UNLIMITED_RATIO  # the size alone trips it
    bomb = inflated(ext, 4 * MB)
    assert len(bomb) < 100_000  # a small upload
    file = ingested(folder, f"bomb{ext}", bomb)
    assert_failed(file, "The document expands to more than 2 MB when unpacked")
    # a failed file is never picked up again: not by the sweep after a restart, not by its task run again
    FolderFile.objects.filter(pk=file.pk).update(updated_at=timezone.now() - timedelta(hours=1))
    assert recovery.files_recover(lease_s=1) == []
    assert file_ingest(file_id=file.id) == FileStatus.ERROR
    assert FolderFile.objects.get(pk=file.pk).error_message == file.error_message


@pytest.mark.django_db
def test_a_ratio_bomb_within_the_size_limit_is_refused(folder):
    file = ingested(folder, "dense.docx", inflated(".docx", 3 * MB))  # default limits: 200 MB, 200 to 1
    assert_failed(file, "Part 'word/document.xml' of the document is compressed more than 200 to 1")


@pytest.mark.django_db
def test_a_document_of_too_many_parts_is_refused(folder, settings):
    settings.FOLDER_FILE_MAX_ENTRIES = 40
    many = rezipped(docx_bytes(), add={f"extra/item{i}.xml": b"<a/>" for i in range(40)})
    assert_failed(ingested(folder, "many.docx", many), "The document holds more than 40 files inside")


@pytest.mark.django_db
def test_a_nested_zip_is_counted_as_its_parser_process_unpacks_it(folder, settings):
    settings.FOLDER_FILE_MAX_EXPANDED_BYTES = 2 * MB
    settings.FOLDER_FILE_MAX_RATIO = UNLIMITED_RATIO
    inner = zip_of("data.xml", FILLER * (4 * MB // len(FILLER)))  # 4 MB inside a few kilobytes
    nested = rezipped(docx_bytes(), add={"word/embeddings/pack.zip": inner})
    with zipfile.ZipFile(io.BytesIO(nested)) as z:  # the outer listing declares nothing big
        assert sum(i.file_size for i in z.infolist()) < MB
    assert_failed(ingested(folder, "nested.docx", nested), "The document expands to more than 2 MB when unpacked")


def test_archives_nested_too_deep_and_headers_that_lie_are_refused():
    limits = ArchiveLimits()
    deep = zip_of("core.xml", b"<a/>")
    for level in range(limits.max_depth + 1):
        deep = zip_of(f"level{level}.zip", deep)
    with pytest.raises(ArchiveRefused, match="nests archives more than 3 deep"):
        archive_check(deep, limits=limits)
    archive_check(zip_of("level.zip", zip_of("core.xml", b"<a/>")), limits=limits)  # one level is ordinary

    # 5 MB of text declared as 100 bytes, in the local header and the central directory alike
    honest = zip_of("document.xml", b"<w:t>lorem</w:t>" * (5 * MB // 16))
    with zipfile.ZipFile(io.BytesIO(honest)) as z:
        real = z.infolist()[0].file_size
    lying = bytearray(honest)
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = lying.index(signature) + offset
        assert int.from_bytes(lying[at : at + 4], "little") == real
        lying[at : at + 4] = (100).to_bytes(4, "little")
    with pytest.raises(ArchiveRefused, match="cannot be unpacked"):
        archive_check(bytes(lying), limits=ArchiveLimits(max_expanded=MB, max_ratio=UNLIMITED_RATIO))


# --------------------------------------------------------------------------- the parser's process


def _parse(data: bytes, limits: ParseLimits, wanted=lambda: True):
    return parse_isolated(
        data=data, mime=types.DOCUMENTS[".docx"], file_name="w.docx", limits=limits, wanted=wanted, key="t"
    )


def test_the_parser_process_is_bounded_in_cpu_memory_time_and_text():
    heavy = wordy_docx(20_000)  # ~11 MB of XML, ~11 million characters of text
    open_archive = ArchiveLimits(max_ratio=UNLIMITED_RATIO)
    with pytest.raises(ParseError, match="used more than 1 s of CPU"):
        _parse(heavy, ParseLimits(archive=open_archive, cpu_s=1))
    with pytest.raises(ParseError, match="took longer than 0.3 s"):
        _parse(heavy, ParseLimits(archive=open_archive, timeout_s=0.3))
    with pytest.raises(ParseError, match="needs more than 400 MB of memory"):
        _parse(heavy, ParseLimits(archive=open_archive, memory_mb=400))
    with pytest.raises(ParseError, match="text is longer than 100,000 characters"):
        _parse(wordy_docx(500), ParseLimits(archive=open_archive, max_chars=100_000))
    assert "lorem ipsum" in _parse(wordy_docx(10), ParseLimits()).text
    assert parse_processes() == {}


def test_xml_entities_are_refused_by_the_parser_process():
    data = docx_bytes()
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        xml = z.read("word/document.xml")
    laughs = b'<!DOCTYPE w:document [<!ENTITY a "ha"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>'
    end = xml.index(b"?>") + 2
    xml = xml[:end] + laughs + xml[end:].replace(b"<w:body>", b"<w:body><w:p><w:r><w:t>&b;</w:t></w:r></w:p>", 1)
    with pytest.raises(ParseError, match="EntitiesForbidden"):
        _parse(rezipped(data, change={"word/document.xml": xml}), ParseLimits())


@pytest.mark.django_db(transaction=True)
def test_deleting_a_file_mid_parse_kills_its_parser(folder, settings):
    settings.FOLDER_FILE_MAX_RATIO = UNLIMITED_RATIO
    file, _ = services.file_upload(folder=folder, file_name="long.docx", content_type=None, data=wordy_docx(20_000))
    outcome = {}

    def ingesting():
        try:
            outcome["status"] = file_ingest(file_id=file.id)
        finally:
            connections.close_all()  # this thread's connection (PostgreSQL: given back to the pool, not kept)

    ingest = threading.Thread(target=ingesting)
    ingest.start()
    pid = until(lambda: parse_processes().get(file.id), what="the parser process to start")
    services.file_delete(file=file)
    ingest.join(timeout=60)
    assert not ingest.is_alive() and outcome["status"] == "gone"
    proc = Path(f"/proc/{pid}")
    assert not proc.exists() or b"parse_child" not in (proc / "cmdline").read_bytes(), "the parser still runs"
    assert parse_processes() == {}
    assert not FolderFile.objects.filter(pk=file.pk).exists() and not Passage.objects.filter(file_id=file.id).exists()


# --------------------------------------------------------------------------- text, passages, quotas


@pytest.mark.django_db
def test_a_files_text_and_passages_are_bounded(folder, settings):
    settings.FOLDER_FILE_MAX_CHARS = 500
    assert_failed(ingested(folder, "long.txt", b"x" * 501), "The file's text is longer than 500 characters")
    settings.FOLDER_FILE_MAX_CHARS = 1_000_000
    settings.FOLDER_FILE_MAX_PASSAGES = 2
    text = "\n".join(f"line {n} of a file that makes many passages" for n in range(400)).encode()
    assert_failed(ingested(folder, "many.txt", text), "a file may make at most 2 passages")


@pytest.mark.django_db
def test_an_accounts_file_bytes_have_a_quota(folder, other_account, settings):
    settings.FOLDER_ACCOUNT_MAX_BYTES = 100
    first, _ = services.file_upload(folder=folder, file_name="a.txt", content_type=None, data=b"a" * 60)
    with pytest.raises(services.QuotaExceeded, match="files take 60 bytes; this file's 60 bytes would pass") as refused:
        services.file_upload(folder=folder, file_name="b.txt", content_type=None, data=b"b" * 60)
    assert refused.value.status == 413
    services.file_fail(file_id=first.id, reason="broken")  # a failed file keeps no bytes
    services.file_upload(folder=folder, file_name="b.txt", content_type=None, data=b"b" * 60)
    theirs = services.folder_create(owner=other_account.org, name="theirs")
    services.file_upload(folder=theirs, file_name="c.txt", content_type=None, data=b"c" * 90)  # their own quota


@pytest.mark.django_db
def test_an_accounts_passages_have_a_quota(folder, settings):
    first = ingested(folder, "first.txt", b"alpha\nbeta\n")
    held = Passage.objects.filter(file_id=first.id).count()
    assert first.status == FileStatus.COMPLETED and held >= 1
    settings.FOLDER_ACCOUNT_MAX_PASSAGES = held + 1
    text = "\n".join(f"line {n} of a file that makes many passages" for n in range(400)).encode()
    assert_failed(ingested(folder, "second.txt", text), f"The account's folders hold {held} passage")
    settings.FOLDER_ACCOUNT_MAX_PASSAGES = held
    with pytest.raises(services.QuotaExceeded, match=f"The account's folders hold {held} passages?, its limit"):
        services.file_upload(folder=folder, file_name="third.txt", content_type=None, data=b"gamma\n")


# --------------------------------------------------------------------------- batches


@pytest.mark.django_db
def test_passages_of_an_unfinished_file_are_not_seen_and_a_failure_removes_them(account, agent, fake_llm):
    embedded = services.folder_create(owner=account.org, name="vectors", embedding="openai/text-embedding-3-small")
    text = "\n".join(f"Line {n}: the ferry to Oslo leaves at {n}:00 from pier {n % 7}." for n in range(1500)).encode()
    fake_llm.script_embeddings(Reply(), Reply(status=400, error_body={"error": {"message": "input too long"}}))
    failed = ingested(embedded, "ferries.txt", text)
    assert failed.total_chunks > 64 and len(fake_llm.embedding_requests) == 2  # a batch was written, then it failed
    assert_failed(failed, "input too long")

    done = ingested(embedded, "again.txt", text)
    assert done.status == FileStatus.COMPLETED and Passage.objects.filter(file_id=done.id).count() == done.total_chunks
    services.folder_attach(agent=agent, folder=embedded)
    seen = (
        lambda: selectors.folder_passages(folder=embedded).exists(),
        lambda: bool(passages_for_query(agent=agent, query="ferry to Oslo")),
        lambda: bool(passages_search(owner=account.org, query="ferry")),
    )
    assert all(check() for check in seen)
    FolderFile.objects.filter(pk=done.pk).update(status=FileStatus.EMBEDDING)  # as while its batches are written
    assert not any(check() for check in seen)
