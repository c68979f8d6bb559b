"""JSON a person sent is parsed with a bound on its nesting (core.text.json_input): a deep document is a ValueError
that says so, never a RecursionError, whether Python's parser would have overflowed on it or not."""

import json

import pytest

from core.text import MAX_JSON_DEPTH, JSONTooDeep, json_input


def _nested(depth: int, opener: str = "[") -> str:
    if opener == "{":
        return '{"k": ' * depth + "1" + "}" * depth
    return "[" * depth + "1" + "]" * depth


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 900, 100_000])
@pytest.mark.parametrize("opener", ["[", "{"])
def test_nesting_past_the_bound_is_refused_with_its_reason(depth, opener):
    text = _nested(depth, opener)
    for doc in (text, text.encode()):
        with pytest.raises(JSONTooDeep, match=f"deeper than {MAX_JSON_DEPTH} levels"):
            json_input(doc)


def test_nesting_up_to_the_bound_is_parsed_as_json_loads_would():
    for text in (_nested(MAX_JSON_DEPTH), _nested(MAX_JSON_DEPTH, "{"), '{"a": "[[[[[[[[[["}', "[]", '"x"', "3"):
        assert json_input(text) == json.loads(text)
    wide = json.dumps([[i, {"k": [i]}] for i in range(5000)])  # many brackets, little depth
    assert json_input(wide) == json.loads(wide)


def test_a_smaller_bound_can_be_asked_for():
    with pytest.raises(JSONTooDeep):
        json_input("[[[1]]]", max_depth=2)
    assert json_input("[[1]]", max_depth=2) == [[1]]


def test_other_bad_json_is_a_decode_error_and_all_are_value_errors():
    with pytest.raises(json.JSONDecodeError):
        json_input("{not json")
    assert issubclass(JSONTooDeep, ValueError)
