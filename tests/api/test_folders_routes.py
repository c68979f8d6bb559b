"""The rest of Letta's folder routes: the count, the account's folder metadata, a folder's id by its name, a folder's
chunks (passages) and agents with cursor paging, and the files list paged both ways."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from memory.files.ingest import file_ingest
from memory.models import Passage
from tests.factories import ApiClient, make_agent

pytestmark = pytest.mark.django_db


def _upload(api, folder_id: str, name: str, data: bytes) -> dict:
    sent = api.client.post(
        f"/v1/folders/{folder_id}/upload", {"file": SimpleUploadedFile(name, data, content_type="text/plain")}
    )
    assert sent.status_code == 200, sent.content
    return sent.json()


@pytest.fixture
def folder(api):
    return api.post("/v1/folders/", {"name": "logbook", "embedding_chunk_size": 50}).json()


@pytest.fixture
def files(api, folder):
    uploaded = []
    for n in range(3):
        text = "\n".join(f"Day {d} of voyage {n}: the wind blew from the north-west." for d in range(1, 40))
        body = _upload(api, folder["id"], f"voyage{n}.txt", text.encode())
        file_ingest(file_id=body["id"])
        uploaded.append(body)
    return uploaded


def test_count_metadata_and_name(api, folder, files, other_account):
    api.post("/v1/folders/", {"name": "empty"})
    assert api.get("/v1/folders/count").json() == 2
    sizes = [f["file_size"] for f in files]
    assert api.get("/v1/folders/metadata").json() == {
        "total_sources": 2,
        "total_files": 3,
        "total_size": sum(sizes),
        "sources": [],
    }
    detailed = api.get("/v1/folders/metadata", data={"include_detailed_per_source_metadata": True}).json()
    logbook, empty = detailed["sources"]
    assert (logbook["source_id"], logbook["source_name"], logbook["file_count"]) == (folder["id"], "logbook", 3)
    assert logbook["total_size"] == sum(sizes)
    assert logbook["files"] == [
        {"file_id": f["id"], "file_name": f"voyage{n}.txt", "file_size": f["file_size"]} for n, f in enumerate(files)
    ]
    assert (empty["source_name"], empty["file_count"], empty["total_size"], empty["files"]) == ("empty", 0, 0, [])

    assert api.get("/v1/folders/name/logbook").json() == folder["id"]
    missing = api.get("/v1/folders/name/nothing")
    assert missing.status_code == 404 and missing.json()["detail"] == "Folder with name=nothing not found"

    mallory = ApiClient(other_account.token)
    assert mallory.get("/v1/folders/count").json() == 0
    assert mallory.get("/v1/folders/metadata").json()["total_files"] == 0
    assert mallory.get("/v1/folders/name/logbook").status_code == 404
    assert mallory.get(f"/v1/folders/{folder['id']}/passages").status_code == 404


def test_passages_of_a_folder_page_by_cursor(api, folder, files):
    stored = Passage.objects.filter(folder_id=folder["id"]).count()
    assert stored > 6
    every = api.get(f"/v1/folders/{folder['id']}/passages", data={"order": "asc", "limit": 1000}).json()
    assert len(every) == stored
    first = every[0]
    assert first["source_id"] == folder["id"] and first["file_id"] == files[0]["id"]
    assert first["file_name"] == "voyage0.txt" and first["agent_id"] is None and first["embedding"] is None
    assert first["metadata"]["start_line"] == 1 and "Day 1 of voyage 0" in first["text"]

    walked, after = [], None
    while True:
        params = {"order": "asc", "limit": 4, **({"after": after} if after else {})}
        chunk = api.get(f"/v1/folders/{folder['id']}/passages", data=params).json()
        if not chunk:
            break
        walked += [p["id"] for p in chunk]
        after = chunk[-1]["id"]
    assert walked == [p["id"] for p in every]
    newest = api.get(f"/v1/folders/{folder['id']}/passages", data={"limit": 2}).json()
    assert [p["id"] for p in newest] == [p["id"] for p in every[::-1][:2]]
    unknown = api.get(f"/v1/folders/{folder['id']}/passages", data={"after": "passage-nope"})
    assert unknown.status_code == 404


def test_files_and_agents_lists_page_both_ways(api, folder, files, account):
    ids = [f["id"] for f in files]
    url = f"/v1/folders/{folder['id']}/files"
    assert [f["id"] for f in api.get(url).json()] == ids[::-1]  # newest first, as Letta lists them
    assert [f["id"] for f in api.get(url, data={"limit": 2, "order": "asc"}).json()] == ids[:2]
    assert [f["id"] for f in api.get(url, data={"after": ids[0], "order": "asc"}).json()] == ids[1:]
    assert [f["id"] for f in api.get(url, data={"before": ids[0]}).json()] == ids[:0:-1]
    assert api.get(url, data={"after": "file-nope"}).status_code == 404

    agents = [make_agent(account.org, name=f"sailor{n}", include_base_tools=False) for n in range(3)]
    for agent in agents:
        assert api.patch(f"/v1/agents/{agent.id}/folders/attach/{folder['id']}").status_code == 200
    url = f"/v1/folders/{folder['id']}/agents"
    assert api.get(url).json() == [a.id for a in agents[::-1]]
    assert api.get(url, data={"order": "asc", "limit": 2}).json() == [agents[0].id, agents[1].id]
    assert api.get(url, data={"order": "asc", "after": agents[1].id}).json() == [agents[2].id]
    stranger = make_agent(account.org, name="landlubber", include_base_tools=False)
    assert api.get(url, data={"after": stranger.id}).status_code == 404
