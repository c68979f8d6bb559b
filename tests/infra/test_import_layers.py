"""The project's import graph: no cycles, imports only point down the layers, lazy imports say why.

Read with `ast` (nothing is imported), counting imports inside functions too: a function-local import still
makes its module depend on the one it imports, it only hides the dependency from the reader.
"""

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("agents_ide", "core", "memory", "tools")

# Bottom to top. A module belongs to the layer of the longest prefix naming it and may import only modules of its
# own layer or those below. A leaf is a pure helper every layer may use, the engine included: it imports nothing of
# the project. The project package (`agents_ide`: settings, URLs, the ASGI app and its middleware, the database
# backend) sits on top with the entry points: nothing below imports it.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("leaf", ("core.regex",)),
    ("engine", ("core.engine",)),
    # Plumbing that reads no table: ids, text, JSON, model fields, secrets, the egress guard, the transaction
    # guard, the channel layer and its sends (which carry what their callers computed), the SSE response.
    (
        "platform",
        (
            "core.channel_layer",
            "core.crypto",
            "core.egress",
            "core.egress_rules",
            "core.errors",
            "core.events",
            "core.fields",
            "core.ids",
            "core.jsontext",
            "core.sse",
            "core.text",
            "core.throttle",
            "core.transactions",
            "core.updates",
            "memory.fields",
        ),
    ),
    # The tables, rows as engine types, and the owner-filtered reads, paging and per-process stamped reads every app
    # shares.
    (
        "models",
        (
            "core.mapping",
            "core.models",
            "core.pagination",
            "core.selectors",
            "core.stamped",
            "memory.models",
            "tools.models",
        ),
    ),
    # Talking to model providers, and measuring it all (the metrics read gauges from the tables).
    ("providers", ("core.llm", "core.providers", "core.telemetry")),
    ("domain", ("core.accounts", "memory", "tools")),
    ("agents", ("core.agents",)),
    ("runs", ("core.runs",)),
    # Judging agents on datasets: experiments and an agent's tests run cases through the run executor.
    ("evals", ("core.evals",)),
    (
        "entry",
        (
            "agents_ide",
            "core",
            "core.api",
            "core.apps",
            "core.management",
            "core.telemetry.middleware",
            "core.telemetry.views",
            "core.urls",
            "core.web",
            "memory.api",
            "memory.apps",
            "memory.archives_api",
            "memory.urls",
            "memory.views",
            "tools.api",
            "tools.apps",
            "tools.mcp_api",
            "tools.mcp_views",
            "tools.urls",
            "tools.views",
            "tools.web_workbench",
        ),
    ),
]


@dataclass(frozen=True)
class Import:
    source: str  # the importing module
    target: str  # the project module imported (its package for names that are not modules)
    line: int
    local: bool  # inside a function
    implicit: bool = False  # a submodule's import of its package, which Python runs first


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _owner(name: str) -> str | None:
    """The project module a dotted name lives in (itself, or the nearest module above a name inside one)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        parts = module.split(".") if is_package else module.split(".")[:-1]
        parts = parts[: len(parts) - node.level + 1]
        base = ".".join(parts + ([node.module] if node.module else []))
    # `from pkg import sub` imports the submodule; `from mod import name` imports mod
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]


def _imports(module: str, path: Path) -> tuple[list[Import], list[str]]:
    """The module's imports of project modules, and every top-level name it imports (third-party included)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    found: list[Import] = []
    everything: list[str] = []

    def visit(node: ast.AST, local: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                for name in _targets(child, module, is_package):
                    everything.append(name)
                    owner = _owner(name) if name.split(".")[0] in PACKAGES else None
                    if owner and owner != module:
                        found.append(Import(module, owner, child.lineno, inner))
            visit(child, inner)

    visit(tree, False)
    # importing a submodule runs its package first
    parent = module.rpartition(".")[0]
    if parent in MODULES:
        found.append(Import(module, parent, 0, False, implicit=True))
    return found, everything


IMPORTS: dict[str, list[Import]] = {}
ALL_NAMES: dict[str, list[str]] = {}
for _name, _path in MODULES.items():
    IMPORTS[_name], ALL_NAMES[_name] = _imports(_name, _path)


def layer_of(module: str) -> int:
    best, rank = -1, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), i
    return rank


def cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    graph = {m: sorted({i.target for i in IMPORTS[m]}) for m in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if i < len(graph[node]):
                work.append((node, i + 1))
                nxt = graph[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_every_module_has_a_layer():
    assert [m for m in MODULES if layer_of(m) < 0] == []


def test_no_import_cycles():
    found = cycles()
    assert not found, "import cycles (top-level and function-local imports counted):\n" + "\n".join(
        " <-> ".join(c) for c in found
    )


def test_packages_import_nothing_of_the_project():
    """Importing a submodule runs its package's __init__ first: one that imported its submodules would make every
    submodule part of a cycle, so packages hold a docstring and nothing the project defines."""
    packages = [m for m, path in MODULES.items() if path.name == "__init__.py"]
    assert [f"{m} imports {i.target}" for m in packages for i in IMPORTS[m] if not i.implicit] == []


def test_imports_point_down_the_layers():
    upward = [
        f"{i.source} ({LAYERS[layer_of(i.source)][0]}) imports {i.target} ({LAYERS[layer_of(i.target)][0]}), "
        f"line {i.line}"
        for imports in IMPORTS.values()
        for i in imports
        if not i.implicit and layer_of(i.target) > layer_of(i.source)
    ]
    assert upward == []


def test_the_engine_imports_no_django_and_nothing_outside_itself():
    bad = [
        f"{m} imports {name}"
        for m, names in ALL_NAMES.items()
        if m == "core.engine" or m.startswith("core.engine.")
        for name in names
        if name.split(".")[0] == "django"
        or (
            name.split(".")[0] in PACKAGES
            and not (name == "core.engine" or name.startswith("core.engine."))
            and layer_of(name) != 0
        )
    ]
    assert bad == []


def test_leaves_import_nothing_of_the_project_nor_django():
    leaves = [m for m in MODULES if layer_of(m) == 0]
    assert leaves
    assert [f"{m} imports {n}" for m in leaves for n in ALL_NAMES[m] if n.split(".")[0] in (*PACKAGES, "django")] == []


def _says_why(lines: list[str], line: int) -> bool:
    """A comment on the import's line, or on the line above the run of import lines it belongs to."""
    i = line - 1
    while True:
        if "#" in lines[i]:
            return True
        above = lines[i - 1].strip() if i > 0 else ""
        if not above.startswith(("from ", "import ")):
            return above.startswith("#") or (" # " in above or "  #" in above)
        i -= 1


def test_function_local_imports_of_project_modules_say_why():
    silent = [
        f"{module}:{i.line} imports {i.target}"
        for module, imports in IMPORTS.items()
        for i in imports
        if i.local and not _says_why(MODULES[module].read_text().splitlines(), i.line)
    ]
    assert sorted(set(silent)) == []


def test_the_walk_sees_function_local_imports(tmp_path):
    path = tmp_path / "probe.py"
    path.write_text("import core.models\n\n\ndef f():\n    from memory import services  # why\n")
    found, _ = _imports("core.probe", path)
    assert {(i.target, i.local) for i in found} == {("core.models", False), ("memory.services", True), ("core", False)}
