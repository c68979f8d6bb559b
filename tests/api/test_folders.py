"""The folder routes through Django's test client: multipart uploads checked for type and size, duplicate handling,
another account's folders and agents not found, and the agent's files page."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from memory.files.ingest import file_ingest
from memory.models import Passage

pytestmark = pytest.mark.django_db


def html_page() -> bytes:
    return (
        b"<!doctype html><html><head><title>Trains</title></head><body><h1>Timetable</h1>"
        b"<p>The <b>night train</b> to Lisbon leaves at 22:40 from platform 4.</p></body></html>"
    )


def _upload(api, folder_id: str, name: str, data: bytes, content_type: str = "text/plain", **query):
    qs = "&".join(f"{k}={v}" for k, v in query.items())
    return api.client.post(
        f"/v1/folders/{folder_id}/upload" + (f"?{qs}" if qs else ""),
        {"file": SimpleUploadedFile(name, data, content_type=content_type)},
    )


@pytest.fixture
def folder(api):
    created = api.post("/v1/folders/", {"name": "docs", "instructions": "Read before answering"})
    assert created.status_code == 200, created.content
    return created.json()


def test_upload_is_checked_and_queued(api, folder, settings):
    refused = _upload(api, folder["id"], "run.exe", b"MZ", "application/x-msdownload")
    assert refused.status_code == 415
    assert refused.json()["detail"].startswith("Unsupported file type: application/x-msdownload (filename: run.exe)")
    settings.FOLDER_FILE_MAX_BYTES = 16
    big = _upload(api, folder["id"], "big.txt", b"x" * 17)
    assert big.status_code == 413 and "at most 16 bytes" in big.json()["detail"]
    settings.FOLDER_FILE_MAX_BYTES = 1_000_000

    ok = _upload(api, folder["id"], "trains.html", html_page(), "text/html")
    assert ok.status_code == 200, ok.content
    body = ok.json()
    # the test's transaction never commits, so the queued ingest has not run: the file waits
    assert body["processing_status"] == "pending" and body["file_name"] == "docs/trains.html"
    assert body["file_type"] == "text/html" and body["file_size"] == len(html_page())

    again = _upload(api, folder["id"], "trains.html", html_page(), "text/html", duplicate_handling="skip")
    assert again.status_code == 200 and again["X-Upload-Result"] == "skipped" and again.json()["id"] == body["id"]
    clash = _upload(api, folder["id"], "trains.html", html_page(), "text/html", duplicate_handling="error")
    assert clash.status_code == 400 and clash.json()["detail"] == "File 'trains.html' already exists in folder 'docs'"
    suffixed = _upload(api, folder["id"], "trains.html", html_page(), "text/html")
    assert suffixed.json()["file_name"] == "docs/trains_(1).html"

    file_ingest(file_id=body["id"])
    listed = api.get(f"/v1/folders/{folder['id']}/files").json()
    assert [(f["file_name"], f["processing_status"]) for f in listed] == [
        ("trains_(1).html", "pending"),
        ("trains.html", "completed"),
    ]
    assert listed[1]["content"] is None
    deleted = api.delete(f"/v1/folders/{folder['id']}/{body['id']}")
    assert deleted.status_code == 204
    assert not Passage.objects.filter(file_id=body["id"]).exists()
    assert api.get(f"/v1/folders/{folder['id']}/files/{body['id']}").json()["detail"] == (
        f"File with id={body['id']} not found in folder {folder['id']}"
    )


def test_uploads_past_the_accounts_quotas_are_refused_with_the_reason(api, folder, settings):
    settings.FOLDER_ACCOUNT_MAX_BYTES = 100
    assert _upload(api, folder["id"], "a.txt", b"a" * 60).status_code == 200
    refused = _upload(api, folder["id"], "b.txt", b"b" * 60)
    assert refused.status_code == 413 and refused.json()["detail"] == (
        "The account's files take 60 bytes; this file's 60 bytes would pass the account's limit of 100 bytes. "
        "Delete files to make room"
    )
    settings.FOLDER_ACCOUNT_MAX_BYTES = 1_000_000
    settings.FOLDER_ACCOUNT_MAX_PASSAGES = 1
    file_ingest(file_id=api.get(f"/v1/folders/{folder['id']}/files").json()[0]["id"])  # one passage: the limit
    full = _upload(api, folder["id"], "c.txt", b"c")
    assert full.status_code == 413 and full.json()["detail"] == (
        "The account's folders hold 1 passage, its limit: delete files to upload more"
    )


def test_other_accounts_see_nothing(api, folder, other_account):
    from tests.factories import ApiClient

    mallory = ApiClient(other_account.token)
    assert mallory.get(f"/v1/folders/{folder['id']}").status_code == 404
    assert mallory.get("/v1/folders/").json() == []
    assert _upload(mallory, folder["id"], "a.txt", b"hi").status_code == 404
    assert mallory.delete(f"/v1/folders/{folder['id']}").status_code == 404
    agent = mallory.post("/v1/agents/", {"name": "m", "model": "openai/fake-model", "include_base_tools": False})
    assert agent.status_code in (200, 201), agent.content
    attach = mallory.patch(f"/v1/agents/{agent.json()['id']}/folders/attach/{folder['id']}")
    assert attach.status_code == 404


def test_agent_files_page_and_context_names(api, folder, account):
    from tests.factories import make_agent

    agent = make_agent(account.org, name="reader", include_base_tools=False)
    ids = []
    for i in range(3):
        uploaded = _upload(api, folder["id"], f"n{i}.md", f"# Note {i}\n\nline {i}\n".encode(), "text/markdown").json()
        file_ingest(file_id=uploaded["id"])
        ids.append(uploaded["id"])
    assert api.patch(f"/v1/agents/{agent.id}/folders/attach/{folder['id']}").status_code == 200
    first = api.get(f"/v1/agents/{agent.id}/files", data={"limit": 2, "order": "asc"}).json()
    assert first["has_more"] is True and len(first["files"]) == 2 and first["next_cursor"] == first["files"][1]["id"]
    rest = api.get(f"/v1/agents/{agent.id}/files", data={"limit": 2, "order": "asc", "after": first["next_cursor"]})
    assert rest.json()["has_more"] is False and len(rest.json()["files"]) == 1
    entry = first["files"][0]
    assert entry["file_name"] == "docs/n0.md" and entry["folder_name"] == "docs" and entry["is_open"]
    assert entry["visible_content"] == "[Viewing file start (out of 2 lines)]\n1: # Note 0\n2: line 0"
    closed = api.patch(f"/v1/agents/{agent.id}/files/{ids[0]}/close")
    assert closed.json() == {"message": f"File id={ids[0]} successfully closed"}
    assert [f["file_id"] for f in api.get(f"/v1/agents/{agent.id}/files", data={"is_open": False}).json()["files"]] == [
        ids[0]
    ]
    assert api.get(f"/v1/folders/{folder['id']}/agents").json() == [agent.id]
    assert api.patch(f"/v1/agents/{agent.id}/folders/detach/{folder['id']}").status_code == 200
    assert api.patch(f"/v1/agents/{agent.id}/folders/detach/{folder['id']}").status_code == 404
