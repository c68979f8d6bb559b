"""conversation_search: every message of the agent, in and out of the window, on both databases."""

from datetime import UTC, datetime, timedelta

import pytest

from memory import selectors
from tests.memory.conftest import add_message

pytestmark = pytest.mark.django_db


def _texts(rows):
    return [r.text for r in rows]


def test_finds_messages_evicted_from_the_window(agent):
    add_message(agent, "user", "My cat is called Marmalade", in_context=False)
    add_message(agent, "assistant", "What a lovely name for a cat!", in_context=False)
    add_message(agent, "user", "Let's talk about the weather")
    found = selectors.messages_search(agent=agent, query="Marmalade")
    assert _texts(found) == ["My cat is called Marmalade"]
    assert found[0].id not in agent.message_ids


def test_best_match_first_and_stemming(agent):
    add_message(agent, "user", "cats are nice")
    add_message(agent, "user", "my cat Marmalade sleeps all day")
    add_message(agent, "user", "dogs bark")
    found = _texts(selectors.messages_search(agent=agent, query="cat marmalade"))
    assert found[0] == "my cat Marmalade sleeps all day"
    assert "cats are nice" in found  # english stemming: cats ~ cat
    assert "dogs bark" not in found


@pytest.mark.parametrize(
    "query",
    [
        '"unbalanced',
        "cat:",
        "NEAR(cat dog)",
        "a*b -c",
        "OR AND NOT",
        "'; DROP TABLE x; --",
        "(((",
        "^cat",
        "{cat}",
        "%_%",
        'cat\'s "favourite" toy?',
    ],
)
def test_punctuation_and_query_syntax_never_crash(agent, query):
    add_message(agent, "user", "the cat's favourite toy is a red ball")
    rows = selectors.messages_search(agent=agent, query=query)
    assert isinstance(rows, list)
    if "cat" in query.lower():
        assert _texts(rows) == ["the cat's favourite toy is a red ball"]


def test_role_filter(agent):
    add_message(agent, "user", "pizza please")
    add_message(agent, "assistant", "pizza is on its way")
    assert _texts(selectors.messages_search(agent=agent, query="pizza", roles=["assistant"])) == ["pizza is on its way"]
    assert len(selectors.messages_search(agent=agent, query="pizza", roles=["user", "assistant"])) == 2


def test_system_messages_and_heartbeats_left_out_by_default(agent):
    add_message(agent, "user", "heartbeat pizza", kind="heartbeat")
    add_message(agent, "user", "real pizza")
    assert _texts(selectors.messages_search(agent=agent, query="pizza")) == ["real pizza"]
    # The agent's system prompt mentions memory; it is not conversation.
    assert selectors.messages_search(agent=agent, query="memory") == []


def test_date_filters(agent):
    now = datetime.now(UTC)
    add_message(agent, "user", "old pizza", created_at=now - timedelta(days=10))
    add_message(agent, "user", "new pizza", created_at=now)
    yesterday = (now - timedelta(days=1)).date().isoformat()
    assert _texts(selectors.messages_search(agent=agent, query="pizza", start=yesterday)) == ["new pizza"]
    assert _texts(selectors.messages_search(agent=agent, query="pizza", end=yesterday)) == ["old pizza"]
    day = (now - timedelta(days=10)).date().isoformat()
    assert _texts(selectors.messages_search(agent=agent, query="pizza", start=day, end=day)) == ["old pizza"]


def test_pagination(agent):
    for i in range(7):
        add_message(agent, "user", f"pizza number {i}")
    first = selectors.messages_search(agent=agent, query="pizza", limit=3)
    second = selectors.messages_search(agent=agent, query="pizza", limit=3, offset=3)
    third = selectors.messages_search(agent=agent, query="pizza", limit=3, offset=6)
    ids = [r.id for r in first + second + third]
    assert len(ids) == 7 and len(set(ids)) == 7
    # equal relevance: newest first
    assert first[0].text == "pizza number 6"


def test_empty_query_lists_newest(agent):
    add_message(agent, "user", "first")
    add_message(agent, "user", "second")
    assert _texts(selectors.messages_search(agent=agent, query="  ", limit=1)) == ["second"]


def test_other_agents_messages_are_not_found(agent, other_agent):
    add_message(other_agent, "user", "secret pineapple")
    assert selectors.messages_search(agent=agent, query="pineapple") == []


def test_edited_and_deleted_messages_follow(agent):
    row = add_message(agent, "user", "banana bread")
    row.text = "apple pie"
    row.save(update_fields=["text"])
    assert selectors.messages_search(agent=agent, query="banana") == []
    assert _texts(selectors.messages_search(agent=agent, query="apple")) == ["apple pie"]
    row.delete()
    assert selectors.messages_search(agent=agent, query="apple") == []


def test_unknown_role_is_rejected(agent):
    from core.errors import Invalid

    with pytest.raises(Invalid):
        selectors.messages_search(agent=agent, query="x", roles=["wizard"])
