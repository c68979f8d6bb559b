"""The typed arguments form of a tool, drawn from its JSON schema, and the arguments a filled-in form sends.

One form for every kind of tool — Python (the derived schema), MCP (the server's `inputSchema`) and built-in — in
the workbench and on the MCP servers page (`templates/tools/_args_form.html` draws it). What it promises: a field's
default is what the form shows and sends (a `bool = True` is ticked and sent as true, a number keeps its default);
an optional field left empty is not sent, so the tool's own default applies; the schema's constraints (required,
enum, minimum/maximum, exclusive bounds, multipleOf, minLength/maxLength, pattern, minItems/maxItems) are checked
before anything runs, each error for its own field; arrays and objects are JSON text, checked as JSON.

Pure: no Django, no I/O.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from core.regex import PatternError, pattern_search
from core.text import JSONTooDeep, json_input
from tools import json_schema as tool_schema

PREFIX = "arg_"  # a field's name in the submitted form is PREFIX + the argument's name
_NUMERIC = ("integer", "number")
_INTEGER_TEXT = re.compile(r"^[+-]?\d+$")
_CHECKS = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
)


@dataclass(frozen=True)
class ArgField:
    """One argument as the form draws it: `widget` is text, number, checkbox, choice (a yes/no/not-set select),
    select (an enum) or json (a textarea); `value`/`checked` are what it shows."""

    name: str
    index: int  # its position, for element ids (an argument's name need not be a valid id)
    kind: str  # string, integer, number, boolean, array, object, enum or any
    widget: str
    required: bool
    description: str = ""
    has_default: bool = False
    default: Any = None
    nullable: bool = False
    value: str = ""
    checked: bool = False
    options: tuple[tuple[str, str], ...] = ()  # (submitted text, label) of a select, "" for "not set"
    choices: tuple = ()  # the value each non-empty option stands for, in order
    constraints: dict = field(default_factory=dict)
    error: str = ""

    @property
    def input_name(self) -> str:
        return PREFIX + self.name

    @property
    def default_text(self) -> str:
        """The default as JSON (`true`, `3`, `"x"`), as the schema states it."""
        return json.dumps(self.default, ensure_ascii=False) if self.has_default else ""

    @property
    def hint(self) -> str:
        """The constraints in a few words, shown beside the field."""
        c, parts = self.constraints, []
        low = _bound(c, "minimum", "exclusiveMinimum")
        high = _bound(c, "maximum", "exclusiveMaximum")
        if low:
            parts.append(f"{'>' if low[1] else '≥'} {_num(low[0])}")
        if high:
            parts.append(f"{'<' if high[1] else '≤'} {_num(high[0])}")
        if "multipleOf" in c:
            parts.append(f"a multiple of {_num(c['multipleOf'])}")
        unit = "items" if self.kind == "array" else "characters"
        if "minLength" in c or "minItems" in c:
            parts.append(f"at least {c.get('minLength', c.get('minItems'))} {unit}")
        if "maxLength" in c or "maxItems" in c:
            parts.append(f"at most {c.get('maxLength', c.get('maxItems'))} {unit}")
        if "pattern" in c:
            parts.append(f"matching {c['pattern']}")
        return ", ".join(parts)

    @property
    def min_attr(self) -> str:
        return _num(self.constraints["minimum"]) if _is_number(self.constraints.get("minimum")) else ""

    @property
    def max_attr(self) -> str:
        return _num(self.constraints["maximum"]) if _is_number(self.constraints.get("maximum")) else ""


def form_fields(schema: dict | None, prefill: Mapping | None = None) -> list[ArgField]:
    """The fields for a tool's `{name, description, parameters}` schema (or bare `parameters`), filled in from
    `prefill` (a recorded call's or the last run's arguments) where it has a value, else from each default."""
    params = _parameters(schema)
    required = set(params.get("required") or [])
    prefill = prefill if isinstance(prefill, Mapping) else {}
    out = []
    for index, (name, prop) in enumerate((params.get("properties") or {}).items()):
        prop, optional_type = _effective(prop if isinstance(prop, dict) else {})
        kind, nullable = _kind(prop)
        nullable = nullable or optional_type
        has_default = "default" in prop and prop["default"] is not None
        given = name in prefill and prefill[name] is not None
        shown = prefill[name] if given else prop.get("default") if has_default else None
        is_required = name in required
        widget = _widget(kind, is_required, has_default)
        choices = _choices(prop, widget)
        out.append(
            ArgField(
                name=name,
                index=index,
                kind=kind,
                widget=widget,
                required=is_required,
                description=str(prop.get("description") or ""),
                has_default=has_default,
                default=prop.get("default"),
                nullable=nullable,
                value=_shown(widget, shown),
                checked=shown is True,
                options=_options(choices, widget, is_required),
                choices=tuple(choices),
                constraints={k: prop[k] for k in _CHECKS if k in prop},
            )
        )
    return out


def form_arguments(data: Mapping, fields: list[ArgField], schema: dict | None = None) -> tuple[dict, dict[str, str]]:
    """The arguments a submitted form sends, and what is wrong per argument (nothing is sent while any is).

    An empty optional field is left out; a checkbox sends true or false; every value is checked against its field's
    constraints and, given the schema, its types (nested items too) as a run would check them.
    """
    args: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for f in fields:
        try:
            present, value = _read(f, data.get(f.input_name, ""))
        except ValueError as exc:
            errors[f.name] = str(exc)
            continue
        if not present:
            if f.required:
                errors[f.name] = "required"
            continue
        problem = _constraint_problem(f, value)
        if problem:
            errors[f.name] = problem
        else:
            args[f.name] = value
    if schema is not None and not errors:
        try:
            tool_schema.validate_args({"parameters": _parameters(schema)}, args)
        except tool_schema.ArgumentError as exc:
            errors.update(exc.errors)
    return args, errors


def with_errors(fields: list[ArgField], errors: Mapping[str, str]) -> list[ArgField]:
    """The fields with each one's error (empty for the rest), to draw next to them."""
    return [replace(f, error=str(errors.get(f.name, ""))) for f in fields]


def errors_text(errors: Mapping[str, str]) -> str:
    """The errors in one line (`name: problem; …`), for a summary beside the button."""
    return "; ".join(f"{k}: {v}" for k, v in errors.items())


# --- reading the schema ------------------------------------------------------------------------------------------


def _parameters(schema: dict | None) -> dict:
    if not isinstance(schema, dict):
        return {}
    params = schema.get("parameters") if "parameters" in schema or "name" in schema else schema
    return params if isinstance(params, dict) else {}


def _effective(prop: dict) -> tuple[dict, bool]:
    """The property as one type, and whether null is allowed: `anyOf: [X, null]` (pydantic's Optional) is X with
    the outer description and default, its constraints included."""
    alternatives = prop.get("anyOf") or prop.get("oneOf")
    if "type" in prop or not isinstance(alternatives, list):
        return prop, False
    real = [a for a in alternatives if not (isinstance(a, dict) and a.get("type") == "null")]
    if len(real) == 1 and len(alternatives) == 2 and isinstance(real[0], dict):
        outer = {k: v for k, v in prop.items() if k not in ("anyOf", "oneOf")}
        return {**real[0], **outer}, True
    return prop, False


def _kind(prop: dict) -> tuple[str, bool]:
    """The field's kind and whether null is allowed (`"type": [X, "null"]` is X); several types are "any"."""
    if isinstance(prop.get("enum"), list) and prop["enum"]:
        return "enum", None in prop["enum"]
    declared = prop.get("type")
    types = declared if isinstance(declared, list) else [declared] if isinstance(declared, str) else []
    real = [t for t in types if t != "null"]
    if len(real) == 1 and real[0] in ("string", "integer", "number", "boolean", "array", "object"):
        return real[0], "null" in types
    return "any", "null" in types


def _widget(kind: str, required: bool, has_default: bool) -> str:
    if kind == "boolean":
        # A checkbox cannot say "not set": an optional flag without a default gets a three-way choice.
        return "checkbox" if required or has_default else "choice"
    return {"string": "text", "integer": "number", "number": "number", "enum": "select"}.get(kind, "json")


def _shown(widget: str, value: Any) -> str:
    """The text a field shows (a select's: the text its option submits)."""
    if value is None:
        return ""
    if widget == "json" or not isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return value


def _choices(prop: dict, widget: str) -> list:
    if widget == "choice":
        return [True, False]
    if widget == "select":
        return [v for v in prop["enum"] if v is not None]
    return []


def _options(choices: list, widget: str, required: bool) -> tuple[tuple[str, str], ...]:
    if widget not in ("select", "choice"):
        return ()
    options = [(_shown(widget, v),) * 2 for v in choices]
    return tuple(([] if required else [("", "— not set —")]) + options)


# --- reading the form --------------------------------------------------------------------------------------------


def _read(f: ArgField, raw: Any) -> tuple[bool, Any]:
    """(whether the field sends anything, its value); ValueError says what is wrong with the text."""
    if f.widget == "checkbox":
        return True, raw == "on"
    raw = raw if isinstance(raw, str) else ""
    if f.widget == "text":
        return raw != "", raw
    if raw.strip() == "":
        return False, None
    text = raw.strip()
    if f.widget in ("choice", "select"):
        for (submitted, _label), value in zip((o for o in f.options if o[0]), f.choices, strict=True):
            if submitted == raw:
                return True, value
        raise ValueError("must be one of " + ", ".join(label for v, label in f.options if v))
    if f.widget == "number":
        return True, _number(text, integer=f.kind == "integer")
    return True, _json(text, f)


def _number(text: str, *, integer: bool) -> int | float:
    if integer:
        if not _INTEGER_TEXT.match(text):
            raise ValueError(f"{text!r} is not a whole number")
        return int(text)
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{text!r} is not a number")
    return value


def _json(text: str, f: ArgField) -> Any:
    try:
        value = json_input(text)
    except JSONTooDeep as exc:
        raise ValueError(str(exc)) from None
    except ValueError as exc:
        if f.kind == "any":
            return text  # a field of no single type takes plain text as a string
        raise ValueError(f"not valid JSON ({exc})") from None
    if f.kind == "array" and not isinstance(value, list) and not (value is None and f.nullable):
        raise ValueError('must be a JSON array, e.g. ["a", "b"]')
    if f.kind == "object" and not isinstance(value, dict) and not (value is None and f.nullable):
        raise ValueError('must be a JSON object, e.g. {"key": "value"}')
    return value


# --- constraints -------------------------------------------------------------------------------------------------


def _constraint_problem(f: ArgField, value: Any) -> str:
    c = f.constraints
    if _is_number(value):
        low = _bound(c, "minimum", "exclusiveMinimum")
        high = _bound(c, "maximum", "exclusiveMaximum")
        if low and (value <= low[0] if low[1] else value < low[0]):
            return f"must be {'more than' if low[1] else 'at least'} {_num(low[0])}"
        if high and (value >= high[0] if high[1] else value > high[0]):
            return f"must be {'less than' if high[1] else 'at most'} {_num(high[0])}"
        step = c.get("multipleOf")
        if _is_number(step) and step > 0 and not _multiple(value, step):
            return f"must be a multiple of {_num(step)}"
    if isinstance(value, str):
        if _is_number(c.get("minLength")) and len(value) < c["minLength"]:
            return f"must be at least {c['minLength']} characters long"
        if _is_number(c.get("maxLength")) and len(value) > c["maxLength"]:
            return f"must be at most {c['maxLength']} characters long (it is {len(value)})"
        if isinstance(c.get("pattern"), str):
            try:
                if not pattern_search(c["pattern"], value):
                    return f"must match the pattern {c['pattern']}"
            except PatternError as exc:  # the schema's author (or an MCP server) wrote it; a person reads this
                return f"cannot be checked against the pattern {c['pattern']}: {exc}"
    if isinstance(value, list):
        if _is_number(c.get("minItems")) and len(value) < c["minItems"]:
            return f"must have at least {c['minItems']} items"
        if _is_number(c.get("maxItems")) and len(value) > c["maxItems"]:
            return f"must have at most {c['maxItems']} items (it has {len(value)})"
    return ""


def _bound(c: dict, inclusive: str, exclusive: str) -> tuple[float, bool] | None:
    """(limit, is exclusive): draft 6+ gives `exclusiveMinimum` a number, draft 4 a flag on `minimum`."""
    if _is_number(c.get(exclusive)):
        return c[exclusive], True
    if _is_number(c.get(inclusive)):
        return c[inclusive], c.get(exclusive) is True
    return None


def _multiple(value: float, step: float) -> bool:
    quotient = value / step
    return math.isclose(quotient, round(quotient), rel_tol=0, abs_tol=1e-9)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _num(value: float) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
