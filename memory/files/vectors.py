"""Nearest chunks of processed files by cosine similarity in numpy, for databases without a vector index (SQLite).

A processed file's chunks never change (they are written once, with its final status, and deleted with it), so each
file's vectors are read from the database once per process into a normalized matrix, keyed by the file's id and
`updated_at`; least recently used matrices are dropped past MATRIX_CACHE_BYTES. A query is then one matrix product
per file. PostgreSQL uses its HNSW index instead (memory.search.vectors.pg_nearest).
"""

import threading
from collections import OrderedDict
from datetime import datetime

import numpy as np

from memory.models import FileStatus, FolderFile, Passage

MATRIX_CACHE_BYTES = 256 * 1024 * 1024
_matrices: OrderedDict[tuple[str, datetime, str, int], tuple[list[str], np.ndarray]] = OrderedDict()
_cached_bytes = 0
_lock = threading.Lock()


def _file_matrix(file_id: str, updated_at: datetime, handle: str, dim: int) -> tuple[list[str], np.ndarray]:
    global _cached_bytes
    key = (file_id, updated_at, handle, dim)
    with _lock:
        hit = _matrices.get(key)
        if hit is not None:
            _matrices.move_to_end(key)
            return hit
    rows = list(
        Passage.objects.filter(file_id=file_id, embedding_model=handle, embedding_dim=dim).values_list(
            "id", "embedding"
        )
    )
    matrix = np.array([e for _, e in rows], dtype=np.float32).reshape(len(rows), dim)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    made = ([pid for pid, _ in rows], matrix / np.where(norms == 0, 1, norms))
    with _lock:
        if key not in _matrices:
            _matrices[key] = made
            _cached_bytes += made[1].nbytes
        while _cached_bytes > MATRIX_CACHE_BYTES and len(_matrices) > 1:
            _, (_, dropped) = _matrices.popitem(last=False)
            _cached_bytes -= dropped.nbytes
    return made


def files_nearest(*, folder_ids: list[str], handle: str, vector, limit: int) -> list[str]:
    """Ids of the `limit` chunks nearest `vector` among the processed files of the folders embedded with `handle`."""
    query = np.asarray(vector, dtype=np.float32)
    query = query / (np.linalg.norm(query) or 1.0)
    files = FolderFile.objects.filter(folder_id__in=folder_ids, status=FileStatus.COMPLETED, embedding_model=handle)
    best: list[tuple[float, str]] = []
    for file_id, updated_at in files.values_list("id", "updated_at"):
        ids, matrix = _file_matrix(file_id, updated_at, handle, len(query))
        if not ids:
            continue
        scores = matrix @ query
        top = np.argpartition(-scores, min(limit, len(ids)) - 1)[:limit]
        best += [(float(scores[i]), ids[i]) for i in top]
    best.sort(key=lambda hit: -hit[0])
    return [pid for _, pid in best[:limit]]
