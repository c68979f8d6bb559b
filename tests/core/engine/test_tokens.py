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


def test_exact_count_matches_tiktoken():
    import tiktoken

    assert tokens.count_text("openai/gpt-4o", TEXT) == len(tiktoken.get_encoding("o200k_base").encode(TEXT))


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
