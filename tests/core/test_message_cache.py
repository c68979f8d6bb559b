"""The process's cache of stored messages (core/agents/context.py) is bounded by the bytes it holds, not by a count
of messages: a soak of sends showed a count-bounded cache as memory growing with every send. And token counts of
messages as they are stored do not take places in the cache of recurring texts (core/engine/tokens.py)."""

from core.agents.context import BYTES_PER_TOKEN, ENTRY_BYTES, MessageCache
from core.engine import tokens
from core.models import Message


def _row(n: int, token_count: int = 100) -> Message:
    return Message(id=f"message-{n}", role="user", text=f"note {n}", kind="message", token_count=token_count)


def test_the_cache_drops_the_least_recently_used_once_its_bytes_pass_the_budget():
    size = ENTRY_BYTES + BYTES_PER_TOKEN * 100
    cache = MessageCache(budget=10 * size)
    cache.put_rows([_row(n) for n in range(10)])
    assert (len(cache), cache.bytes) == (10, 10 * size)
    assert set(cache.get_many(["message-0"])) == {"message-0"}  # used: now the most recent
    cache.put_rows([_row(10), _row(11)])
    assert (len(cache), cache.bytes) == (10, 10 * size)
    assert set(cache.get_many([f"message-{n}" for n in range(12)])) == {"message-0"} | {
        f"message-{n}" for n in range(3, 12)
    }


def test_a_long_message_counts_for_its_length():
    cache = MessageCache(budget=1_000_000)
    cache.put_rows([_row(0, token_count=300_000)])  # about 1.2 MB of text: more than the whole budget
    cache.put_rows([_row(1)])
    assert len(cache) == 1 and set(cache.get_many(["message-0", "message-1"])) == {"message-1"}


def test_a_row_put_again_is_counted_once():
    cache = MessageCache(budget=1_000_000)
    cache.put_rows([_row(0)])
    cache.put_rows([_row(0)])
    assert (len(cache), cache.bytes) == (1, ENTRY_BYTES + BYTES_PER_TOKEN * 100)
    cache.clear()
    assert (len(cache), cache.bytes) == (0, 0)


def test_counting_a_stored_message_leaves_the_recurring_texts_cache_alone():
    tokens._cached_count.cache_clear()
    message = {"role": "assistant", "content": "a reply seen once", "tool_call_id": "call-1"}
    assert tokens.count_message("openai/gpt-4o", message) > 0
    assert tokens._cached_count.cache_info().currsize == 0
