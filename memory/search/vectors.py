"""Nearest passages by cosine distance.

PostgreSQL: pgvector with the per-dimension partial HNSW index (migration 0002). The column is an untyped
`vector`, so the query casts `embedding::vector(N)` and filters `embedding_dim = N` to match that index. The scan's
settings (hnsw.ef_search, iterative scans) are set once per database connection for its session when no transaction
is open, in the search's transaction otherwise.
SQLite: this Python's sqlite3 cannot load extensions, so each agent's vectors are held as one normalized
float32 matrix per process and searched with a single matrix-vector product. The agent's passage revision (a
counter that triggers bump on every insert, delete or re-embed) is checked on every search, so other processes'
writes are seen.
"""

import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
from django.db import connections
from django.db.models import FloatField, Model, QuerySet
from django.db.models.expressions import RawSQL

from memory.fields import vector_text

# ef_search 100 measured recall@10 of 1.0 at 100k passages (index built in one pass) and 0.95 at 10k (built row
# by row); see bench/archival.py. Candidate lists longer than half of it get a proportionally larger beam.
EF_SEARCH = 100
MAX_CACHED_MATRICES = 16


def vector_literal(vector: np.ndarray) -> str:
    return vector_text(vector)


# The psycopg connections whose session runs HNSW scans with these settings, and its ef_search. They steer only HNSW
# index scans, which only these searches make; set per search instead (a transaction and a set_config: three more
# round trips), they took about as long as the search itself on a loaded machine (bench/files.py).
_SCAN_SETTINGS = (
    "SELECT set_config('hnsw.ef_search', %s, {local}), set_config('hnsw.iterative_scan', 'relaxed_order', {local})"
)
_session_ef_search: "weakref.WeakKeyDictionary[object, int]" = weakref.WeakKeyDictionary()


@contextmanager
def _hnsw_scan(using: str, limit: int) -> Iterator[None]:
    """HNSW scans in the block keep walking the graph until `limit` rows pass the query's filters (pgvector >= 0.8),
    from a beam of at least EF_SEARCH."""
    ef_search = max(EF_SEARCH, 2 * limit)
    connection = connections[using]
    if connection.in_atomic_block:  # a rollback would undo a session setting made here: local to the transaction
        with connection.cursor() as cursor:
            cursor.execute(_SCAN_SETTINGS.format(local="true"), (str(ef_search),))
        yield
        return
    connection.ensure_connection()
    session = connection.connection
    if _session_ef_search.get(session) != ef_search:
        with connection.cursor() as cursor:
            cursor.execute(_SCAN_SETTINGS.format(local="false"), (str(ef_search),))
        _session_ef_search[session] = ef_search
    yield


def _by_distance(queryset: QuerySet, vector: np.ndarray) -> QuerySet:
    dim = int(len(vector))
    table = queryset.model._meta.db_table
    distance = RawSQL(
        f'"{table}"."embedding"::vector({dim}) <=> %s::vector({dim})',
        (vector_literal(vector),),
        output_field=FloatField(),
    )
    return queryset.filter(embedding_dim=dim).annotate(_distance=distance).order_by("_distance")


def pg_nearest(*, queryset: QuerySet, vector: np.ndarray, limit: int) -> list[tuple[str, float]]:
    """(id, cosine distance) of the `limit` nearest passages in `queryset` (HNSW; approximate)."""
    with _hnsw_scan(queryset.db, limit):
        rows = list(_by_distance(queryset, vector).values_list("id", "_distance")[:limit])
    return sorted(rows, key=lambda r: r[1])


def pg_nearest_rows(*, queryset: QuerySet, vector: np.ndarray, limit: int) -> list[Model]:
    """The `limit` nearest passages in `queryset` as its rows (its select_related and only() kept), nearest first,
    each with its cosine distance in `_distance` (HNSW; approximate): ranked and read in one query."""
    with _hnsw_scan(queryset.db, limit):
        rows = list(_by_distance(queryset, vector)[:limit])
    return sorted(rows, key=lambda r: r._distance)


@dataclass
class _Matrix:
    fingerprint: tuple
    ids: list[str]
    vectors: np.ndarray
    _index: dict[str, int] = field(default_factory=dict)

    def positions(self, ids) -> np.ndarray:
        if not self._index:
            self._index = {pid: i for i, pid in enumerate(self.ids)}
        return np.fromiter((self._index[i] for i in ids if i in self._index), dtype=np.int64)


_matrices: "OrderedDict[tuple[str, str, int], _Matrix]" = OrderedDict()
_lock = threading.Lock()


def matrix_invalidate(*, agent_id: str) -> None:
    """Drop this process's cached vectors for the agent (called after its passages change)."""
    with _lock:
        for key in [k for k in _matrices if k[0] == agent_id]:
            del _matrices[key]


def _fingerprint(cursor, agent_id: str) -> tuple:
    cursor.execute("SELECT rev FROM memory_passage_rev WHERE agent_id = %s", (agent_id,))
    row = cursor.fetchone()
    return (row[0] if row else 0,)


def _load(cursor, agent_id: str, model: str, dim: int, fingerprint: tuple) -> _Matrix:
    cursor.execute(
        "SELECT id, embedding FROM memory_passage WHERE agent_id = %s AND embedding_model = %s "
        "AND embedding_dim = %s AND embedding IS NOT NULL",
        (agent_id, model, dim),
    )
    rows = cursor.fetchall()
    ids = [r[0] for r in rows]
    vectors = np.frombuffer(b"".join(bytes(r[1]) for r in rows), dtype=np.float32).reshape(len(rows), dim).copy()
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors /= np.where(norms == 0, 1, norms)
    return _Matrix(fingerprint=fingerprint, ids=ids, vectors=vectors)


def _matrix(connection, agent_id: str, model: str, dim: int) -> _Matrix:
    key = (agent_id, model, dim)
    with connection.cursor() as cursor:
        fingerprint = _fingerprint(cursor, agent_id)
        with _lock:
            cached = _matrices.get(key)
            if cached is not None and cached.fingerprint == fingerprint:
                _matrices.move_to_end(key)
                return cached
        matrix = _load(cursor, agent_id, model, dim, fingerprint)
    with _lock:
        _matrices[key] = matrix
        while len(_matrices) > MAX_CACHED_MATRICES:
            _matrices.popitem(last=False)
    return matrix


def matrix_nearest(
    *, using: str, agent_id: str, model: str, vector: np.ndarray, limit: int, allowed_ids: set[str] | None = None
) -> list[tuple[str, float]]:
    """(id, cosine distance) of the `limit` nearest passages of the agent (exact), optionally among `allowed_ids`."""
    matrix = _matrix(connections[using], agent_id, model, int(len(vector)))
    if not matrix.ids:
        return []
    query = np.asarray(vector, dtype=np.float32)
    query = query / (np.linalg.norm(query) or 1.0)
    positions = None if allowed_ids is None else matrix.positions(allowed_ids)
    scores = matrix.vectors @ query if positions is None else matrix.vectors[positions] @ query
    k = min(limit, len(scores))
    if k == 0:
        return []
    top = np.argpartition(-scores, k - 1)[:k]
    top = top[np.argsort(-scores[top])]
    chosen = top if positions is None else positions[top]
    return [(matrix.ids[i], float(1.0 - s)) for i, s in zip(chosen, scores[top], strict=False)]
