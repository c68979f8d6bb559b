"""An embedding column: pgvector's `vector` on PostgreSQL, packed float32 bytes on SQLite."""

from functools import cache

import numpy as np
from django.db import models


@cache
def _vector_format(dim: int) -> str:
    return "[" + ",".join(["%.9g"] * dim) + "]"


def vector_text(vector) -> str:
    """pgvector's text form of a float32 vector ("[0.5,-1.25,...]"): nine significant digits, which give back each
    float32 exactly, written by one formatting call (a Python repr per element cost milliseconds at 1,536)."""
    values = np.asarray(vector, dtype=np.float32).ravel().tolist()
    return _vector_format(len(values)) % tuple(values)


class EmbeddingField(models.Field):
    """Stores a float vector of any dimension; search code indexes it per dimension."""

    description = "Embedding vector"

    def db_type(self, connection):
        return "vector" if connection.vendor == "postgresql" else "blob"

    def from_db_value(self, value, expression, connection):
        if value is None:
            return None
        if isinstance(value, (bytes, memoryview)):
            return np.frombuffer(bytes(value), dtype=np.float32)
        if isinstance(value, str):  # pgvector text form "[1,2,3]" when no adapter is registered
            return np.array([float(x) for x in value.strip("[]").split(",") if x], dtype=np.float32)
        return np.asarray(value, dtype=np.float32)

    def to_python(self, value):
        if value is None or isinstance(value, np.ndarray):
            return value
        return np.asarray(value, dtype=np.float32)

    def get_db_prep_value(self, value, connection, prepared=False):
        if value is None:
            return None
        if connection.vendor == "postgresql":
            return vector_text(value)
        return np.asarray(value, dtype=np.float32).tobytes()
