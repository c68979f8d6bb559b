"""Schema derivation from tool source, tool-name rules, and argument validation."""

import textwrap

import pytest

from tools.json_schema import ArgumentError, SchemaError, derive_schema, validate_args, validate_tool_name


def schema_of(src: str, name: str | None = None) -> dict:
    return derive_schema(textwrap.dedent(src), name)


def props(src: str) -> dict:
    return schema_of(src)["parameters"]["properties"]


def test_basic_types_description_and_required():
    s = schema_of('''
        def book(city: str, nights: int, budget: float, pets: bool = False) -> str:
            """Book a hotel.

            Picks the cheapest option.

            Args:
                city (str): Where to stay.
                nights: How many nights.
                budget: Max spend per night.
                pets: Whether pets come along.
            """
    ''')
    assert s["name"] == "book"
    assert s["description"] == "Book a hotel.\n\nPicks the cheapest option."
    p = s["parameters"]
    assert p["type"] == "object"
    assert p["properties"]["city"] == {"type": "string", "description": "Where to stay."}
    assert p["properties"]["nights"]["type"] == "integer"
    assert p["properties"]["budget"]["type"] == "number"
    assert p["properties"]["pets"]["type"] == "boolean"
    assert p["required"] == ["city", "nights", "budget"]


@pytest.mark.parametrize(
    "annotation, expected",
    [
        ("list[int]", {"type": "array", "items": {"type": "integer"}}),
        ("List[str]", {"type": "array", "items": {"type": "string"}}),
        ("typing.List[float]", {"type": "array", "items": {"type": "number"}}),
        ("list", {"type": "array"}),
        ("dict", {"type": "object"}),
        ("Dict[str, int]", {"type": "object", "additionalProperties": {"type": "integer"}}),
        (
            "list[dict[str, str]]",
            {"type": "array", "items": {"type": "object", "additionalProperties": {"type": "string"}}},
        ),
        ('Literal["a", "b"]', {"type": "string", "enum": ["a", "b"]}),
        ("Literal[1, 2, 3]", {"type": "integer", "enum": [1, 2, 3]}),
        ('"int"', {"type": "integer"}),
        ("int | str", {"anyOf": [{"type": "integer"}, {"type": "string"}]}),
    ],
)
def test_type_mapping(annotation, expected):
    p = props(f'''
        def f(x: {annotation}):
            """Do it.

            Args:
                x: The x.
            """
    ''')
    assert {k: v for k, v in p["x"].items() if k != "description"} == expected


@pytest.mark.parametrize(
    "annotation", ["Optional[int]", "int | None", "None | int", "Union[int, None]", "typing.Optional[int]"]
)
def test_optional_is_not_required_and_keeps_inner_type(annotation):
    s = schema_of(f'''
        def f(x: {annotation}, y: int):
            """Do it.

            Args:
                x: The x.
                y: The y.
            """
    ''')
    assert s["parameters"]["properties"]["x"]["type"] == "integer"
    assert s["parameters"]["required"] == ["y"]


def test_keyword_only_defaults_and_agent_state_skipped():
    s = schema_of('''
        def f(agent_state, a: str, *, b: int, c: int = 3):
            """Do it.

            Args:
                a: A.
                b: B.
                c: C.
            """
    ''')
    assert list(s["parameters"]["properties"]) == ["a", "b", "c"]
    assert s["parameters"]["required"] == ["a", "b"]


def test_missing_annotation_names_parameter_and_line():
    with pytest.raises(SchemaError) as err:
        schema_of('''
            def f(a: int,
                  b):
                """Do it.

                Args:
                    a: A.
                    b: B.
                """
        ''')
    assert "'b'" in str(err.value) and "line 3" in str(err.value) and "annotation" in str(err.value)


def test_missing_args_entry_names_parameter_and_line():
    with pytest.raises(SchemaError) as err:
        schema_of('''
            def f(a: int, b: str):
                """Do it.

                Args:
                    a: A.
                """
        ''')
    assert "'b'" in str(err.value) and "line 2" in str(err.value) and "Args" in str(err.value)


def test_syntax_error_reports_line():
    with pytest.raises(SchemaError, match="syntax error at line 3"):
        derive_schema("def f():\n    pass\ndef g(:\n")


def test_no_function_and_unknown_name():
    with pytest.raises(SchemaError, match="no top-level function"):
        derive_schema("x = 1\n")
    with pytest.raises(SchemaError, match="named 'nope'"):
        derive_schema('def f():\n    """Doc."""\n', "nope")


def test_multiple_functions_default_to_last_or_named():
    src = 'def helper():\n    """Help."""\n\ndef main_tool():\n    """Main."""\n'
    assert derive_schema(src)["name"] == "main_tool"
    assert derive_schema(src, "helper")["description"] == "Help."


def test_missing_docstring_and_unsupported_types_and_variadics():
    with pytest.raises(SchemaError, match="no docstring"):
        derive_schema("def f():\n    return 1\n")
    with pytest.raises(SchemaError, match="unsupported type annotation 'Widget'"):
        props('''
            def f(w: Widget):
                """Do.

                Args:
                    w: W.
                """
        ''')
    with pytest.raises(SchemaError, match=r"\*args"):
        derive_schema('def f(*rest: int):\n    """Do.\n\n    Args:\n        rest: R.\n    """\n')


def test_tool_name_rules():
    assert validate_tool_name("a" * 64) == "a" * 64
    for bad in ["a" * 65, "has space", "1abc", "class", ""]:
        with pytest.raises(SchemaError):
            validate_tool_name(bad)
    with pytest.raises(SchemaError, match="65 characters"):
        derive_schema(f'def {"x" * 65}():\n    """Doc."""\n')


SCHEMA = derive_schema(
    textwrap.dedent('''
    def f(n: int, tags: list[str], mode: Literal["a", "b"] = "a", ratio: float = 1.0, note: Optional[str] = None):
        """Do.

        Args:
            n: N.
            tags: Tags.
            mode: Mode.
            ratio: Ratio.
            note: Note.
        """
''')
)


def test_validate_args_accepts_good_args():
    args = {"n": 1, "tags": ["x"], "mode": "b", "ratio": 2, "note": None}
    assert validate_args(SCHEMA, args) == args


def test_validate_args_reports_each_bad_argument():
    with pytest.raises(ArgumentError) as err:
        validate_args(SCHEMA, {"n": "5", "tags": ["x", 3], "mode": "c", "extra": 1})
    errors = err.value.errors
    assert "expected integer, got string" in errors["n"]
    assert "item 1" in errors["tags"] and "expected string" in errors["tags"]
    assert "not one of" in errors["mode"]
    assert "unknown argument" in errors["extra"]
    with pytest.raises(ArgumentError) as err:
        validate_args(SCHEMA, {"tags": []})
    assert err.value.errors == {"n": "required argument is missing"}


def test_validate_args_rejects_bool_as_integer_and_non_dict():
    with pytest.raises(ArgumentError, match="n: expected integer, got boolean"):
        validate_args(SCHEMA, {"n": True, "tags": []})
    with pytest.raises(ArgumentError, match="expected an object"):
        validate_args(SCHEMA, ["n"])
