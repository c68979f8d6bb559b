"""core.stamped: a value kept under one stamp is not given for another, and the budget evicts the least recently used
(the readers' own tests, tests/core/test_snapshot_specs.py, check the statements and a row changed between steps)."""

from core.stamped import StampedCache


def test_a_value_is_given_only_for_the_stamp_it_was_kept_with():
    cache = StampedCache(10)
    cache.put("a", "2026-12-07 10:00:00", "old")
    assert cache.get("a", "2026-12-07 10:00:00") == "old"
    assert cache.get("a", "2026-12-07 10:00:01") is None
    cache.put("a", "2026-12-07 10:00:01", "new")
    assert cache.get("a", "2026-12-07 10:00:00") is None and cache.get("a", "2026-12-07 10:00:01") == "new"


def test_the_budget_evicts_the_least_recently_used_by_cost():
    cache = StampedCache(10, cost=len)
    cache.put("a", 1, "aaaa")
    cache.put("b", 1, "bbbb")
    assert cache.get("a", 1) == "aaaa"  # used: "b" is now the oldest
    cache.put("c", 1, "cccc")
    assert cache.get("b", 1) is None and cache.get("a", 1) == "aaaa" and cache.get("c", 1) == "cccc"
    cache.put("a", 2, "a")  # replaced: its old cost is given back
    assert cache.spent == len("a") + len("cccc")
