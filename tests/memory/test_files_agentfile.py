"""Agent files carry folders as Letta's `.af` does: the attached folders (`sources`), their files with their text
(`files`) and the agent's views (`files_agents`). Import creates the folders (or reuses one of the same name),
stores the files' text and queues their ingest, attaches the folders with the file tools and restores which files
are open and at which lines; a file written the way Letta writes it imports the same way."""

import json

import pytest

from core.agents.agentfile.exporter import agentfile_export
from core.agents.agentfile.importer import agentfile_import
from core.agents.agentfile.model import AgentFileError
from core.agents.agentfile.parse import parse_agent_file
from core.models import Agent, QueuedTask
from memory.files import services
from memory.files.ingest import file_ingest
from memory.files.tools import directories_section, grep_files
from memory.models import FileAgent, FileStatus, Folder, FolderFile, Passage
from tests.core.agentfile_docs import dumps, v2_doc
from tests.factories import make_agent
from tests.memory.test_folders import pdf_bytes, upload

pytestmark = pytest.mark.django_db
FILE_TOOLS = {"open_files", "grep_files", "semantic_search_files"}
CODE = b"def tide(hour):\n    return 'high' if hour % 12 < 6 else 'low'\n"


def _import(owner, data: dict) -> tuple[Agent, list[str]]:
    result = agentfile_import(owner=owner, parsed=parse_agent_file(json.dumps(data).encode()))
    return Agent.objects.get(id=result.agent_ids[0]), result.warnings


def _views(agent: Agent) -> dict[str, tuple]:
    return {
        f"{v.folder.name}/{v.file.file_name}": (v.is_open, v.start_line, v.end_line)
        for v in FileAgent.objects.filter(agent=agent).select_related("folder", "file")
    }


@pytest.fixture(autouse=True)
def _embedder(fake_llm):
    """The folders name an embedding model: the fake OpenAI-compatible server embeds."""


@pytest.fixture
def reader(account):
    folder = services.folder_create(
        owner=account.org,
        name="harbour",
        description="The harbour manual",
        instructions="Cite the page.",
        embedding="openai/text-embedding-3-small",
        embedding_chunk_size=120,
    )
    pdf = upload(folder, "manual.pdf", pdf_bytes(4))
    code = upload(folder, "tide.py", CODE)
    for f in (pdf, code):
        assert file_ingest(file_id=f.id) == FileStatus.COMPLETED  # embedded by the fake provider
    agent = make_agent(account.org, name="Reader", agent_type="letta_v1_agent")
    services.folder_attach(agent=agent, folder=folder)
    services.file_open(agent=agent, file_id=pdf.id, start=3, end=9)
    services.file_close(agent=agent, file_id=code.id)
    return agent


def test_export_writes_letta_s_sources_files_and_views(reader):
    data = agentfile_export(agent=reader)
    (source,) = data["sources"]
    assert source["id"] == "source-0" and source["name"] == "harbour"
    assert (source["description"], source["instructions"]) == ("The harbour manual", "Cite the page.")
    assert source["embedding_config"]["handle"] == "openai/text-embedding-3-small"
    assert source["embedding_chunk_size"] == 120
    files = {f["file_name"]: f for f in data["files"]}
    assert set(files) == {"harbour/manual.pdf", "harbour/tide.py"}
    assert files["harbour/manual.pdf"]["source_id"] == "source-0"
    assert "lighthouse number 21" in files["harbour/manual.pdf"]["content"]
    assert "\f" in files["harbour/manual.pdf"]["content"]  # its pages survive
    assert files["harbour/tide.py"]["file_type"] == "text/x-python"
    agent = data["agents"][0]
    assert agent["source_ids"] == ["source-0"]
    views = {v["file_name"]: v for v in agent["files_agents"]}
    assert (views["harbour/manual.pdf"]["is_open"], views["harbour/manual.pdf"]["start_line"]) == (True, 3)
    assert views["harbour/manual.pdf"]["end_line"] == 9 and views["harbour/tide.py"]["is_open"] is False
    assert {v["file_id"] for v in views.values()} == {f["id"] for f in data["files"]}


def test_round_trip_to_another_account_recreates_folder_files_and_open_windows(reader, other_account):
    data = agentfile_export(agent=reader)
    copy, warnings = _import(other_account.org, data)
    assert not [w for w in warnings if "older" in w or "supported" in w]

    folder = Folder.objects.get(owner=other_account.org)
    assert (folder.name, folder.description, folder.instructions) == ("harbour", "The harbour manual", "Cite the page.")
    assert (folder.embedding, folder.embedding_chunk_size) == ("openai/text-embedding-3-small", 120)
    assert set(copy.folders.all()) == {folder}
    assert set(copy.tools.values_list("name", flat=True)) >= FILE_TOOLS
    files = {f.file_name: f for f in FolderFile.objects.filter(folder=folder)}
    assert set(files) == {"manual.pdf", "tide.py"}
    assert all(f.status == FileStatus.PENDING and f.raw is None for f in files.values())
    queued = {r["file_id"] for r in QueuedTask.objects.filter(status=QueuedTask.READY).values_list("kwargs", flat=True)}
    assert queued == {f.id for f in files.values()}
    assert _views(copy) == {"harbour/manual.pdf": (True, 3, 9), "harbour/tide.py": (False, None, None)}
    # the text is there before the ingest: the agent sees its open window and can grep
    section = directories_section(copy)
    assert "[Viewing lines 3 to 9" in section and '<file status="closed" name="harbour/tide.py">' in section
    assert "=== harbour/tide.py:2 ===" in grep_files(agent=copy, pattern="hour % 12")

    for f in files.values():
        assert file_ingest(file_id=f.id) == FileStatus.COMPLETED
    original = FolderFile.objects.get(folder__owner=reader.owner, file_name="manual.pdf")
    imported = FolderFile.objects.get(pk=files["manual.pdf"].pk)
    assert imported.content == original.content and imported.page_count == original.page_count == 4
    assert Passage.objects.filter(file=imported).count() == original.total_chunks == imported.total_chunks
    assert not Passage.objects.filter(file=imported, embedding__isnull=True).exists()
    assert _views(copy) == {"harbour/manual.pdf": (True, 3, 9), "harbour/tide.py": (False, None, None)}


def test_import_into_the_same_account_reuses_the_folder_and_its_files(reader):
    copy, warnings = _import(reader.owner, agentfile_export(agent=reader))
    assert Folder.objects.filter(owner=reader.owner).count() == 1
    assert FolderFile.objects.filter(folder__owner=reader.owner).count() == 2
    assert "Folder 'harbour' already exists; the agent was attached to it." in warnings
    assert not QueuedTask.objects.filter(status=QueuedTask.READY).exists()
    assert _views(copy) == {"harbour/manual.pdf": (True, 3, 9), "harbour/tide.py": (False, None, None)}


def test_a_file_written_the_way_letta_writes_it(account):
    """Letta's exporter: `source_ids` left empty, names stored as "<folder>/<name>", views without line ranges."""
    doc = v2_doc()
    doc["sources"] = [
        {
            "id": "source-0",
            "name": "notes",
            "description": "Field notes",
            "instructions": None,
            "metadata": None,
            "embedding_config": {
                "embedding_endpoint_type": "openai",
                "embedding_model": "text-embedding-3-small",
                "embedding_dim": 1536,
                "embedding_chunk_size": 300,
            },
        }
    ]
    doc["files"] = [
        {
            "id": "file-0",
            "source_id": "source-0",
            "file_name": "notes/birds.md",
            "original_file_name": "birds.md",
            "file_path": None,
            "file_type": "text/markdown",
            "file_size": 60,
            "processing_status": "completed",
            "content": "# Birds\n\nThe puffin nests on the cliffs in May.\n",
        },
        {"id": "file-1", "source_id": "source-0", "file_name": "notes/empty.txt", "content": ""},
    ]
    doc["agents"][0]["source_ids"] = []
    doc["agents"][0]["files_agents"] = [
        {
            "id": "file_agent-0",
            "agent_id": doc["agents"][0]["id"],
            "file_id": "file-0",
            "source_id": "source-0",
            "file_name": "notes/birds.md",
            "is_open": True,
            "visible_content": "[Viewing file start (out of 2 lines)]\n1: # Birds\n2: The puffin nests on the cliffs in May.",
            "last_accessed_at": "2025-06-01T10:00:00Z",
        }
    ]
    agent, warnings = _import(account.org, json.loads(dumps(doc)))
    assert "File 'empty.txt' has no text in the agent file; it was left out." in warnings
    folder = agent.folders.get()
    assert (folder.name, folder.embedding) == ("notes", "openai/text-embedding-3-small")
    assert list(folder.files.values_list("file_name", "mime_type")) == [("birds.md", "text/markdown")]
    assert _views(agent) == {"notes/birds.md": (True, None, None)}
    assert "2: The puffin nests on the cliffs in May." in directories_section(agent)


def test_bad_folder_references_name_their_path(account):
    doc = v2_doc()
    doc["sources"] = [{"id": "source-0", "name": "notes"}]
    doc["files"] = [{"id": "file-0", "source_id": "source-9", "file_name": "a.txt", "content": "x"}]
    with pytest.raises(AgentFileError) as bad:
        parse_agent_file(dumps(doc))
    assert bad.value.path == "files[0].source_id"
    doc["files"] = []
    doc["agents"][0]["source_ids"] = ["source-3"]
    with pytest.raises(AgentFileError) as bad:
        parse_agent_file(dumps(doc))
    assert bad.value.path == "agents[0].source_ids[0]"
    doc["agents"][0]["source_ids"] = []
    doc["sources"].append({"id": "source-1", "name": "notes"})
    with pytest.raises(AgentFileError) as bad:
        parse_agent_file(dumps(doc))
    assert bad.value.path == "sources[1].name" and "two folders are named 'notes'" in bad.value.problem


def test_a_file_longer_than_a_million_characters_survives_export_and_import(account, other_account):
    """A folder file's text may be longer than the 1,000,000 characters any other string of an agent file may hold;
    past the limit of the whole file it is refused with its path."""
    folder = services.folder_create(owner=account.org, name="logs")  # no embedding model: full text only
    text = "".join(f"line {i:07d} of the long log\n" for i in range(45_000))  # 1,350,000 characters
    big = upload(folder, "long.txt", text.encode(), "text/plain")
    assert file_ingest(file_id=big.id) == FileStatus.COMPLETED
    agent = make_agent(account.org, name="Log reader", agent_type="letta_v1_agent")
    services.folder_attach(agent=agent, folder=folder)
    data = agentfile_export(agent=agent)
    assert len(data["files"][0]["content"]) > 1_000_000

    copy, _ = _import(other_account.org, data)
    imported = FolderFile.objects.get(folder__owner=other_account.org)
    assert imported.content == FolderFile.objects.get(pk=big.pk).content
    assert imported.file_size == len(imported.content.encode())
    assert "=== logs/long.txt:44999 ===" in grep_files(agent=copy, pattern="line 0044998 ")

    data["agents"][0]["system"] = "x" * 1_000_001  # every other string keeps the limit
    with pytest.raises(AgentFileError) as bad:
        parse_agent_file(json.dumps(data).encode())
    assert bad.value.path == "agents[0].system" and "the limit is 1000000" in bad.value.problem
