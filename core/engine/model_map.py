"""Our copy of the model facts read on every compile and step: context windows, output limits, prices, capabilities.

`model_data/models.json.gz` holds, for every model litellm knows, the fields in `FIELDS` as litellm's public
`litellm.model_cost` serves them (alias handles included, as rows of their own), written by `scripts/model-map` from
the locked litellm (its licence: `model_data/LICENSE`). Reading our own file keeps litellm's import (about 2.4 s of
CPU) off the compile, the model request and the step's end, in every worker and test server that never calls a model
through litellm; `tests/core/engine/test_tokens.py` checks the copy against `litellm.model_cost`, so a lock that moves
litellm fails until `scripts/model-map` is run again.
"""

from __future__ import annotations

import gzip
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson

PATH = Path(__file__).resolve().with_name("model_data") / "models.json.gz"
FIELDS = (
    "max_input_tokens",
    "max_tokens",
    "max_output_tokens",
    "mode",
    "supports_reasoning",
    "supports_function_calling",
    "input_cost_per_token",
    "output_cost_per_token",
    "cache_read_input_token_cost",
)


@lru_cache(maxsize=1)
def table() -> dict[str, dict[str, Any]]:
    """Model name -> its facts (only the `FIELDS` litellm gives for it). The file ships with the code: a missing one
    is an error, not a map with no models (every model would get the default window and no price)."""
    return orjson.loads(gzip.decompress(PATH.read_bytes()))
