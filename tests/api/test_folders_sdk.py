"""letta-client 1.x against the live server on the folder routes: create a folder, upload real documents, watch them
processed in the background until `completed` (or `error` for a corrupt one), attach the folder to an agent, list,
open and close its files, delete a file and the folder; errors answer as Letta's do (415, 404, 409)."""

import time
from typing import Any

import letta_client
import pytest
from letta_client import Letta

from tests.api.test_folders import html_page
from tests.memory.test_folders import docx_bytes, pdf_bytes

pytestmark = pytest.mark.django_db(transaction=True)
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


@pytest.fixture
def client(live_server, account, fake_llm):
    return Letta(base_url=live_server.url, api_key=account.token, max_retries=0, timeout=60)


def processed(client, folder_id: str, file_id: str):
    """Poll as Letta's clients do until the file's processing ends (the ingest runs on the task queue)."""
    deadline = time.monotonic() + 60  # a bound on a hung test, not a timing assertion
    while time.monotonic() < deadline:
        file = client.folders.files.retrieve(file_id, folder_id=folder_id)
        if file.processing_status in ("completed", "error"):
            return file
        time.sleep(0.05)
    raise AssertionError(f"{file_id} still {file.processing_status}")


def test_folder_files_and_agent_views_through_the_sdk(client):
    folder = client.folders.create(
        name="handbook", description="Staff handbook", embedding="openai/text-embedding-3-small"
    )
    assert folder.id.startswith("source-") and folder.embedding_config.embedding_model == "text-embedding-3-small"
    assert [f.id for f in client.folders.list()] == [folder.id]

    uploaded = client.folders.files.upload(folder.id, file=("book.pdf", pdf_bytes(3), "application/pdf"))
    assert uploaded.id.startswith("file-") and uploaded.file_name == "handbook/book.pdf"
    assert uploaded.processing_status in ("pending", "parsing", "embedding", "completed")
    docx = client.folders.files.upload(folder.id, file=("recipes.docx", docx_bytes(), DOCX))
    page = client.folders.files.upload(folder.id, file=("trains.html", html_page(), "text/html"))
    broken = client.folders.files.upload(folder.id, file=("broken.pdf", b"%PDF-1.7 nothing", "application/pdf"))

    book = processed(client, folder.id, uploaded.id)
    assert book.processing_status == "completed" and book.total_chunks == book.chunks_embedded > 0
    assert processed(client, folder.id, docx.id).processing_status == "completed"
    assert processed(client, folder.id, page.id).processing_status == "completed"
    failed = processed(client, folder.id, broken.id)
    assert failed.processing_status == "error" and "Could not parse the file" in failed.error_message
    with_content = client.folders.files.retrieve(docx.id, folder_id=folder.id, include_content=True)
    assert "smoked paprika" in with_content.content
    listed = {f.file_name: f.processing_status for f in client.folders.files.list(folder.id)}
    assert listed == {
        "book.pdf": "completed",
        "recipes.docx": "completed",
        "trains.html": "completed",
        "broken.pdf": "error",
    }

    agent = client.agents.create(name="reader", model="openai/fake-model", context_window_limit=8000)
    client.agents.folders.attach(folder.id, agent_id=agent.id)
    assert [f.id for f in client.agents.folders.list(agent.id)] == [folder.id]
    assert client.folders.agents.list(folder.id) == [agent.id] or list(client.folders.agents.list(folder.id)) == [
        agent.id
    ]
    files = list(client.agents.files.list(agent.id))
    assert {f.file_name for f in files} == {"handbook/book.pdf", "handbook/recipes.docx", "handbook/trains.html"}
    opened = [f for f in files if f.is_open]
    assert len(opened) == 3 and all(f.visible_content.startswith("[Viewing file start") for f in opened)

    assert client.agents.files.close(docx.id, agent_id=agent.id) is not None
    closed = {f.file_id: f.is_open for f in client.agents.files.list(agent.id)}
    assert closed[docx.id] is False
    assert client.agents.files.open(docx.id, agent_id=agent.id) == []
    assert sorted(client.agents.files.close_all(agent.id)) == [
        "handbook/book.pdf",
        "handbook/recipes.docx",
        "handbook/trains.html",
    ]

    client.folders.files.delete(uploaded.id, folder_id=folder.id)
    with pytest.raises(letta_client.NotFoundError):
        client.folders.files.retrieve(uploaded.id, folder_id=folder.id)
    assert uploaded.id not in {f.file_id for f in client.agents.files.list(agent.id)}

    client.agents.folders.detach(folder.id, agent_id=agent.id)
    assert list(client.agents.files.list(agent.id)) == []
    client.folders.delete(folder.id)
    with pytest.raises(letta_client.NotFoundError):
        client.folders.retrieve(folder.id)


def test_sdk_errors_match_letta(client):
    folder = client.folders.create(name="errs")
    with pytest.raises(letta_client.ConflictError):
        client.folders.create(name="errs")
    with pytest.raises(letta_client.APIStatusError) as refused:
        client.folders.files.upload(folder.id, file=("tool.exe", b"MZ", "application/x-msdownload"))
    assert refused.value.status_code == 415 and "Unsupported file type" in refused.value.response.json()["detail"]
    updated = client.folders.update(folder.id, description="renamed", name="errs2")
    assert (updated.name, updated.description) == ("errs2", "renamed")
    with pytest.raises(letta_client.NotFoundError):
        client.folders.retrieve("source-00000000-0000-0000-0000-000000000000")


def test_sdk_pages_files_and_agents_and_reads_counts(client):
    folder = client.folders.create(name="pages")
    ids = []
    for n in range(5):
        sent = client.folders.files.upload(
            folder.id, file=(f"note{n}.txt", f"Note {n}: tide at {n}:00".encode(), "text/plain")
        )
        ids.append(processed(client, folder.id, sent.id).id)
    # auto-pagination sends the last file's id as the next `after`: two files a page, every file once, newest first
    assert [f.id for f in client.folders.files.list(folder.id, limit=2)] == ids[::-1]
    assert [f.id for f in client.folders.files.list(folder.id, limit=2, order="asc")] == ids

    agents = [client.agents.create(name=f"a{n}", model="openai/fake-model") for n in range(3)]
    for agent in agents:
        client.agents.folders.attach(folder.id, agent_id=agent.id)
    assert list(client.folders.agents.list(folder.id, order="asc")) == [a.id for a in agents]
    assert list(client.folders.agents.list(folder.id, order="asc", after=agents[0].id, limit=1)) == [agents[1].id]

    # routes letta-client 1.x has no method for, called as Letta's other clients do
    assert client.get("/v1/folders/count", cast_to=int) == 1
    stats = client.get("/v1/folders/metadata?include_detailed_per_source_metadata=true", cast_to=dict[str, Any])
    assert stats["total_files"] == 5 and [f["file_id"] for f in stats["sources"][0]["files"]] == ids
    assert client.get("/v1/folders/name/pages", cast_to=object) == folder.id  # a JSON string
    passages = client.get(f"/v1/folders/{folder.id}/passages?order=asc", cast_to=list[dict[str, Any]])
    assert [p["file_name"] for p in passages] == [f"note{n}.txt" for n in range(5)]
