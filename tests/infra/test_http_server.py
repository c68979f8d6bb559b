"""What daphne's HTTP/1.1 parser (Twisted's) used to answer without the application, against a real daphne serving
agents_ide.asgi: a URL past 16 KiB closed the connection with no answer (now a 414 saying why, in JSON under /v1/),
and a multipart body Twisted could not parse, such as a browser's empty FormData, got a bare 400 with an empty body
(now Django reads it and the API answers in JSON, as for every other error)."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from agents_ide.http_server import MAX_URL_BYTES
from tests.helpers import database_url, free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server(django_db_setup):
    """(host, port) of a daphne process serving the ASGI app against the test database (tests that need rows it can
    read ask for `transactional_db`)."""
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "REDIS_URL": "",
        "AIDE_WARM_UP": "0",
        "AIDE_START_RUNS": "0",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "agents_ide.asgi:application"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the daphne test server did not start")
        time.sleep(0.2)
    try:
        yield ("127.0.0.1", port)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _exchange(server, request: bytes) -> tuple[int, dict, bytes]:
    """Send one raw request (with `Connection: close`); the status, headers and body of the answer (status 0: the
    connection closed with no answer)."""
    with socket.create_connection(server, timeout=10) as conn:
        conn.sendall(request)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        return 0, {}, data
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    if headers.get("transfer-encoding") == "chunked":
        decoded = b""
        while (size := int(body.split(b"\r\n", 1)[0], 16)) > 0:
            rest = body.split(b"\r\n", 1)[1]
            decoded, body = decoded + rest[:size], rest[size + 2 :]
        body = decoded
    return int(lines[0].split(" ", 2)[1]), headers, body


def _get(server, target: str) -> tuple[int, dict, bytes]:
    return _exchange(server, f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())


def test_a_url_up_to_the_bound_is_served(server):
    status, _, body = _get(server, "/healthz?x=" + "a" * (MAX_URL_BYTES - len("/healthz?x=")))
    assert (status, body) == (200, b"ok")


@pytest.mark.parametrize("size", [MAX_URL_BYTES + 1, 20_000, 70_000, 1_000_000])
def test_a_longer_url_is_answered_414_with_the_reason(server, size):
    status, headers, body = _get(server, "/healthz?x=" + "a" * size)
    assert status == 414 and headers["content-type"].startswith("text/plain")
    assert f"{MAX_URL_BYTES} bytes" in body.decode()
    status, headers, body = _get(server, "/v1/agents/?x=" + "a" * size)
    assert status == 414 and headers["content-type"] == "application/json"
    assert "longer than this server accepts" in json.loads(body)["detail"]


def _multipart(server, token: str, body: bytes, content_type: str = "multipart/form-data; boundary=xyz"):
    head = (
        f"POST /v1/agents/import HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return _exchange(server, head.encode() + body)


@pytest.mark.parametrize(
    "body",
    [
        b"--xyz--\r\n",  # a browser's FormData with no field: no part at all
        b"\r\n",
        b'--xyz\r\nContent-Disposition: form-data; name="file"; filename="a.af"\r\n\r\n\r\n--xyz--\r\n',  # empty file
        '--xyz\r\nContent-Disposition: form-data; name="名前"\r\n\r\nx\r\n--xyz--\r\n'.encode(),  # a non-ASCII field
    ],
)
def test_an_empty_or_fieldless_multipart_import_is_a_json_4xx(server, transactional_db, account, body):
    status, headers, answer = _multipart(server, account.token, body)
    assert 400 <= status < 500 and headers["content-type"].startswith("application/json"), (status, answer)
    assert json.loads(answer)["detail"]


def test_a_multipart_body_without_a_boundary_is_a_json_400(server, transactional_db, account):
    status, headers, answer = _multipart(server, account.token, b"x", content_type="multipart/form-data")
    assert status == 400 and headers["content-type"].startswith("application/json")
    assert "multipart" in json.loads(answer)["detail"]
