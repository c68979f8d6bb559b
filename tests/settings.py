"""The project's settings, with one change for the test run: a fast password hasher. PBKDF2's deliberate
slowness (a million rounds per hash) was most of the suite's wall time, spent creating accounts in fixtures.
Servers the tests start in subprocesses use this module too, so they check the passwords the tests set."""

from agents_ide.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# stdio MCP servers are for staff on a real deployment; the tests' accounts are ordinary ones, and run the demo
# server from a directory approved for MCP servers, as an operator installs one (never the source tree): the
# script beside a copy of the `mcp` SDK and what it needs, run by an interpreter the sandbox's uid can execute.
MCP_STDIO = "all"


def _mcp_closure() -> list:
    import importlib.metadata as md

    from packaging.requirements import Requirement

    seen, stack, dists = set(), ["mcp"], []
    while stack:
        name = stack.pop().lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        dist = md.distribution(name)
        dists.append(dist)
        for raw in dist.requires or []:
            req = Requirement(raw)
            if not req.marker or req.marker.evaluate({"extra": ""}):
                stack.append(req.name)
    return dists


def _approved_mcp_dir() -> str:
    import hashlib
    import importlib.metadata as md
    import os
    import shutil
    import tempfile

    here = BASE_DIR / "tests" / "tools"  # noqa: F405
    sources = [here / "mcp_demo_server.py", here / "mcp_node_server.js"]
    key = hashlib.sha256(b"".join(s.read_bytes() for s in sources) + md.version("mcp").encode()).hexdigest()[:12]
    directory = os.path.join(tempfile.gettempdir(), f"agents-ide-test-mcp-{key}")
    if os.path.exists(os.path.join(directory, sources[0].name)):
        return directory
    staging = tempfile.mkdtemp(prefix="agents-ide-test-mcp-")
    for dist in _mcp_closure():
        for file in dist.files or []:
            target = os.path.join(staging, "site-packages", str(file))
            if ".." in str(file) or str(file).endswith(".pyc"):
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(dist.locate_file(file), target)
    for source in sources:
        shutil.copyfile(source, os.path.join(staging, source.name))
    for root, _dirs, files in os.walk(staging):
        os.chmod(root, 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)
    try:
        os.rename(staging, directory)
    except OSError:  # another process made it first
        shutil.rmtree(staging, ignore_errors=True)
    return directory


MCP_STDIO_PATHS = [_approved_mcp_dir()]
MCP_DEMO_SERVER = MCP_STDIO_PATHS[0] + "/mcp_demo_server.py"
MCP_NODE_SERVER = MCP_STDIO_PATHS[0] + "/mcp_node_server.js"
MCP_DEMO_PYTHON = __import__("shutil").which("python3", path="/usr/local/bin:/usr/bin:/bin")  # under /usr

if IS_POSTGRES:  # noqa: F405
    # A transactional test's flush deletes rows rather than truncating every table (tests/postgres_backend).
    DATABASES["default"]["ENGINE"] = "tests.postgres_backend"  # noqa: F405
