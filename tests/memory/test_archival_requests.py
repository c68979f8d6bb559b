"""Archival insert and search as the REST routes run them: the agent and its archives read in one statement, the
full-text ranking as our own statement (equal to the queryset's), and what each request sees of edits made
between requests (archives attached and detached). On both databases."""

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from django.db import connection

from core.errors import NotFound
from memory import selectors, services
from memory.archives import archive_agent_attach, archive_agent_detach, archive_create, archive_passages_insert
from memory.models import Passage
from memory.search import fulltext
from tests.factories import make_agent
from tests.fake_llm import embedding_vector

pytestmark = pytest.mark.django_db


def _search(api, agent_id: str, query: str, **params) -> list[str]:
    r = api.get(f"/v1/agents/{agent_id}/archival-memory/search", data={"query": query, **params})
    assert r.status_code == 200, r.content
    return [hit["content"] for hit in r.json()["results"]]


def test_archival_agent_reads_the_agent_and_its_archives_in_attach_order(account, other_account, agent):
    first = archive_create(owner=account.org, name="first")
    second = archive_create(owner=account.org, name="second")
    read, archive_ids = selectors.archival_agent(owner=account.org, agent_id=agent.id)
    assert (read.pk, read.owner_id, read.embedding, archive_ids) == (agent.id, account.org.pk, "", [])
    archive_agent_attach(archive=second, agent=agent)
    archive_agent_attach(archive=first, agent=agent)
    read, archive_ids = selectors.archival_agent(owner=account.org, agent_id=agent.id)
    assert archive_ids == [second.id, first.id]
    assert read.name == "memory-agent"  # a field not read with it comes from the database when used
    with pytest.raises(NotFound, match=f"Agent '{agent.id}' not found"):
        selectors.archival_agent(owner=other_account.org, agent_id=agent.id)


def test_each_request_sees_archives_attached_and_detached_since(api, account, agent):
    base = f"/v1/agents/{agent.id}/archival-memory"
    archive = archive_create(owner=account.org, name="shared")
    archive_passages_insert(archive=archive, items=[{"text": "the ferry leaves from pier nine"}])
    assert api.post(base, {"text": "my own note about the ferry"}).json()[0]["archive_id"] is None
    assert _search(api, agent.id, "ferry") == ["my own note about the ferry"]

    archive_agent_attach(archive=archive, agent=agent)
    stored = api.post(base, {"text": "the ferry is late on sundays"}).json()[0]
    assert (stored["archive_id"], stored["agent_id"]) == (archive.id, None)
    assert set(_search(api, agent.id, "ferry")) == {
        "my own note about the ferry",
        "the ferry leaves from pier nine",
        "the ferry is late on sundays",
    }

    archive_agent_detach(archive=archive, agent=agent)
    assert api.post(base, {"text": "a last ferry note"}).json()[0]["archive_id"] is None
    assert set(_search(api, agent.id, "ferry")) == {"my own note about the ferry", "a last ferry note"}


def test_search_answers_as_before_with_the_passages_fields(api, agent):
    made = datetime(2025, 5, 1, 9, 30, tzinfo=UTC)
    services.passage_insert(agent=agent, text="the harbour master's name is Ines", tags=["people"], created_at=made)
    r = api.get(f"/v1/agents/{agent.id}/archival-memory/search", data={"query": "harbour master", "top_k": 5})
    assert r.status_code == 200, r.content
    [hit] = r.json()["results"]
    assert hit["content"] == "the harbour master's name is Ines" and hit["tags"] == ["people"]
    assert datetime.fromisoformat(hit["timestamp"]) == made
    assert r.json()["count"] == 1


def test_search_ranks_ties_newest_first(agent):
    """The full-text ranking the search runs (no filters) keeps equal ranks newest first, to the microsecond."""
    second = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)
    made = {
        "oldest": second - timedelta(days=2),
        "whole second": second,
        "a microsecond later": second + timedelta(microseconds=1),
        "a day before": second - timedelta(days=1),
    }
    for name, created_at in made.items():
        services.passage_insert(agent=agent, text="the tide chart for the harbour", tags=[name], created_at=created_at)
    found = selectors.passages_search(agent=agent, query="tide chart", top_k=10)
    assert [p.tags[0] for p in found] == ["a microsecond later", "whole second", "a day before", "oldest"]
    assert found[0].matched_by == ("full_text",) and found[0].score > found[1].score


def test_text_ranking_statement_equals_the_querysets(account, agent, other_agent):
    """`ranked_ids_where` (our statement, stopping early) ranks as `ranked_ids` over the same rows: the agent's own
    passages and an attached archive's, never another agent's; ties at the cut are kept newest first."""
    archive = archive_create(owner=account.org, name="tides")
    start = datetime(2025, 1, 1, tzinfo=UTC)
    texts = ["tide", "tide tide chart", "harbour tide chart", "a chart", "tide chart", "the harbour"]
    for i in range(60):
        # Equal texts rank alike: each of ours made at its own time, so the order among equals is the time's alone.
        created_at = start + timedelta(minutes=i)
        text = texts[i % len(texts)]
        services.passage_insert(agent=agent, text=text, created_at=created_at)
        services.passage_insert(agent=other_agent, text=text, created_at=created_at)
        if i % 5 == 0:
            archive_passages_insert(
                archive=archive, items=[{"text": text, "created_at": created_at + timedelta(seconds=30)}]
            )
    ours = Passage.objects.filter(agent=agent) | Passage.objects.filter(archive=archive)
    for query, limit, offset in [
        (query, limit, offset)
        for query in ("tide chart", "harbour", "tide", "nothing matches this")
        for limit, offset in ((1, 0), (3, 0), (5, 2), (40, 0), (300, 0))
    ]:
        expected = fulltext.ranked_ids(queryset=ours, query=query, limit=limit, offset=offset)
        got = fulltext.ranked_ids_where(
            using=connection.alias,
            table=Passage._meta.db_table,
            where="s.agent_id = %s OR s.archive_id = %s",
            params=[agent.pk, archive.pk],
            query=query,
            limit=limit,
            offset=offset,
        )
        assert got == expected, (query, limit, offset)


def test_other_owners_agent_is_not_found_by_the_routes(api, other_account):
    theirs = make_agent(other_account.org, name="theirs", include_base_tools=False)
    base = f"/v1/agents/{theirs.id}/archival-memory"
    assert api.post(base, {"text": "not yours"}).status_code == 404
    assert api.get(f"{base}/search", data={"query": "yours"}).status_code == 404
    assert not Passage.objects.filter(agent=theirs).exists()


@pytest.mark.django_db(transaction=True)  # the connection really closes (not inside a test's transaction)
def test_full_text_tables_are_asked_for_once_a_connection():
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    db = connections["default"]
    assert fulltext.fulltext_available(db)
    with CaptureQueriesContext(db) as asked:
        assert fulltext.fulltext_available(db)
    assert len(asked) == 0
    if db.vendor == "sqlite":  # a new connection asks its database again
        db.close()
        with CaptureQueriesContext(db) as asked:
            assert fulltext.fulltext_available(db)
        assert [q["sql"] for q in asked] == ["SELECT 1 FROM sqlite_master WHERE name = 'memory_passage_fts'"]


def test_vectors_are_stored_as_embedded(api, agent, fake_llm):
    """The text form a vector travels in to PostgreSQL gives back each float32 exactly (and SQLite stores bytes)."""
    from core.agents.services import agent_update
    from memory.fields import vector_text

    values = np.array([0.1, -1e-8, 3.4028235e38, 1 / 3, -0.0, 123456.789], dtype=np.float32)
    parsed = np.array([float(x) for x in vector_text(values).strip("[]").split(",")], dtype=np.float32)
    assert parsed.tobytes() == values.tobytes()
    agent_update(agent=agent, changes={"embedding": "openai/text-embedding-3-small"})
    stored = api.post(f"/v1/agents/{agent.id}/archival-memory", {"text": "vectors kept exactly"}).json()[0]
    embedding = Passage.objects.get(pk=stored["id"]).embedding
    expected = np.asarray(embedding_vector("vectors kept exactly", fake_llm.embedding_dim), dtype=np.float32)
    assert embedding.dtype == np.float32 and embedding.tobytes() == expected.tobytes()


def test_each_insert_embeds_with_the_model_and_key_in_force(api, account, agent, fake_llm, settings):
    """The embedding handle comes with the agent's read and the provider's key with its own: an edit of either
    between two requests is used by the second."""
    from core.agents.services import agent_update
    from core.models import ProviderConfig

    settings.EGRESS_ALLOW = ["127.0.0.1"]  # the owner's provider below is the test's fake, on loopback
    base = f"/v1/agents/{agent.id}/archival-memory"

    def insert(text: str) -> dict:
        r = api.post(base, {"text": text})
        assert r.status_code == 200, r.content
        return r.json()[0]

    def last_key() -> str:
        return [q for q in fake_llm.requests if q.path.endswith("/embeddings")][-1].headers["Authorization"]

    assert insert("nothing embeds this")["embedding_config"] is None
    provider = ProviderConfig.objects.create(
        owner=account.org, kind="openai_compatible", name="mine", api_key="first-key", base_url=fake_llm.base_url
    )
    agent_update(agent=agent, changes={"embedding": "mine/text-embedding-3-small"})
    assert insert("embedded with the first key")["embedding_config"]["handle"] == "mine/text-embedding-3-small"
    assert last_key() == "Bearer first-key"
    provider.api_key = "second-key"
    provider.save()
    insert("embedded with the second key")
    assert last_key() == "Bearer second-key"
    agent_update(agent=agent, changes={"embedding": "openai/text-embedding-3-small"})
    assert insert("embedded by the deployment's provider")["embedding_config"]["handle"] == (
        "openai/text-embedding-3-small"
    )
    assert last_key() == "Bearer fake-key"


def test_archive_passages_keep_the_time_given_them(account):
    archive = archive_create(owner=account.org, name="dated")
    given = datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=UTC)
    before = datetime.now(UTC)
    dated, undated = archive_passages_insert(
        archive=archive, items=[{"text": "a leap day note", "created_at": given}, {"text": "a note of now"}]
    )
    stored = {p.text: p.created_at for p in Passage.objects.filter(archive=archive)}
    assert stored == {"a leap day note": given, "a note of now": undated.created_at}
    assert dated.created_at == given and before <= undated.created_at <= datetime.now(UTC)


def test_written_passages_are_stored_rows_a_save_updates(account, agent):
    """Our INSERT gives back passages as the ORM's would: a later save() updates the row, never inserts it twice."""
    archive = archive_create(owner=account.org, name="saved")
    [shared] = archive_passages_insert(archive=archive, items=[{"text": "first words"}])
    mine = services.passage_insert(agent=agent, text="a tagged note", tags=["t"])
    for passage, text in ((shared, "second words"), (mine, "a retagged note")):
        passage.text = text
        passage.save(update_fields=["text"])
        assert Passage.objects.get(pk=passage.pk).text == text
        passage.save()  # a whole save of a stored row: an UPDATE
    assert Passage.objects.filter(pk__in=[shared.pk, mine.pk]).count() == 2
