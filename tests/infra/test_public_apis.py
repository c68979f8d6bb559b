"""The project's own code uses the libraries it stands on through their public API only: no import of a private name
(`_x`) or of an undocumented module, and no reach into one through attributes (`litellm.main.handler`). What an
upgrade changes there, it changes silently, and no version range protects against it.

Read with `ast` (nothing is imported). Each library is one entry of LIBRARIES: its documented modules, and modules
of it that are off limits; a name starting with `_` is off limits in any library.
"""

import ast
import importlib.util
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("agents_ide", "core", "memory", "tools")


@dataclass(frozen=True)
class Library:
    """What of a library the project may use. `public_modules`: the only modules it may import or reach into (None:
    any but `private_modules`). `private_modules`: modules (and everything under them) it may not."""

    name: str
    public_modules: frozenset[str] | None = None
    private_modules: tuple[str, ...] = ()

    def submodules(self) -> frozenset[str]:
        """The names of the package's own modules and subpackages (read from its directory, not imported)."""
        spec = importlib.util.find_spec(self.name)
        found = set()
        for location in (spec.submodule_search_locations or []) if spec else []:
            for path in Path(location).iterdir():
                if (path.suffix == ".py" or path.is_dir()) and path.stem.isidentifier():  # namespace packages too
                    found.add(path.stem)
        return frozenset(found - {"__init__"})

    def refusal(self, module: str) -> str | None:
        """Why importing or reaching into `module` (dotted, inside this library) is refused; None when it is not."""
        if any(part.startswith("_") for part in module.split(".")):
            return "a private name"
        if self.public_modules is not None and module not in self.public_modules:
            return "an undocumented module"
        if any(module == p or module.startswith(p + ".") for p in self.private_modules):
            return "an undocumented module"
        return None


# litellm's documented API is its top-level module: completion, acompletion, embedding, its response types and
# exceptions, its settings. Django, channels: their documented modules are many, so what is off limits is listed
# (the SQL compiler and query internals; the request handlers, whose documented entry points are django.core.asgi and
# django.core.wsgi). channels-redis documents its two layers' modules only.
LIBRARIES = {
    lib.name: lib
    for lib in [
        Library("litellm", public_modules=frozenset({"litellm"})),
        Library("django", private_modules=("django.db.models.sql", "django.core.handlers")),
        Library("channels"),
        Library(
            "channels_redis",
            public_modules=frozenset({"channels_redis", "channels_redis.core", "channels_redis.pubsub"}),
        ),
    ]
}

# Attributes of a library's objects that are its internals, whatever object they are read or written on (a model
# instance's `_state`, a queryset's compiler): name -> library. A name starting with `_` that the project defines
# on its own objects is not one of these; add a library's here when it shows up in review.
PRIVATE_ATTRIBUTES = {
    "_state": "django",
    "_prepare_related_fields_for_save": "django",
    "_prefetch_related_lookups": "django",
    "_handler_class": "django",
    "get_compiler": "django",
    "klass_info": "django",
    "get_related_populators": "django",
    "sql_with_params": "django",  # a queryset's SQL text: undocumented (QuerySet.query is not a public API)
    "_clean_expired": "channels",
    "_remove_from_groups": "channels",
    "_get_layer": "channels_redis",
    "_get_group_channel_name": "channels_redis",
    "_get_shard": "channels_redis",
}


def _dotted(node: ast.AST) -> str | None:
    """`a.b.c` for an attribute chain on a plain name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def violations(path: Path, root: Path = ROOT) -> list[str]:
    """`path:line: reason: source` for each use of a library's private name or undocumented module in a file."""
    source = path.read_text()
    lines = source.splitlines()
    found = []

    def flag(node: ast.AST, library: Library, module: str, reason: str) -> None:
        where = f"{path.relative_to(root)}:{node.lineno}"
        found.append(f"{where}: {reason} of {library.name} ({module}): {lines[node.lineno - 1].strip()}")

    aliases = {name: name for name in LIBRARIES}  # a local name -> the library module it is bound to
    tree = ast.parse(source, filename=str(path))
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                library = LIBRARIES.get(alias.name.split(".")[0])
                if library is None:
                    continue
                if alias.asname:
                    aliases[alias.asname] = alias.name
                if reason := library.refusal(alias.name):
                    flag(node, library, alias.name, reason)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            library = LIBRARIES.get(node.module.split(".")[0])
            if library is None:
                continue
            if reason := library.refusal(node.module):
                flag(node, library, node.module, reason)
                continue
            for alias in node.names:
                if alias.name.startswith("_"):
                    flag(node, library, f"{node.module}.{alias.name}", "a private name")
                elif PRIVATE_ATTRIBUTES.get(alias.name) == library.name:
                    flag(node, library, f"{node.module}.{alias.name}", "an internal")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in PRIVATE_ATTRIBUTES:
            library = LIBRARIES[PRIVATE_ATTRIBUTES[node.attr]]
            flag(node, library, node.attr, "an internal")
    for node in ast.walk(tree):
        # litellm.main.handler, litellm._private: a reach into a module or a private name through attributes (a call
        # of a top-level function that shares its name with a submodule, `litellm.responses(...)`, is not one)
        if not isinstance(node, ast.Attribute) or isinstance(parents.get(node), ast.Attribute):
            continue
        dotted = _dotted(node)
        head = dotted.split(".")[0] if dotted else None
        if head not in aliases:
            continue
        parts = (aliases[head] + dotted[len(head) :]).split(".")
        library = LIBRARIES[parts[0]]
        submodules = library.submodules()
        for i in range(1, len(parts)):
            prefix = ".".join(parts[: i + 1])
            if parts[i].startswith("_"):
                flag(node, library, prefix, "a private name")
                break
            # A library with a list of off-limits modules is checked at every depth (django.db.models.sql.Query);
            # one with a list of public modules only where a name is one of its modules (not a function's).
            known = parts[i] in submodules or library.public_modules is None
            if i < len(parts) - 1 and known and (reason := library.refusal(prefix)):
                flag(node, library, prefix, reason)
                break
    return sorted(found, key=lambda line: int(line.split(":", 2)[1]))


def _project_files() -> list[Path]:
    return sorted(
        path
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts and ".venv" not in path.parts
    )


def test_the_project_uses_its_libraries_through_their_public_api_only():
    found = [line for path in _project_files() for line in violations(path)]
    assert not found, "private names or undocumented modules in use:\n" + "\n".join(found)


def test_the_check_sees_private_imports_and_reaches(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import litellm\n"
        "from litellm import completion, Usage\n"
        "from litellm.llms.custom_httpx.http_handler import get_httpx_client\n"
        "from litellm import _internal_context\n"
        "import litellm.litellm_core_utils.streaming_handler as sh\n"
        "\n"
        "def f(chunks):\n"
        "    litellm.completion(model='m', messages=[])\n"
        "    litellm.responses(model='m', input='x')\n"
        "    litellm.main.base_llm_http_handler.handle_error(None, None)\n"
        "    lib = litellm\n"
        "    return litellm._turn_on_debug, sh.x\n"
    )
    found = violations(probe, root=tmp_path)
    assert [line.split(":", 2)[1] for line in found] == ["3", "4", "5", "10", "12", "12"]
    assert "undocumented module of litellm (litellm.llms.custom_httpx.http_handler)" in found[0]
    assert "a private name of litellm (litellm._internal_context)" in found[1]
    assert "litellm.main" in found[3] and "litellm._turn_on_debug" in found[4]
    assert "litellm.litellm_core_utils" in found[5]  # through the module's local name


def test_the_check_sees_djangos_and_channels_internals(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from django.db import connection, models\n"
        "from django.db.models.sql.compiler import SQLCompiler\n"
        "from django.db.models.query import get_related_populators\n"
        "from django.core.handlers.asgi import ASGIHandler\n"
        "from django.utils.functional import _lazy_proxy\n"
        "from channels.layers import InMemoryChannelLayer, get_channel_layer\n"
        "from channels_redis.utils import decode_hosts\n"
        "from channels_redis.pubsub import RedisPubSubChannelLayer\n"
        "\n"
        "def f(obj, qs, layer):\n"
        "    obj._state.adding = False\n"
        "    compiler = qs.query.get_compiler(using='default')\n"
        "    layer._clean_expired()\n"
        "    return obj._meta.db_table, models.Q(), django.db.models.sql.Query\n"
        "import django\n"
    )
    found = violations(probe, root=tmp_path)
    assert [line.split(":", 2)[1] for line in found] == ["2", "3", "4", "5", "7", "11", "12", "13", "14"]
    assert "undocumented module of django (django.db.models.sql.compiler)" in found[0]
    assert "an internal of django (django.db.models.query.get_related_populators)" in found[1]
    assert "a private name of django (django.utils.functional._lazy_proxy)" in found[3]
    assert "undocumented module of channels_redis (channels_redis.utils)" in found[4]
    assert "an internal of django (_state)" in found[5] and "an internal of channels (_clean_expired)" in found[7]
    assert "django.db.models.sql" in found[8]  # a reach through attributes, at any depth
