"""Embeddings from any provider litellm speaks (OpenAI, Ollama, any OpenAI-compatible server)."""

from core.llm.client import LLMError, embed
from memory.embedders.base import Embedder, EmbeddingError


class LiteLLMEmbedder(Embedder):
    def __init__(
        self, *, handle: str, litellm_model: str, api_base: str | None, api_key: str | None, timeout: float = 60.0
    ):
        self.handle = handle
        self.litellm_model = litellm_model
        self.api_base = api_base
        self.api_key = api_key
        self.timeout = timeout

    def _embed(self, texts: list[str]) -> list[list[float]]:
        try:
            return embed(
                texts, model=self.litellm_model, api_base=self.api_base, api_key=self.api_key, timeout=self.timeout
            )
        except LLMError as exc:
            raise EmbeddingError(f"Embedding with '{self.handle}' failed: {exc}") from exc
