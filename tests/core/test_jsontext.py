"""jsontext: orjson's speed, json's meaning (what json does differently goes through json)."""

import enum
import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from core import jsontext


class Colour(enum.StrEnum):
    RED = "red"


@dataclass
class Point:
    x: int


@pytest.mark.parametrize(
    "value",
    [
        {"messages": [{"role": "user", "content": "héllo ✓ 😀"}], "n": 3, "f": 0.1, "ok": True, "none": None},
        [1, -(2**63), 2**64 - 1, 1e300, 'tab\tquote"slash\\'],
        {"big": 2**70},  # beyond 64 bits: orjson refuses, json writes it
        {1: "int key", "2": "str key"},  # json turns keys into strings; orjson refuses them
        {"status": Colour.RED},  # a str subclass: json writes the string
        {"lone": "a\ud800b"},  # orjson refuses lone surrogates; json escapes them
    ],
)
def test_the_text_means_what_json_dumps_means(value):
    text = jsontext.dumps(value)
    assert json.loads(text) == json.loads(json.dumps(value))


def test_nul_stays_escaped_and_non_ascii_stays_itself():
    text = jsontext.dumps({"t": "a\x00b é"})
    assert "\\u0000" in text and "é" in text  # core.fields finds NUL by its escape


@pytest.mark.parametrize("value", [{"at": datetime(2026, 1, 1, tzinfo=UTC)}, {"p": Point(1)}, {"s": {1, 2}}])
def test_what_json_refuses_is_refused(value):
    with pytest.raises(TypeError):
        jsontext.dumps(value)


class Counts(dict):
    pass


@pytest.mark.parametrize(
    "value",
    [
        {"at": datetime(2026, 1, 1, tzinfo=UTC)},
        {"p": Point(1)},
        {"s": {1}},
        {"ok": [1, "two", None]},
        {"counts": Counts(a=1)},  # a dict subclass: json writes an object, never calls the default
    ],
)
def test_a_default_serves_what_json_would_hand_it(value):
    assert json.loads(jsontext.dumps(value, default=str)) == json.loads(json.dumps(value, default=str))


def test_nan_and_infinities_become_null():
    assert json.loads(jsontext.dumps([math.nan, math.inf, -math.inf])) == [None, None, None]


@pytest.mark.parametrize(
    "text",
    ['{"a": [1, 2.5, "hé", null, true], "b": {"c": "\\u0000"}}', '"\\ud800"', "NaN", '{"x": -Infinity}', "1e400"],
)
def test_loads_reads_what_json_reads(text):
    """orjson's parse where it reads the text, json's where it refuses it (NaN, the infinities, a lone surrogate)."""
    got, want = jsontext.loads(text), json.loads(text)
    assert got == want or (isinstance(want, float) and math.isnan(want) and math.isnan(got))


def test_loads_reads_an_integer_beyond_64_bits_as_a_float_and_refuses_what_json_refuses():
    """The one documented difference from json.loads, and json's own error for broken text."""
    assert jsontext.loads("18446744073709551617") == float(18446744073709551617)
    assert jsontext.loads("18446744073709551615") == 18446744073709551615  # 64 bits unsigned: exact
    with pytest.raises(ValueError):
        jsontext.loads('{"a": ')
