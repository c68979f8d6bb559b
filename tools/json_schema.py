"""Tool JSON schemas: derived from a Python function's source, and used to check call arguments.

Pure Python (no Django): the source is parsed with `ast`, never imported or executed, so deriving a
schema for untrusted code is safe. Docstrings are read Google-style with `docstring_parser`.

Which function is the tool: the top-level function called `name` when a name is given, otherwise the
last top-level function in the source (helpers conventionally come first, the tool last).
"""

from __future__ import annotations

import ast
import json
import keyword
from typing import Any

import docstring_parser

MAX_TOOL_NAME_LENGTH = 64  # the providers' limit on a function name (OpenAI, Anthropic)
# Parameters the runtime fills in itself; the model never sees them.
RESERVED_PARAMETERS = frozenset({"agent_state"})

_SCALARS = {
    "int": {"type": "integer"},
    "str": {"type": "string"},
    "bool": {"type": "boolean"},
    "float": {"type": "number"},
    "bytes": {"type": "string"},
    "Any": {},
    "object": {},
}
_ARRAYS = {"list", "List", "Sequence", "Iterable", "tuple", "Tuple", "set", "Set", "frozenset", "FrozenSet"}
_OBJECTS = {"dict", "Dict", "Mapping", "MutableMapping"}


class SchemaError(ValueError):
    """The source cannot be turned into a tool schema; the message names the parameter and line."""


class ArgumentError(ValueError):
    """Call arguments do not match a tool schema; `errors` maps each argument to what is wrong."""

    def __init__(self, errors: dict[str, str]):
        self.errors = errors
        super().__init__("invalid arguments: " + "; ".join(f"{k}: {v}" for k, v in errors.items()))


def validate_tool_name(name: str) -> str:
    """Return `name` if it is a usable tool name (identifier, ≤ 64 characters), else raise SchemaError."""
    if not isinstance(name, str) or not name:
        raise SchemaError("tool name must be a non-empty string")
    if len(name) > MAX_TOOL_NAME_LENGTH:
        raise SchemaError(f"tool name {name!r} is {len(name)} characters long; the limit is {MAX_TOOL_NAME_LENGTH}")
    if not name.isidentifier() or keyword.iskeyword(name):
        raise SchemaError(f"tool name {name!r} is not a valid Python identifier")
    return name


def derive_schema(source_code: str, name: str | None = None) -> dict:
    """Return the `{name, description, parameters}` schema of the tool function in `source_code`."""
    func = _find_function(_parse(source_code), name)
    validate_tool_name(func.name)
    doc = ast.get_docstring(func)
    if not doc:
        raise SchemaError(f"function {func.name!r} (line {func.lineno}) has no docstring; a tool needs a description")
    parsed = docstring_parser.parse(doc, style=docstring_parser.DocstringStyle.GOOGLE)
    description = "\n\n".join(p for p in (parsed.short_description, parsed.long_description) if p)
    arg_docs = {p.arg_name: (p.description or "").strip() for p in parsed.params}

    properties: dict[str, dict] = {}
    required: list[str] = []
    for arg, default in _parameters(func):
        has_default = default is not None
        if arg.arg in RESERVED_PARAMETERS:
            continue
        if arg.annotation is None:
            raise SchemaError(f"parameter {arg.arg!r} (line {arg.lineno}) has no type annotation")
        if not arg_docs.get(arg.arg):
            raise SchemaError(
                f"parameter {arg.arg!r} (line {arg.lineno}) has no description in the docstring's Args: section"
            )
        prop, optional = _annotation_schema(arg.annotation, arg.arg)
        properties[arg.arg] = {**prop, "description": arg_docs[arg.arg], **_default_entry(default)}
        if not (optional or has_default):
            required.append(arg.arg)
    return {
        "name": func.name,
        "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required},
    }


def schema_from_args(source_code: str, args_schema: dict, name: str | None = None) -> dict:
    """The `{name, description, parameters}` schema of the source's function whose arguments are described by
    `args_schema` (a pydantic model's JSON schema, as Letta's `args_json_schema`): the source is only asked for
    the function's name and docstring, so its annotations need not be ones we can derive a schema from."""
    func = _find_function(_parse(source_code), name)
    validate_tool_name(func.name)
    if not isinstance(args_schema, dict) or args_schema.get("type", "object") != "object":
        raise SchemaError("args_json_schema must be a JSON schema of type object")
    properties = args_schema.get("properties") or {}
    if not isinstance(properties, dict) or not all(isinstance(v, dict) for v in properties.values()):
        raise SchemaError("args_json_schema.properties must map each argument name to a schema")
    parsed = docstring_parser.parse(ast.get_docstring(func) or "", style=docstring_parser.DocstringStyle.GOOGLE)
    arg_docs = {p.arg_name: (p.description or "").strip() for p in parsed.params}
    props = {}
    for arg, prop in properties.items():
        prop = {k: v for k, v in prop.items() if k != "title"}
        if not prop.get("description") and arg_docs.get(arg):
            prop["description"] = arg_docs[arg]
        props[arg] = prop
    required = [r for r in args_schema.get("required") or [] if r in props]
    parameters = {"type": "object", "properties": props, "required": required}
    if isinstance(args_schema.get("$defs"), dict):
        parameters["$defs"] = args_schema["$defs"]
    description = "\n\n".join(p for p in (parsed.short_description, parsed.long_description) if p)
    return {
        "name": func.name,
        "description": description or args_schema.get("description", ""),
        "parameters": parameters,
    }


def _parse(source_code: str) -> ast.Module:
    try:
        return ast.parse(source_code)
    except SyntaxError as exc:
        raise SchemaError(f"syntax error at line {exc.lineno}: {exc.msg}") from exc


def _find_function(module: ast.Module, name: str | None) -> ast.FunctionDef | ast.AsyncFunctionDef:
    funcs = [n for n in module.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not funcs:
        raise SchemaError("source code defines no top-level function")
    if name is None:
        return funcs[-1]
    for func in funcs:
        if func.name == name:
            return func
    raise SchemaError(f"source code defines no top-level function named {name!r}")


def _parameters(func: ast.FunctionDef | ast.AsyncFunctionDef):
    """Yield (arg node, default expression or None) for every named parameter; variadic ones are rejected."""
    a = func.args
    for var in (a.vararg, a.kwarg):
        if var is not None:
            raise SchemaError(f"parameter {var.arg!r} (line {var.lineno}): *args/**kwargs are not supported in tools")
    positional = a.posonlyargs + a.args
    first_default = len(positional) - len(a.defaults)
    for i, arg in enumerate(positional):
        yield arg, a.defaults[i - first_default] if i >= first_default else None
    yield from zip(a.kwonlyargs, a.kw_defaults, strict=False)


def _default_entry(node: ast.expr | None) -> dict:
    """`{"default": value}` for a literal JSON-representable default (shown to the model and the workbench)."""
    if node is None:
        return {}
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return {}
    if (
        value is None
        or isinstance(value, (bool, int, float, str))
        and not (isinstance(value, float) and value != value)
    ):
        return {"default": value} if value is not None else {}
    if isinstance(value, (list, dict)):
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            return {}
        return {"default": value}
    return {}


def _annotation_schema(node: ast.expr, param: str) -> tuple[dict, bool]:
    """Map an annotation AST node to (JSON schema, is_optional)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # "int" / from __future__ style
        line = node.lineno
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError as exc:
            raise SchemaError(f"parameter {param!r} (line {line}): unreadable annotation {node.value!r}") from exc
        for child in ast.walk(node):  # report the line in the tool source, not inside the string
            if hasattr(child, "lineno"):
                child.lineno = line
    members = _union_members(node)
    if members is not None:
        non_null = [m for m in members if not _is_none(m)]
        optional = len(non_null) < len(members)
        if not non_null:
            raise _unsupported(node, param)
        if len(non_null) == 1:
            return _type_schema(non_null[0], param), optional
        return {"anyOf": [_type_schema(m, param) for m in non_null]}, optional
    return _type_schema(node, param), False


def _union_members(node: ast.expr) -> list[ast.expr] | None:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return (_union_members(node.left) or [node.left]) + (_union_members(node.right) or [node.right])
    if isinstance(node, ast.Subscript):
        base = _dotted_tail(node.value)
        if base == "Optional":
            return [node.slice, ast.Constant(value=None)]
        if base == "Union":
            return list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
    return None


def _type_schema(node: ast.expr, param: str) -> dict:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _annotation_schema(node, param)[0]
    if _union_members(node) is not None:
        return _annotation_schema(node, param)[0]
    base = _dotted_tail(node.value if isinstance(node, ast.Subscript) else node)
    args = _subscript_args(node) if isinstance(node, ast.Subscript) else []
    if base in _SCALARS and not args:
        return dict(_SCALARS[base])
    if base in _ARRAYS:
        schema: dict[str, Any] = {"type": "array"}
        items = [a for a in args if not (isinstance(a, ast.Constant) and a.value is Ellipsis)]
        if len(items) == 1 or (items and base in {"tuple", "Tuple"} and _all_same(items)):
            schema["items"] = _type_schema(items[0], param)
        return schema
    if base in _OBJECTS:
        schema = {"type": "object"}
        if len(args) == 2:
            value_schema = _type_schema(args[1], param)
            if value_schema:
                schema["additionalProperties"] = value_schema
        return schema
    if base == "Literal" and args:
        return _literal_schema(node, args, param)
    if base == "Annotated" and args:
        return _type_schema(args[0], param)
    raise _unsupported(node, param)


def _literal_schema(node: ast.expr, args: list[ast.expr], param: str) -> dict:
    if not all(isinstance(a, ast.Constant) for a in args):
        raise _unsupported(node, param)
    values = [a.value for a in args]
    kinds = {type(v) for v in values}
    names = {bool: "boolean", int: "integer", float: "number", str: "string"}
    if not kinds <= set(names):
        raise _unsupported(node, param)
    if len(kinds) == 1:
        return {"type": names[kinds.pop()], "enum": values}
    return {"enum": values}


def _subscript_args(node: ast.Subscript) -> list[ast.expr]:
    return list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]


def _dotted_tail(node: ast.expr) -> str | None:
    """`typing.List` → "List", `list` → "list"; other expressions → None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _is_none(node: ast.expr) -> bool:
    return (isinstance(node, ast.Constant) and node.value is None) or (isinstance(node, ast.Name) and node.id == "None")


def _all_same(nodes: list[ast.expr]) -> bool:
    return len({ast.dump(n) for n in nodes}) == 1


def _unsupported(node: ast.expr, param: str) -> SchemaError:
    return SchemaError(
        f"parameter {param!r} (line {node.lineno}): unsupported type annotation {ast.unparse(node)!r} "
        "(use int, str, bool, float, list[T], dict, Literal[...] or Optional[T])"
    )


# --- argument validation (the workbench checks arguments before spending a sandbox run) ---------

_JSON_TYPES = {
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
    "null": lambda v: v is None,
}


def validate_args(schema: dict, args: Any) -> dict:
    """Return `args` if they fit `schema` (a derived tool schema), else raise ArgumentError per argument."""
    if not isinstance(args, dict):
        raise ArgumentError({"args": f"expected an object of named arguments, got {_json_type(args)}"})
    params = schema.get("parameters") or {}
    properties: dict = params.get("properties") or {}
    required = set(params.get("required") or [])
    errors: dict[str, str] = {}
    for key in required:
        if key not in args:
            errors[key] = "required argument is missing"
    for key, value in args.items():
        if key not in properties:
            known = ", ".join(sorted(properties)) or "none"
            errors[key] = f"unknown argument (expected: {known})"
        elif value is None and key not in required:
            continue
        else:
            problem = _value_problem(properties[key], value)
            if problem:
                errors[key] = problem
    if errors:
        raise ArgumentError(errors)
    return args


def _value_problem(prop: dict, value: Any, where: str = "") -> str | None:
    if "enum" in prop and value not in prop["enum"]:
        return f"{where}{value!r} is not one of {prop['enum']!r}"
    if "anyOf" in prop:
        if all(_value_problem(p, value) for p in prop["anyOf"]):
            return f"{where}{_json_type(value)} matches none of the allowed types"
        return None
    expected = prop.get("type")
    types = expected if isinstance(expected, list) else [expected] if expected else []
    if types and not any(_JSON_TYPES.get(t, lambda v: True)(value) for t in types):
        return f"{where}expected {' or '.join(types)}, got {_json_type(value)} ({_short_repr(value)})"
    if isinstance(value, list) and isinstance(prop.get("items"), dict):
        for i, item in enumerate(value):
            problem = _value_problem(prop["items"], item, f"{where}item {i}: ")
            if problem:
                return problem
    if isinstance(value, dict) and isinstance(prop.get("additionalProperties"), dict):
        for k, item in value.items():
            problem = _value_problem(prop["additionalProperties"], item, f"{where}key {k!r}: ")
            if problem:
                return problem
    return None


def _json_type(value: Any) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _JSON_TYPES[name](value):
            return name
    return type(value).__name__


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
