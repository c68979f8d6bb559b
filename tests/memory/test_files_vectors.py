"""Nearest chunks of processed files without a vector index (SQLite): the same as an exact search over every chunk,
each file's vectors read from the database once."""

import numpy as np
import pytest

from memory.embedders.selection import embedder_for_handle
from memory.files import services
from memory.files.ingest import file_ingest
from memory.files.vectors import files_nearest
from memory.models import Passage

pytestmark = pytest.mark.django_db
EMBEDDING = "openai/text-embedding-3-small"


def test_nearest_chunks_match_an_exact_search_and_vectors_are_read_once(account, fake_llm, django_assert_num_queries):
    folder = services.folder_create(owner=account.org, name="logs", embedding=EMBEDDING, embedding_chunk_size=50)
    for n, topic in enumerate(("ferries and tides", "lighthouses and keepers", "puffins and cliffs")):
        text = "\n".join(f"Entry {i} of log {n} about {topic}, day {i}." for i in range(60))
        file, _ = services.file_upload(
            folder=folder, file_name=f"log{n}.txt", content_type="text/plain", data=text.encode()
        )
        assert file_ingest(file_id=file.id) == "completed"
    vector = np.asarray(embedder_for_handle(owner=account.org, handle=EMBEDDING).embed_one("keepers of lighthouses"))

    rows = list(Passage.objects.filter(folder=folder).values_list("id", "embedding"))
    matrix = np.array([e for _, e in rows])
    scores = dict(
        zip(
            [pid for pid, _ in rows],
            matrix @ vector / np.linalg.norm(matrix, axis=1) / np.linalg.norm(vector),
            strict=True,
        )
    )
    best = sorted(scores.values(), reverse=True)[:5]  # chunks of equal words tie: compare scores, not ids

    found = files_nearest(folder_ids=[folder.id], handle=EMBEDDING, vector=vector, limit=5)
    assert np.allclose([scores[pid] for pid in found], best, atol=1e-6)
    assert all("lighthouses" in Passage.objects.get(pk=pid).text for pid in found)
    with django_assert_num_queries(1):  # the folder's files; their vectors come from the cache
        assert files_nearest(folder_ids=[folder.id], handle=EMBEDDING, vector=vector, limit=5) == found
