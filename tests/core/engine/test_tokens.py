"""Token counting picks the model's own tokenizer offline and names it; model windows come from the cost map."""

import pytest

from core.engine import tokens
from core.engine.types import Message, Role, ToolCall

TEXT = "The quick brown fox jumps over the lazy dog. " * 20


@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("openai/gpt-4o-mini", "tiktoken:o200k_base"),
        ("gpt-4.1", "tiktoken:o200k_base"),
        ("openai/gpt-4", "tiktoken:cl100k_base"),
        ("deepseek/deepseek-chat", "hf:deepseek"),
        ("anthropic/claude-sonnet-4-5", "hf:anthropic(claude-2)+15%"),
        ("ollama/llama3", "tiktoken:cl100k_base+10%(fallback)"),
        ("openai/fake-model", "tiktoken:cl100k_base+10%(fallback)"),
    ],
)
def test_tokenizer_selection(model, name):
    tok = tokens.get_tokenizer(model)
    assert tok.name == name
    assert tok.count(TEXT) > 100


def test_fallback_never_counts_below_cl100k():
    exact = tokens.get_tokenizer("openai/gpt-4").count(TEXT)
    assert tokens.get_tokenizer("ollama/llama3").count(TEXT) >= exact * 1.1


def _long_text() -> str:
    parts = []
    for i in range(400):
        parts.append(
            f"Step {i}: the agent's memory block #{i * 7919 % 1000} holds “naïve café” — 日本語 {i**3} <|endoftext|>\n"
        )
        parts.append(
            '{"tool":"archival_memory_search","args":{"query":"q' + f'{i}","page":{i % 7}' + "}}\n\tdef f(x):  "
        )
        parts.append(f"return x**{i % 5}\r\n")
    return "".join(parts)[:25_000]


@pytest.mark.parametrize(
    ("model", "raw", "counted"),
    [
        ("openai/gpt-4o", 8555, 8555),
        ("openai/gpt-4", 8697, 8697),
        ("deepseek/deepseek-chat", 8697, 8697),
        ("anthropic/claude-sonnet-4-5", 9720, 11178),
        ("ollama/llama3", 8697, 9567),
    ],
)
def test_long_text_counts_match_the_reference(model, raw, counted):
    # The reference: what tiktoken.get_encoding (over OpenAI's own .tiktoken files, hash-checked by tiktoken) and
    # tokenizers.Tokenizer.from_file (over the tokenizer.json files litellm ships) counted for this text before our
    # copies replaced them; a count that moves means a tokenizer that changed.
    text = _long_text()
    assert len(text) == 25_000
    tok = tokens.get_tokenizer(model)
    assert tok._encode_len(text) == raw
    assert tokens.count_text(model, text) == counted


def test_special_token_text_counts_as_plain_text():
    # a message may quote "<|endoftext|>": it is counted as the characters it is, never refused
    assert tokens.count_text("openai/gpt-4o", "<|endoftext|>") > 1
    assert tokens.count_text("openai/gpt-4", "<|endoftext|>") > 1


def test_counting_writes_no_environment_and_reads_no_litellm_files():
    import subprocess
    import sys

    code = (
        "import os, builtins, gzip; from core.engine import tokens; before = dict(os.environ); opened = []\n"
        "real = builtins.open\n"
        "builtins.open = lambda f, *a, **k: (opened.append(str(f)), real(f, *a, **k))[1]\n"
        "for m in ('gpt-4o', 'gpt-4', 'deepseek-chat', 'claude-sonnet-4-5'): tokens.count_text(m, 'hi')\n"
        "print(dict(os.environ) == before, [f for f in opened if 'litellm' in f])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True []"


def test_empty_text_is_zero_and_tokenizer_cached():
    assert tokens.count_text("openai/gpt-4o", "") == 0
    assert tokens.get_tokenizer("openai/gpt-4o") is tokens.get_tokenizer("openai/gpt-4o")


def test_message_count_includes_tool_calls_and_overhead():
    plain = Message(id="m1", role=Role.ASSISTANT, content="hello")
    call = Message(
        id="m2",
        role=Role.ASSISTANT,
        content="hello",
        tool_calls=(ToolCall(id="c1", name="send_message", arguments='{"message": "' + "word " * 50 + '"}'),),
    )
    a, b = tokens.count_message("openai/gpt-4o", plain), tokens.count_message("openai/gpt-4o", call)
    assert a == tokens.MESSAGE_OVERHEAD_TOKENS + tokens.count_text("openai/gpt-4o", "hello")
    assert b > a + 50
    assert tokens.with_token_count("openai/gpt-4o", plain).token_count == a


def test_model_info_from_offline_cost_map():
    assert tokens.model_info("openai/gpt-4o-mini").context_window == 128000
    assert tokens.model_info("ollama/llama3").context_window == 8192
    unknown = tokens.model_info("openai/fake-model")
    assert unknown.known is False and unknown.context_window == tokens.DEFAULT_CONTEXT_WINDOW


def test_context_window_respects_agent_limit():
    assert tokens.context_window("openai/gpt-4o-mini", 2000) == 2000
    assert tokens.context_window("ollama/llama3", 100_000) == 8192  # capped at a known model's maximum
    assert tokens.context_window("openai/fake-model", 300_000) == 300_000  # unknown models trust the setting
    assert tokens.context_window("openai/gpt-4o-mini") == 128000


def test_tokens_module_does_not_import_litellm():
    import subprocess
    import sys

    code = "import sys; from core.engine import tokens, context, loop, rules; tokens.count_text('openai/gpt-4o', 'hi'); print('litellm' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_warm_up_loads_both_openai_encodings():
    tokens._tiktoken.cache_clear()
    tokens.get_tokenizer.cache_clear()
    tokens.warm_up()
    assert tokens._tiktoken.cache_info().currsize == 2
    hits = tokens._tiktoken.cache_info().hits
    assert tokens.count_text("openai/gpt-4o-mini", "hello") > 0 and tokens.count_text("openai/unlisted", "hello") > 0
    assert tokens._tiktoken.cache_info().hits >= hits + 1 and tokens._tiktoken.cache_info().currsize == 2


def test_model_map_is_litellms_public_model_cost_for_every_model_and_field():
    # our copy (core/engine/model_map.py) serves exactly what litellm's public `model_cost` serves, alias handles
    # included; when a lock moves litellm and this fails, run scripts/model-map
    from core.engine import model_map
    from core.llm import via_litellm

    served = {name: row for name, row in via_litellm.lib().model_cost.items() if isinstance(row, dict)}
    ours = model_map.table()
    assert set(ours) == set(served), "the model map is stale: run scripts/model-map"
    for name, row in served.items():
        assert ours[name] == {k: row[k] for k in model_map.FIELDS if k in row}, f"{name}: run scripts/model-map"


def test_latest_handles_are_known_models():
    # litellm serves its `-latest` alias rows as the rows they name; model_info knows them the same way
    from core.llm import via_litellm

    served = via_litellm.lib().model_cost
    latest = sorted(n for n, row in served.items() if n.endswith("-latest") and isinstance(row, dict))
    assert latest, "litellm serves no -latest handles any more: drop this test"
    for name in latest[:5]:
        info = tokens.model_info(name)
        assert info.known is True
        assert info.context_window == (served[name].get("max_input_tokens") or served[name].get("max_tokens"))
