"""An expectations spec with a value of the wrong type is refused with a readable problem (never a TypeError when
it is checked, nor one later when a run is evaluated against it): pure, no database."""

import pytest

from core.engine.expectations import evaluate, validate
from tests.core.engine.test_expectations import _observed

WRONG = [
    {"blocks": 5},
    {"blocks": {"label": "human"}},
    {"blocks": ["human"]},
    {"blocks": [{"label": 5, "contains": "x"}]},
    {"blocks": [{"label": "human", "contains": 5}]},
    {"blocks": [{"label": "human", "matches": ["x"]}]},
    {"blocks": [{"label": "human", "matches": "("}]},
    {"reply": {"contains": 5}},
    {"reply": {"matches": {"a": 1}}},
    {"reply": "hello"},
    {"reply": ["contains", "x"]},
    {"reply": None},
    {"archival": "x"},
    {"archival": {"matches": 5}},
    {"archival": {}},
    {"archival": 5},
    {"stop_reason": 5},
    {"stop_reason": ["end_turn"]},
    {"max_steps": "3"},
    {"max_steps": -1},
    {"max_steps": 1.5},
    {"max_steps": True},
    {"max_cost_usd": "x"},
    {"max_cost_usd": float("nan")},
    {"max_cost_usd": float("inf")},
    {"max_prompt_tokens_per_step": [1]},
    {"tools": 5},
    {"tools": None},
    {"tools": {"calls": "x"}},
    {"tools": {"calls": [{"name": 5}]}},
    {"tools": {"calls": [{"name": "search", "args": 5}]}},
    {"tools": {"calls": [{"name": "search", "args": ["query"]}]}},
    {"tools": {"calls": [{"name": "search", "args": {"query": {"regex": 5}}}]}},
    {"tools": {"calls": [{"name": "search", "args": {"query": {"regex": "("}}}]}},
    {"tools": {"calls": [{"name": "search"}], "order": ["set"]}},
    {"tools": {"calls": [{"name": "search"}], "order": {}}},
]


@pytest.mark.parametrize("spec", WRONG, ids=[repr(s) for s in WRONG])
def test_a_wrong_typed_expectation_is_a_problem_not_an_error(spec):
    problems = validate(spec)
    assert problems and all(isinstance(p, str) and p for p in problems)


@pytest.mark.parametrize("spec", [[], "reply", 5, None, [{"reply": {"contains": "x"}}]])
def test_expectations_that_are_not_an_object_are_a_problem(spec):
    assert validate(spec) == ['the expectations are a JSON object, such as {"reply": {"contains": "hello"}}']


def test_every_spec_that_validates_evaluates_without_an_error():
    specs = [
        {"blocks": []},
        {"blocks": [{"label": "human", "matches": "tea"}]},
        {"archival": {"matches": "dragon"}},
        {"max_steps": 0, "max_prompt_tokens_per_step": 10**40, "max_cost_usd": 0},
        {"max_cost_usd": 1},
        {"tools": {"calls": [{"name": "search", "args": None}]}},
        {"tools": {"calls": [{"name": "search", "args": {"query": {"regex": "^tea"}, "n": [1, {"a": 2}]}}]}},
    ]
    for spec in specs:
        assert validate(spec) == [], spec
        assert isinstance(evaluate(spec, _observed()), list)
