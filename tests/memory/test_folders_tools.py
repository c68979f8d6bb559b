"""The file tools' answers (Letta's texts) and the <directories> context section, over real ingested documents:
grep finds the right page's line with its context, semantic search ranks the right chunk first with the fake
embedder and with full text alone, open_files windows lines and closes the least recently used."""

import itertools

import pytest
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.agents.services import agent_update
from core.errors import Invalid
from memory.files import services, tools
from memory.files.ingest import file_ingest
from memory.files.selectors import agent_file_states
from tests.conftest import postgres_required
from tests.memory.test_folders import EMBEDDING, pdf_bytes

pytestmark = pytest.mark.django_db


def _folder(account, agent, *, embedding: str = ""):
    folder = services.folder_create(owner=account.org, name="harbour", embedding=embedding, instructions="Cite pages")
    for name, data in (("book.pdf", pdf_bytes(5)), ("notes.md", b"# Notes\n\nThe ferry leaves at dawn.\n")):
        file, _ = services.file_upload(folder=folder, file_name=name, content_type=None, data=data)
        assert file_ingest(file_id=file.id) == "completed"
    services.folder_attach(agent=agent, folder=folder)
    return folder


def test_grep_finds_the_line_with_its_context(account, agent):
    _folder(account, agent)
    out = tools.grep_files(agent=agent, pattern=r"lighthouse number 2\d", context_lines=1)
    assert out.startswith("Found 2 total matches across 1 files (showing matches 1-2 of 2)")
    assert "=== harbour/book.pdf:" in out and "> " in out and "lighthouse number 21" in out
    assert out.endswith("No more matches to show.")
    assert tools.grep_files(agent=agent, pattern="ferry", include="*.md").count("=== harbour/notes.md:") == 1
    assert tools.grep_files(agent=agent, pattern="zebra") == "No matches found for pattern: 'zebra'"
    with pytest.raises(Invalid, match="Invalid regex"):
        tools.grep_files(agent=agent, pattern="(")
    paged = tools.grep_files(agent=agent, pattern="filler", offset=0)
    assert 'To see more matches, call: grep_files(pattern="filler", offset=20)' in paged


@pytest.mark.parametrize("embedded", [False, True], ids=["full_text", "hybrid"])
def test_semantic_search_finds_the_right_page(account, agent, fake_llm, embedded):
    _folder(account, agent, embedding=EMBEDDING if embedded else "")
    hits = tools.passages_for_query(agent=agent, query="dahlia", limit=3)
    assert "Codeword: dahlia" in hits[0].text and hits[0].metadata["start_page"] <= 4 <= hits[0].metadata["end_page"]
    out = tools.semantic_search_files(agent=agent, query="dahlia codeword", limit=2)
    assert out.startswith("Found 2 semantic matches in") and "=== harbour/book.pdf (passage #1) ===" in out
    if embedded:
        assert fake_llm.embedding_requests


def test_open_files_windows_and_evicts(account, agent):
    agent = agent_update(agent=agent, changes={"context_window_limit": 8000})
    _folder(account, agent)
    out = tools.open_files(agent=agent, file_requests=[{"file_name": "harbour/book.pdf", "offset": 7, "length": 3}])
    assert out == "* Opened harbour/book.pdf (lines 8-10)"
    state = agent_file_states(agent=agent).get(file__file_name="book.pdf")
    assert (state.is_open, state.start_line, state.end_line) == (True, 8, 10)
    closed = tools.open_files(agent=agent, file_requests=[{"file_name": "harbour/notes.md"}], close_all_others=True)
    assert closed == "* Opened harbour/notes.md\nNote: Closed 1 file(s) due to close_all_others=True: harbour/book.pdf"
    with pytest.raises(Invalid, match="not attached - did you get the filename correct"):
        tools.open_files(agent=agent, file_requests=[{"file_name": "book.pdf"}])
    with pytest.raises(Invalid, match="exceeds configured maximum limit of 3 files"):
        tools.open_files(agent=agent, file_requests=[{"file_name": "harbour/notes.md"}] * 4)


def test_directories_section_shows_open_windows(account, agent):
    tools_agent = agent_update(agent=agent, changes={"context_window_limit": 8000})
    assert tools.directories_section(tools_agent) == ""
    _folder(account, tools_agent)
    tools.open_files(agent=tools_agent, file_requests=[{"file_name": "harbour/book.pdf", "offset": 0, "length": 2}])
    text = tools.directories_section(tools_agent)
    assert text.startswith("<directories>\n<file_limits>\n- current_files_open=2\n- max_files_open=3\n</file_limits>")
    assert '<directory name="harbour">\n<instructions>Cite pages</instructions>' in text
    assert '<file status="open" name="harbour/book.pdf">' in text
    assert "[Viewing lines 1 to 2 (out of" in text and "1: Chapter 1\n2: On page 1" in text
    services.file_close(
        agent=tools_agent, file_id=agent_file_states(agent=tools_agent).get(file__file_name="notes.md").file_id
    )
    assert (
        '<file status="closed" name="harbour/notes.md">\n<metadata>\n- read_only=true\n- chars_current=0'
        in tools.directories_section(tools_agent)
    )


def _search_queries(agent, query: str) -> list[str]:
    with CaptureQueriesContext(connection) as ctx:
        assert tools.semantic_search_files(agent=agent, query=query).startswith("Found")
    return [q["sql"] for q in ctx.captured_queries]


def test_a_semantic_search_reads_its_hits_in_the_ranking_query(account, agent, fake_llm):
    """One model's ranking is the answer: on PostgreSQL the nearest chunks are read with their file's and folder's
    names in the query that ranks them (HNSW), only the columns a hit shows; then the views are touched."""
    _folder(account, agent, embedding=EMBEDDING)
    tools.semantic_search_files(agent=agent, query="warm")  # SQLite: each file's vectors are read once a process
    sql = _search_queries(agent, "dahlia codeword")
    if connection.vendor == "postgresql":
        # the folders and models of the processed files, the provider, the scan's settings (local: a test runs in a
        # transaction), the ranking with its hits, the touch
        assert len(sql) == 5, sql
        ranking = next(s for s in sql if "<=>" in s)
        assert '"memory_folder"."name"' in ranking and '"memory_folderfile"."file_name"' in ranking
        assert '"memory_passage"."metadata"' not in ranking and '"memory_folderfile"."content"' not in ranking
    else:
        assert len(sql) == 5, sql  # folders and models, the provider, the files, the hits, the touch
    assert sql[-1].startswith('UPDATE "memory_fileagent"')


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_the_hnsw_settings_are_set_once_per_connection(account, agent, fake_llm):
    """A search sets the scan's settings for its connection's session the first time that connection searches (the
    query's embedding gives the connection back to the pool: the next query may borrow another)."""
    postgres_required()
    _folder(account, agent, embedding=EMBEDDING)
    seen, again = set(), 0
    queries = itertools.cycle(("dahlia", "dahlia codeword", "keeper", "lighthouse", "ferry dawn", "codeword"))
    # until three searches ran on a connection that had searched before: the pool holds at most DB_POOL_MAX, so
    # that many searches more are enough, whichever connection the pool lends each time
    for query in itertools.islice(queries, 3 * (settings.DB_POOL_MAX + 1)):
        sql = _search_queries(agent, query)
        session = connection.connection  # the one the search ranked on, still borrowed (its views were touched)
        if id(session) in seen:
            assert not [s for s in sql if "set_config" in s]
            again += 1
        seen.add(id(session))
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan')")
            assert cursor.fetchone() == ("100", "relaxed_order")
        if again == 3:
            break
    assert again == 3, (again, len(seen))
