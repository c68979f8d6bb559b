"""PostgreSQL only: archival vector search runs on the per-dimension HNSW index, and full text on GIN."""

import numpy as np
import pytest
from django.db import connection, transaction
from django.db.models import FloatField
from django.db.models.expressions import RawSQL

from memory.models import Passage
from memory.search.vectors import vector_literal
from tests.conftest import postgres_required

pytestmark = pytest.mark.django_db


def _plan(sql: str, params) -> str:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_vector_query_uses_the_hnsw_index(agent):
    postgres_required()
    vector = np.ones(384, dtype=np.float32)
    distance = RawSQL(
        '"memory_passage"."embedding"::vector(384) <=> %s::vector(384)',
        (vector_literal(vector),),
        output_field=FloatField(),
    )
    # The same queryset shape memory.search.vectors.pg_nearest builds.
    qs = (
        Passage.objects.filter(embedding_model="m", embedding_dim=384)
        .annotate(_distance=distance)
        .order_by("_distance")
        .values_list("id", "_distance")[:10]
    )
    sql, params = qs.query.sql_with_params()
    assert "passage_embedding_hnsw_384" in _plan(sql, params)


def test_passage_and_message_full_text_use_gin(agent):
    postgres_required()
    for table in ("memory_passage", "core_message"):
        plan = _plan(
            f"SELECT id FROM {table} WHERE to_tsvector('english', \"{table}\".\"text\") @@ to_tsquery('english', %s)",
            ("pizza",),
        )
        assert f"{table}_text_fts" in plan


def test_search_end_to_end_on_pgvector(agent, fake_llm):
    postgres_required()
    from core.agents.services import agent_update
    from memory import selectors, services

    agent = agent_update(agent=agent, changes={"embedding": "openai/text-embedding-3-small"})
    services.passages_insert(agent=agent, texts=[f"fact number {i} about topic{i}" for i in range(50)])
    found = selectors.passages_search(agent=agent, query="topic7", top_k=3)
    assert found[0].text == "fact number 7 about topic7"
    assert "vector" in found[0].matched_by
