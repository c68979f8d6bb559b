"""The agent-file import preview lists the folders an .af carries, and their files, before anything is stored."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from core.models import Agent
from memory.files import services
from memory.models import Folder, FolderFile
from tests.core.agentfile_docs import dumps, v2_doc

pytestmark = pytest.mark.django_db
HOSTILE = "<img src=x onerror=alert(1)>.md"


def _with_folders() -> bytes:
    doc = v2_doc()
    doc["sources"] = [{"id": "source-0", "name": "harbour"}, {"id": "source-1", "name": "notes"}]
    doc["files"] = [
        {"id": "file-0", "source_id": "source-0", "file_name": "harbour/tides.txt", "content": "high\n" * 600},
        {"id": "file-1", "source_id": "source-0", "file_name": "harbour/" + HOSTILE, "content": "é" * 10},
        {"id": "file-2", "source_id": "source-1", "file_name": "notes/birds.md", "content": "puffin"},
    ]
    doc["agents"][0]["source_ids"] = ["source-0", "source-1"]
    doc["agents"][0]["files_agents"] = [{"id": "fa-0", "file_id": "file-0", "source_id": "source-0", "is_open": True}]
    return dumps(doc)


def _preview(web, data: bytes):
    upload = SimpleUploadedFile("reader.af", data, content_type="application/json")
    return web.post("/agents/import/", {"file": upload}, HTTP_HX_REQUEST="true")


def test_the_preview_lists_each_folder_with_its_files_and_sizes(web, account):
    services.folder_create(owner=account.org, name="notes")  # the import attaches this one instead of creating it
    agents, folders = Agent.objects.count(), Folder.objects.count()
    page = _preview(web, _with_folders())
    html = page.content.decode()
    assert page.status_code == 200 and 'id="import-preview"' in html
    folders_line = html.split('class="small import-folders"', 1)[1].split("</div>", 1)[0]
    assert "harbour · 2 files · 2.9\xa0KB · 1 open</span>" in folders_line
    assert "notes · 1 file · 6\xa0bytes · exists: attached, files of the same name kept</span>" in folders_line
    assert "tides.txt 2.9\xa0KB · open" in html and "birds.md 6\xa0bytes" in html
    assert "&lt;img src=x onerror=alert(1)&gt;.md 20\xa0bytes" in html and HOSTILE not in html  # escaped
    assert (Agent.objects.count(), Folder.objects.count(), FolderFile.objects.count()) == (agents, folders, 0)


def test_an_agent_without_folders_says_none(web):
    html = _preview(web, dumps(v2_doc())).content.decode()
    assert 'class="small import-folders">Folders: none</div>' in html
    assert "import-files" not in html


def test_a_folder_of_many_files_lists_the_first_twenty(web):
    doc = json.loads(_with_folders())
    doc["files"] = [
        {"id": f"file-{i}", "source_id": "source-1", "file_name": f"n{i:02}.txt", "content": "x"} for i in range(25)
    ]
    doc["agents"][0]["files_agents"] = []
    html = _preview(web, json.dumps(doc).encode()).content.decode()
    assert "notes · 25 files · 25\xa0bytes" in html and "harbour · 0 files" in html
    assert "n19.txt" in html and "n20.txt" not in html and "and 5 more" in html


def test_the_api_preview_lists_the_folders_too(api, account):
    services.folder_create(owner=account.org, name="notes")
    upload = SimpleUploadedFile("reader.af", _with_folders(), content_type="application/json")
    resp = api.client.post("/v1/agents/import/preview", {"file": upload})
    assert resp.status_code == 200, resp.content
    folders = {f["name"]: f for f in resp.json()["agents"][0]["folders"]}
    assert folders["harbour"] == {
        "name": "harbour",
        "exists": False,
        "file_count": 2,
        "bytes": 3020,
        "open_count": 1,
        "files": [
            {"name": "tides.txt", "bytes": 3000, "open": True},
            {"name": HOSTILE, "bytes": 20, "open": False},  # JSON: escaped by whoever shows it
        ],
    }
    assert folders["notes"]["exists"] is True and folders["notes"]["file_count"] == 1
    assert FolderFile.objects.count() == 0
