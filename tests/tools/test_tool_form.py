"""The typed tool form (tools.arg_form), no database: a JSON schema becomes fields (every type, defaults, enums,
constraints, nullable and union types), and a submitted form becomes the arguments — defaults sent as they are
shown, empty optional fields left out, constraints and JSON checked per field with nothing sent on any error."""

import pytest
from django.http import QueryDict
from django.template.loader import render_to_string

from tools.arg_form import errors_text, form_arguments, form_fields, with_errors
from tools.json_schema import derive_schema

SOURCE = '''def probe(flag: bool = True, count: int = 3, label: str | None = None, ratio: float = 0.5,
          tags: list[str] | None = None, opts: dict | None = None, mode: Literal["fast", "slow"] = "fast") -> str:
    """Probe.

    Args:
        flag: A flag.
        count: How many.
        label: A label.
        ratio: A ratio.
        tags: Some tags.
        opts: Options.
        mode: The mode.
    """
    return "ok"
'''

CONSTRAINED = {
    "type": "object",
    "properties": {
        "n": {"type": "integer", "minimum": 1, "maximum": 10},
        "x": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "step": {"type": "integer", "multipleOf": 5},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$", "minLength": 3, "maxLength": 3},
        "items": {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 2},
        "old_style": {"type": "number", "minimum": 0, "exclusiveMinimum": True},
        "name": {"type": "string"},
    },
    "required": ["name"],
}


def _form(**values) -> QueryDict:
    q = QueryDict(mutable=True)
    for k, v in values.items():
        q[f"arg_{k}"] = v
    return q


def _by_name(fields):
    return {f.name: f for f in fields}


def _defaults_form(fields) -> QueryDict:
    """What the browser submits for the form as drawn: text values as shown, ticked checkboxes as "on"."""
    q = QueryDict(mutable=True)
    for f in fields:
        if f.widget == "checkbox":
            if f.checked:
                q[f.input_name] = "on"
        else:
            q[f.input_name] = f.value
    return q


def test_every_python_type_gets_its_widget_and_default():
    f = _by_name(form_fields(derive_schema(SOURCE)))
    assert (f["flag"].widget, f["flag"].checked, f["flag"].default_text) == ("checkbox", True, "true")
    assert (f["count"].widget, f["count"].kind, f["count"].value) == ("number", "integer", "3")
    assert (f["ratio"].widget, f["ratio"].kind, f["ratio"].value) == ("number", "number", "0.5")
    label = f["label"]
    assert (label.widget, label.value, label.required, label.has_default) == ("text", "", False, False)
    assert (f["tags"].widget, f["tags"].kind) == ("json", "array")
    assert (f["opts"].widget, f["opts"].kind) == ("json", "object")
    assert f["mode"].widget == "select" and f["mode"].value == "fast"
    assert [v for v, _ in f["mode"].options] == ["", "fast", "slow"]  # optional: "not set" is a choice


def test_the_form_as_drawn_sends_its_defaults_and_leaves_out_empty_optional_fields():
    schema = derive_schema(SOURCE)
    fields = form_fields(schema)
    args, errors = form_arguments(_defaults_form(fields), fields, schema)
    assert errors == {}
    assert args == {"flag": True, "count": 3, "ratio": 0.5, "mode": "fast"}  # no label, tags, opts: not sent
    assert args["flag"] is True and type(args["count"]) is int


def test_unticking_a_true_default_sends_false_and_values_are_typed():
    schema = derive_schema(SOURCE)
    fields = form_fields(schema)
    args, errors = form_arguments(
        _form(count="7", ratio="2", label="hi <b>", tags='["a", "b"]', opts='{"k": 1}', mode="slow"), fields, schema
    )
    assert errors == {}
    assert args == {
        "flag": False,
        "count": 7,
        "ratio": 2,
        "label": "hi <b>",
        "tags": ["a", "b"],
        "opts": {"k": 1},
        "mode": "slow",
    }


def test_prefill_wins_over_defaults():
    fields = _by_name(form_fields(derive_schema(SOURCE), {"flag": False, "count": 9, "tags": ["x"], "mode": "slow"}))
    assert fields["flag"].checked is False and fields["count"].value == "9"
    assert fields["tags"].value == '["x"]' and fields["mode"].value == "slow"


def test_an_optional_boolean_without_default_can_be_left_unset():
    schema = {"type": "object", "properties": {"include_text": {"type": "boolean"}, "must": {"type": "boolean"}}}
    schema["required"] = ["must"]
    f = _by_name(form_fields(schema))
    assert f["include_text"].widget == "choice" and f["must"].widget == "checkbox"
    fields = form_fields(schema)
    assert form_arguments(_form(include_text=""), fields, schema) == ({"must": False}, {})
    assert form_arguments(_form(include_text="true", must="on"), fields, schema)[0] == {
        "include_text": True,
        "must": True,
    }
    assert form_arguments(_form(include_text="false"), fields, schema)[0]["include_text"] is False


def test_required_fields_left_empty_are_errors_and_nothing_is_sent():
    schema = {"type": "object", "properties": {"q": {"type": "string"}, "k": {"type": "integer"}}, "required": ["q"]}
    fields = form_fields(schema)
    args, errors = form_arguments(_form(q="", k=""), fields, schema)
    assert errors == {"q": "required"}
    assert "k" not in args


@pytest.mark.parametrize(
    ("field", "text", "problem"),
    [
        ("n", "0", "must be at least 1"),
        ("n", "11", "must be at most 10"),
        ("n", "2.5", "'2.5' is not a whole number"),
        ("n", "ten", "'ten' is not a whole number"),
        ("x", "0", "must be more than 0"),
        ("x", "1", "must be less than 1"),
        ("x", "abc", "'abc' is not a number"),
        ("x", "NaN", "'NaN' is not a number"),
        ("step", "12", "must be a multiple of 5"),
        ("code", "AB", "must be at least 3 characters long"),
        ("code", "ABCD", "must be at most 3 characters long (it is 4)"),
        ("code", "abc", "must match the pattern ^[A-Z]{3}$"),
        ("items", "[]", "must have at least 1 items"),
        ("items", "[1, 2, 3]", "must have at most 2 items (it has 3)"),
        ("items", '["a"]', "item 0: expected integer, got string ('a')"),
        ("items", "[1,", "not valid JSON (Expecting value: line 1 column 4 (char 3))"),
        ("items", '{"a": 1}', 'must be a JSON array, e.g. ["a", "b"]'),
        ("old_style", "0", "must be more than 0"),
    ],
)
def test_constraints_are_checked_per_field(field, text, problem):
    fields = form_fields(CONSTRAINED)
    args, errors = form_arguments(_form(name="n", **{field: text}), fields, CONSTRAINED)
    assert errors == {field: problem}


def test_values_within_the_constraints_pass():
    fields = form_fields(CONSTRAINED)
    form = _form(name="n", n="10", x="0.5", step="15", code="ABC", items="[1, 2]", old_style="0.1")
    args, errors = form_arguments(form, fields, CONSTRAINED)
    assert errors == {}
    assert args == {"name": "n", "n": 10, "x": 0.5, "step": 15, "code": "ABC", "items": [1, 2], "old_style": 0.1}


def test_constraints_are_shown_as_a_hint_and_number_bounds_as_attributes():
    f = _by_name(form_fields(CONSTRAINED))
    assert f["n"].hint == "≥ 1, ≤ 10" and (f["n"].min_attr, f["n"].max_attr) == ("1", "10")
    assert f["x"].hint == "> 0, < 1" and f["x"].min_attr == ""  # exclusive: the browser's min would be wrong
    assert f["code"].hint == "at least 3 characters, at most 3 characters, matching ^[A-Z]{3}$"
    assert f["items"].hint == "at least 1 items, at most 2 items"


def test_an_object_field_refuses_other_json_and_deep_json():
    schema = {"type": "object", "properties": {"o": {"type": "object"}}}
    fields = form_fields(schema)
    assert form_arguments(_form(o="[1]"), fields, schema)[1] == {"o": 'must be a JSON object, e.g. {"key": "value"}'}
    deep = "[" * 300 + "]" * 300
    assert "nested deeper than" in form_arguments(_form(o=deep), fields, schema)[1]["o"]


def test_mcp_input_schemas_nullable_unions_enums_and_untyped_fields():
    """What MCP servers (pydantic) send: anyOf with null, titles, non-string enums, fields of no single type."""
    schema = {
        "type": "object",
        "properties": {
            "a": {"title": "A", "type": "integer"},
            "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "title": "Maybe"},
            "level": {"enum": [1, 2, 3], "default": 2},
            "either": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
            "kinds": {"type": ["string", "null"]},
            "short": {"anyOf": [{"type": "string", "maxLength": 2}, {"type": "null"}], "default": None},
        },
        "required": ["a"],
    }
    f = _by_name(form_fields(schema))
    assert f["a"].widget == "number" and f["a"].required
    assert (f["maybe"].kind, f["maybe"].nullable, f["maybe"].has_default) == ("string", True, False)
    assert f["level"].widget == "select" and f["level"].value == "2" and f["level"].choices == (1, 2, 3)
    assert f["either"].widget == "json" and f["kinds"].kind == "string" and f["kinds"].nullable
    fields = form_fields(schema)
    args, errors = form_arguments(_form(a="4", level="3", either="plain words"), fields, schema)
    assert errors == {} and args == {"a": 4, "level": 3, "either": "plain words"}
    assert form_arguments(_form(a="4", either="7"), fields, schema)[0]["either"] == 7
    assert form_arguments(_form(a="4", level="9"), fields, schema)[1] == {"level": "must be one of 1, 2, 3"}
    assert f["short"].kind == "string" and f["short"].hint == "at most 2 characters"  # the branch's constraints
    assert form_arguments(_form(a="4", short="abc"), fields, schema)[1] == {
        "short": "must be at most 2 characters long (it is 3)"
    }


def test_a_bare_parameters_schema_and_no_schema():
    assert [f.name for f in form_fields({"type": "object", "properties": {"q": {"type": "string"}}})] == ["q"]
    assert form_fields(None) == [] and form_fields({"name": "x", "parameters": {}}) == []
    assert form_arguments(QueryDict(), [], {}) == ({}, {})


def test_errors_go_beside_their_fields_and_everything_is_escaped():
    schema = {
        "type": "object",
        "properties": {"<b>x</b>": {"type": "string", "description": "<script>alert(1)</script>", "default": "<i>"}},
        "required": [],
    }
    fields = with_errors(form_fields(schema), {"<b>x</b>": "bad <em>value</em>"})
    html = render_to_string("tools/_args_form.html", {"fields": fields, "form_key": "k"})
    assert "<script>" not in html and "<b>x</b>" not in html and "<i>" not in html and "<em>" not in html
    assert 'id="k-err-0"' in html and "bad &lt;em&gt;value&lt;/em&gt;" in html
    assert 'name="arg_&lt;b&gt;x&lt;/b&gt;" value="&lt;i&gt;"' in html
    oob = render_to_string("tools/_args_errors.html", {"fields": fields, "form_key": "k"})
    assert 'id="k-err-0"' in oob and 'hx-swap-oob="true"' in oob
    assert errors_text({"a": "required", "b": "must be at least 1"}) == "a: required; b: must be at least 1"


def test_a_pattern_is_matched_in_linear_time_and_one_re2_refuses_is_the_fields_error():
    schema = {
        "type": "object",
        "properties": {
            "word": {"type": "string", "pattern": "^(a+)+$"},
            "twice": {"type": "string", "pattern": r"(a)\1"},
        },
    }
    fields = form_fields(schema)
    # Python's re backtracks about 2**n steps on n a's and a "!"; RE2 answers at once
    args, errors = form_arguments(_form(word="a" * 50_000 + "!"), fields, schema)
    assert errors == {"word": "must match the pattern ^(a+)+$"}
    assert form_arguments(_form(word="aaaa"), fields, schema) == ({"word": "aaaa"}, {})
    _, errors = form_arguments(_form(twice="aa"), fields, schema)
    assert errors == {
        "twice": r"cannot be checked against the pattern (a)\1: backreferences (\1) are not supported "
        "(patterns are matched by RE2, in time linear in the text)"
    }
