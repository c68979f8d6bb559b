"""Python's `re` sees only the project's own fixed patterns; a pattern anyone else wrote (a user, a model, an agent
file, a tool's schema) goes through core/regex.py, where RE2 matches it in time linear in the text.

`re` backtracks: `(a+)+$` over 28 a's and a "!" held the GIL for 20 s, and every other request of the process waited.
Read with `ast` (nothing is imported): a call of `re`'s matching functions must name its pattern as text written in
the source (a literal, an f-string of constants, a module constant), or be listed below with the reason it is safe.
"""

import ast

import pytest

from core.regex import PatternError, pattern_compile
from tests.infra.test_import_layers import MODULES

_MATCHERS = frozenset({"compile", "search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split"})

# (module, function): why a pattern not written in the source is safe there.
ALLOWED = {
    ("core.llm.openai_wire", "_compiles"): "compiles a tool schema's pattern, never matches it: whether OpenAI's "
    "validator (Python's re) would refuse the schema",
    ("tools.web_workbench", "missing_without_agent"): "the names come from the module's constant _AGENT_ONLY_ENV",
}


def _fixed(node: ast.AST) -> bool:
    """Text written in the source: a literal, constants joined (+, f-string) or a module constant's name."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (str, bytes))
    if isinstance(node, ast.JoinedStr):
        return all(_fixed(v.value if isinstance(v, ast.FormattedValue) else v) for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _fixed(node.left) and _fixed(node.right)
    return isinstance(node, ast.Name) and node.id.lstrip("_").isupper()


def _pattern_arg(call: ast.Call) -> ast.AST | None:
    if call.args:
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg == "pattern"), None)


def _unfixed_calls(module: str, tree: ast.AST) -> list[str]:
    found = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if (
                isinstance(child, ast.Call)
                and isinstance(child.func, ast.Attribute)
                and isinstance(child.func.value, ast.Name)
                and child.func.value.id == "re"
                and child.func.attr in _MATCHERS
            ):
                arg = _pattern_arg(child)
                if arg is not None and not _fixed(arg) and (module, function) not in ALLOWED:
                    found.append(f"{module}.{function}, line {child.lineno}: re.{child.func.attr}({ast.unparse(arg)})")
            visit(child, inner)

    visit(tree, "")
    return found


def test_pythons_re_sees_only_patterns_written_in_the_source():
    found = [line for module, path in MODULES.items() for line in _unfixed_calls(module, ast.parse(path.read_text()))]
    assert found == [], "use core.regex.pattern_compile for a pattern from outside:\n" + "\n".join(found)


def test_the_check_catches_a_pattern_from_outside():
    tree = ast.parse("import re\ndef grep(pattern, text):\n    return re.search(pattern, text)\n")
    assert _unfixed_calls("memory.example", tree) == ["memory.example.grep, line 3: re.search(pattern)"]
    fixed = ast.parse('import re\nX = 1\ndef f(t):\n    return re.search(rf"^a-{_ID}$" + "b", t)\n')
    assert _unfixed_calls("memory.example", fixed) == []


def test_a_catastrophic_pattern_is_linear():
    # Python's re takes about 2**n steps here: with these 100,000 a's it would never answer
    text = "a" * 100_000 + "!"
    assert pattern_compile("(a+)+$").search(text) is None
    assert pattern_compile("(a+)+!$").search(text).span() == (0, 100_001)
    assert pattern_compile("(a|aa)+$", utf8=True).search(text.encode()) is None


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        (r"(a)\1", r"backreferences (\1) are not supported"),
        ("(?P<x>a)(?P=x)", "named backreferences (?P=…) are not supported"),
        ("foo(?=bar)", "lookahead (?=…) is not supported"),
        ("(?<!x)y", "negative lookbehind (?<!…) is not supported"),
        ("(?>a+)", "atomic groups (?>…) are not supported"),
        ("a++", "possessive quantifiers (++) are not supported"),
        ("a{2000}", "a repetition counts at most 1000"),
        (r"\p{L}{1000}", "needs more than the 8 MiB of matching memory allowed"),
        ("a" * 1001, "the pattern is 1001 characters; at most 1000 are accepted"),
        ("(", "missing ): ("),
    ],
)
def test_a_pattern_re2_refuses_says_why(pattern, why):
    with pytest.raises(PatternError) as caught:
        pattern_compile(pattern)
    assert why in str(caught.value)


def test_pythons_end_anchor_keeps_its_meaning():
    assert pattern_compile(r"b\Z").search("ab") is not None
    assert pattern_compile(r"b\Z").search("ab\n") is None  # \Z is the very end in Python, as \z is in RE2
    assert pattern_compile(r"\\Z").search("a\\Z") is not None  # an escaped backslash and a Z are left alone
