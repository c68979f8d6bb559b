"""Calls to model providers (network I/O): the client (`client.py`), our own over OpenAI's wire format
(`openai_wire.py`) and litellm's public API for the rest (`via_litellm.py`; an owner's provider reached through the
pinning relay, `relay.py`), replies read into the engine's types
(`replies.py`), failures as one typed error (`errors.py`)."""
