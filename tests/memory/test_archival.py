"""Archival memory: insert, list, search (hybrid / full text), tags, dates, delete, on both databases."""

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from core.agents.services import agent_update
from core.errors import Invalid, NotFound
from memory import selectors, services
from memory.models import Passage

pytestmark = pytest.mark.django_db

EMBEDDING = "openai/text-embedding-3-small"


@pytest.fixture
def embedded_agent(agent, fake_llm):
    return agent_update(agent=agent, changes={"embedding": EMBEDDING})


def _texts(rows):
    return [p.text for p in rows]


def test_full_text_mode_without_embedder(agent):
    assert selectors.archival_search_mode(agent) == "full_text"
    services.passage_insert(agent=agent, text="Alice's favourite colour is teal")
    services.passage_insert(agent=agent, text="Bob plays the cello")
    stored = Passage.objects.get(text__startswith="Alice")
    assert stored.embedding is None and stored.embedding_dim == 0
    found = selectors.passages_search(agent=agent, query="what colour does Alice like?")
    assert _texts(found) == ["Alice's favourite colour is teal"]
    assert found[0].matched_by == ("full_text",)


def test_hybrid_mode_embeds_and_fuses(embedded_agent, fake_llm):
    agent = embedded_agent
    assert selectors.archival_search_mode(agent) == "hybrid"
    services.passage_insert(agent=agent, text="the launch code is tangerine")
    services.passage_insert(agent=agent, text="weather report: sunny")
    stored = Passage.objects.get(text__startswith="the launch")
    assert stored.embedding_model == EMBEDDING and stored.embedding_dim == fake_llm.embedding_dim
    assert len(fake_llm.embedding_requests) == 2
    found = selectors.passages_search(agent=agent, query="launch code", top_k=5)
    assert found[0].text == "the launch code is tangerine"
    assert set(found[0].matched_by) == {"vector", "full_text"}
    assert len(fake_llm.embedding_requests) == 3  # the query was embedded once
    # Vector search finds the rest too (semantic search always returns its nearest), ranked below.
    assert _texts(found) == ["the launch code is tangerine", "weather report: sunny"]


def test_vector_ranking_alone_finds_related_text(embedded_agent):
    agent = embedded_agent
    for text in ["apples and pears", "quantum chromodynamics lecture notes", "pears are sweet fruit"]:
        services.passage_insert(agent=agent, text=text)
    found = selectors.passages_search(agent=agent, query="pears", top_k=2)
    assert set(_texts(found)) == {"apples and pears", "pears are sweet fruit"}


def test_tags_any_and_all(agent):
    services.passage_insert(agent=agent, text="note one about pizza", tags=["food", "italy"])
    services.passage_insert(agent=agent, text="note two about pizza", tags=["food"])
    services.passage_insert(agent=agent, text="note three about pizza", tags=["travel"])
    any_ = selectors.passages_search(agent=agent, query="pizza", tags=["italy", "travel"])
    assert set(_texts(any_)) == {"note one about pizza", "note three about pizza"}
    all_ = selectors.passages_search(agent=agent, query="pizza", tags=["food", "italy"], match_all_tags=True)
    assert _texts(all_) == ["note one about pizza"]


def test_tags_and_dates_filter_vector_search_too(embedded_agent):
    agent = embedded_agent
    now = datetime.now(UTC)
    services.passage_insert(agent=agent, text="old memo", tags=["memo"], created_at=now - timedelta(days=30))
    services.passage_insert(agent=agent, text="new memo", tags=["memo"])
    services.passage_insert(agent=agent, text="new memo untagged")
    found = selectors.passages_search(agent=agent, query="memo", tags=["memo"], start=now - timedelta(days=1))
    assert _texts(found) == ["new memo"]
    found = selectors.passages_search(agent=agent, query="memo", end=(now - timedelta(days=29)).date().isoformat())
    assert _texts(found) == ["old memo"]


def test_source_tells_agent_from_person(agent):
    services.passage_insert(agent=agent, text="written by the agent")
    services.passage_insert(agent=agent, text="written by a person", source="user")
    assert _texts(selectors.passages_list(agent=agent, source="user")) == ["written by a person"]
    assert _texts(selectors.passages_list(agent=agent, source="agent")) == ["written by the agent"]
    with pytest.raises(Invalid):
        services.passage_insert(agent=agent, text="x", source="robot")


def test_list_pagination_and_search(agent):
    ids = [services.passage_insert(agent=agent, text=f"passage {i}").id for i in range(5)]
    page = selectors.passages_list(agent=agent, limit=2)
    assert [p.id for p in page] == ids[:2]
    assert [p.id for p in selectors.passages_list(agent=agent, after=ids[1], limit=2)] == ids[2:4]
    assert [p.id for p in selectors.passages_list(agent=agent, before=ids[2])] == ids[:2]
    assert [p.id for p in selectors.passages_list(agent=agent, ascending=False, limit=1)] == [ids[4]]
    services.passage_insert(agent=agent, text="something about zebras")
    assert _texts(selectors.passages_list(agent=agent, search="zebra")) == ["something about zebras"]


def test_full_text_ties_rank_newest_first(agent):
    """Passages the text ranks alike come newest first, by when they were made (a given created_at counts), down to
    the microsecond: one stored at a whole second and one a microsecond later keep that order."""
    second = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)
    made = {
        "oldest": second - timedelta(days=2),
        "whole second": second,
        "a microsecond later": second + timedelta(microseconds=1),
        "a day before": second - timedelta(days=1),
    }
    for name, created_at in made.items():
        services.passage_insert(agent=agent, text="the tide chart for the harbour", tags=[name], created_at=created_at)
    found = selectors.passages_list(agent=agent, search="tide chart", limit=10)
    assert [p.tags[0] for p in found] == ["a microsecond later", "whole second", "a day before", "oldest"]
    assert [p.tags[0] for p in selectors.passages_list(agent=agent, search="tide chart", limit=2)] == [
        "a microsecond later",
        "whole second",
    ]


def test_delete_and_other_agents(agent, other_agent):
    p = services.passage_insert(agent=agent, text="delete me please")
    with pytest.raises(NotFound):
        services.passage_delete(agent=other_agent, passage_id=p.id)
    services.passage_delete(agent=agent, passage_id=p.id)
    assert selectors.passages_search(agent=agent, query="delete") == []
    with pytest.raises(NotFound):
        services.passage_delete(agent=agent, passage_id=p.id)
    services.passage_insert(agent=other_agent, text="not yours")
    assert selectors.passages_search(agent=agent, query="yours") == []


def test_search_sees_inserts_and_deletes_after_caching(embedded_agent):
    agent = embedded_agent
    first = services.passage_insert(agent=agent, text="alpha beta")
    assert _texts(selectors.passages_search(agent=agent, query="alpha")) == ["alpha beta"]
    services.passage_insert(agent=agent, text="alpha gamma")
    assert set(_texts(selectors.passages_search(agent=agent, query="alpha"))) == {"alpha beta", "alpha gamma"}
    services.passage_delete(agent=agent, passage_id=first.id)
    assert _texts(selectors.passages_search(agent=agent, query="alpha")) == ["alpha gamma"]


def test_matrix_cache_notices_writes_from_elsewhere(embedded_agent, settings):
    """Another process's insert (no in-process invalidation) is still seen on SQLite through the fingerprint."""
    from memory.search import vectors

    agent = embedded_agent
    services.passage_insert(agent=agent, text="alpha one")
    selectors.passages_search(agent=agent, query="alpha")
    vector = np.asarray(Passage.objects.get(text="alpha one").embedding)
    Passage.objects.create(
        owner_id=agent.owner_id,
        agent=agent,
        text="zzz",
        embedding=vector,
        embedding_model=EMBEDDING,
        embedding_dim=len(vector),
    )  # bypasses services on purpose
    if not settings.IS_POSTGRES:
        hits = vectors.matrix_nearest(using="default", agent_id=agent.id, model=EMBEDDING, vector=vector, limit=5)
        assert {Passage.objects.get(id=i).text for i, _ in hits} == {"alpha one", "zzz"}


def test_embedding_failure_stores_text_and_search_falls_back(embedded_agent, fake_llm):
    agent = embedded_agent
    fake_llm.stop()
    p = services.passage_insert(agent=agent, text="kept despite the outage")
    assert p.embedding is None and "embedding_error" in p.metadata
    assert _texts(selectors.passages_search(agent=agent, query="outage")) == ["kept despite the outage"]


def test_reembed_backfills_passages_stored_before_an_embedder(agent, fake_llm):
    services.passage_insert(agent=agent, text="stored with no embedder")
    agent = agent_update(agent=agent, changes={"embedding": EMBEDDING})
    assert services.passages_reembed(agent=agent) == 1
    p = Passage.objects.get(agent=agent)
    assert p.embedding_model == EMBEDDING and p.embedding_dim == fake_llm.embedding_dim
    assert services.passages_reembed(agent=agent) == 0


def test_insert_validation(agent):
    with pytest.raises(Invalid):
        services.passage_insert(agent=agent, text="   ")
    with pytest.raises(Invalid):
        services.passage_insert(agent=agent, text="ok", tags="not-a-list")
    p = services.passage_insert(agent=agent, text="ok", tags=[" a ", "a", "b"])
    assert p.tags == ["a", "b"]
    assert sorted(p.tag_rows.values_list("tag", flat=True)) == ["a", "b"]


def test_memory_stats(agent):
    from tests.memory.conftest import add_message

    services.passage_insert(agent=agent, text="one")
    services.passage_insert(agent=agent, text="two")
    add_message(agent, "user", "evicted", in_context=False)
    add_message(agent, "user", "evicted too", in_context=False)
    add_message(agent, "user", "in window")
    stats = selectors.memory_stats(agent=agent)
    assert stats.archival_count == 2
    assert stats.recall_outside_window == 2
    assert stats.last_memory_edit  # the agent's blocks were written at creation
