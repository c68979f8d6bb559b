"""Embeddings from a configured provider through the model client (core.llm.client.embed): OpenAI and any
OpenAI-compatible server over our own client, every other provider (Ollama, ...) through litellm."""

from core.llm.client import LLMError, embed
from memory.embedders.base import Embedder, EmbeddingError


class ProviderEmbedder(Embedder):
    def __init__(
        self,
        *,
        handle: str,
        model: str,
        api_base: str | None,
        api_key: str | None,
        guarded: bool = False,
        timeout: float = 60.0,
    ):
        self.handle = handle
        self.model = model
        self.api_base = api_base
        self.api_key = api_key
        self.guarded = guarded
        self.timeout = timeout

    def _embed(self, texts: list[str]) -> list[list[float]]:
        try:
            return embed(
                texts,
                model=self.model,
                api_base=self.api_base,
                api_key=self.api_key,
                timeout=self.timeout,
                guarded=self.guarded,
            )
        except LLMError as exc:
            raise EmbeddingError(f"Embedding with '{self.handle}' failed: {exc}") from exc
