"""Multipart bodies a real daphne server receives whole: one holding no part at all, and a file whose name holds a
NUL character. Both used to be answered before our code looked (a bare 400 from Twisted's form parser; Django
silently dropping the NUL); now each is a JSON error naming what is wrong."""

import httpx
import pytest

from agents_ide.upload_names import PartHeaderScanner
from memory.files import services
from tests.factories import make_account
from tests.helpers import daphne_start

BOUNDARY = "aide-test-boundary"
FORM = f"multipart/form-data; boundary={BOUNDARY}"


@pytest.fixture(scope="module")
def server(tmp_path_factory, django_db_setup, django_db_blocker):
    log = tmp_path_factory.mktemp("multipart") / "daphne.log"
    server = daphne_start(env={"AIDE_WARM_UP": "0"}, log=log)
    yield server
    server.stop()


@pytest.fixture
def alice(transactional_db):
    account = make_account("alice")
    folder = services.folder_create(owner=account.org, name="docs")
    return account, folder


def _post(server, account, path: str, body: bytes) -> httpx.Response:
    headers = {"Authorization": f"Bearer {account.token}", "Content-Type": FORM}
    return httpx.post(server.url + path, content=body, headers=headers, timeout=30)


ROUTES = ["/v1/agents/import", "/v1/agents/import/preview", "/v1/folders/{folder}/upload"]


@pytest.mark.parametrize("route", ROUTES)
def test_a_multipart_body_of_only_its_closing_boundary_is_a_json_error(server, alice, route):
    account, folder = alice
    answer = _post(server, account, route.format(folder=folder.id), f"--{BOUNDARY}--\r\n".encode())
    assert answer.status_code == 400, (answer.status_code, answer.text)
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == {"detail": "The multipart body holds no parts: no form field and no file was sent."}


def _file_part(file_name: bytes, content: bytes) -> bytes:
    return (
        f"--{BOUNDARY}\r\n".encode()
        + b'Content-Disposition: form-data; name="file"; filename="'
        + file_name
        + b'"\r\n'
        + b"Content-Type: text/plain\r\n\r\n"
        + content
        + f"\r\n--{BOUNDARY}--\r\n".encode()
    )


@pytest.mark.parametrize("route", ROUTES)
def test_a_nul_in_an_uploads_file_name_is_refused_naming_it(server, alice, route):
    account, folder = alice
    answer = _post(server, account, route.format(folder=folder.id), _file_part(b"notes\x00.txt", b"harbour"))
    assert answer.status_code == 400, (answer.status_code, answer.text)
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == {
        "detail": "The multipart body cannot be read: the file name 'notes\\x00.txt' contains a NUL character."
    }
    assert not folder.files.exists()  # nothing stored under the name without its NUL


def _scanned(body: bytes, chunk: int) -> str | None:
    scanner = PartHeaderScanner(BOUNDARY.encode())
    for start in range(0, len(body), chunk):
        scanner.feed(body[start : start + chunk])
    return scanner.refused


@pytest.mark.parametrize("chunk", [1, 7, 64, 100_000])  # the body as daphne may hand it over, in pieces
def test_the_scanner_reads_part_headers_across_chunks(chunk):
    field = f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="name"\r\n\r\nx\r\n'.encode()
    assert _scanned(field + _file_part(b"a\x00b.txt", b"text"), chunk) == "a\x00b.txt"
    rfc2231 = _file_part(b"x\"; filename*=\"UTF-8''a%00b.txt", b"text")  # Django decodes filename* too
    assert _scanned(rfc2231, chunk) == "a\x00b.txt"
    assert _scanned(_file_part(b"", b"") + _file_part(b"c\x00.txt", b""), chunk) == "c\x00.txt"  # empty contents
    # A header-like line inside a file's content (no boundary before it) is content, not a part.
    inner = b'\r\nContent-Disposition: form-data; name="f"; filename="d\x00.txt"\r\n\r\n'
    assert _scanned(_file_part(b"notes.txt", inner), chunk) is None
