"""The embedder interface: texts in, one float32 vector per text out."""

from abc import ABC, abstractmethod

import numpy as np

from core.transactions import outside_transaction

# Longer inputs are cut before embedding: providers reject inputs past their token limit (8k for OpenAI's),
# and small local models only read the first few hundred tokens anyway. The stored text is never cut.
MAX_EMBED_CHARS = 8000


class EmbeddingError(Exception):
    """The embedder could not produce vectors (provider down, model missing, bad key)."""


class Embedder(ABC):
    """One embedding model. `handle` is what passages record as their `embedding_model`."""

    handle: str

    @abstractmethod
    def _embed(self, texts: list[str]) -> list[list[float]] | np.ndarray:
        """Backend call; raise EmbeddingError on failure."""

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed texts (one network or model call); returns an (n, dim) float32 array; raises EmbeddingError."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        outside_transaction(f"embedding with {self.handle}")
        vectors = np.asarray(self._embed([t[:MAX_EMBED_CHARS] or " " for t in texts]), dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(texts) or vectors.shape[1] == 0:
            raise EmbeddingError(f"Embedding model '{self.handle}' returned {vectors.shape} for {len(texts)} texts")
        return vectors

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]
