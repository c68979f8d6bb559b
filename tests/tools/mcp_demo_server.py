"""A real MCP server for the tests (the `mcp` SDK's FastMCP, called MCPServer in mcp 2.x).

python mcp_demo_server.py stdio
python mcp_demo_server.py http PORT      (streamable HTTP at http://127.0.0.1:PORT/mcp)
"""

import os
import socket
import sys
import threading

# Installed as an operator installs a server: the SDK in site-packages beside this file (tests/settings.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "site-packages"))

from mcp.server.mcpserver import Context, MCPServer  # noqa: E402

app = MCPServer("demo")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool()
def read_env(name: str) -> str:
    """The value of an environment variable in the server's process, or MISSING."""
    return os.environ.get(name, "MISSING")


@app.tool()
def connect(port: int) -> str:
    """Try a TCP connection to 127.0.0.1:port; says connected or the error."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3):
            return "connected"
    except OSError as exc:
        return f"refused: {exc}"


@app.tool()
def read_file(path: str) -> str:
    """The first 200 characters of a file, or the error."""
    try:
        with open(path) as f:
            return f.read(200)
    except OSError as exc:
        return f"unreadable: {exc}"


@app.tool()
def paths_visible(paths: list[str]) -> dict:
    """Which of these paths exist in the server's view of the file system."""
    return {path: os.path.lexists(path) for path in paths}


@app.tool()
def identity() -> dict:
    """The server process's uid and gid, and its resource limits (soft, -1 for none)."""
    import resource

    names = ("RLIMIT_NPROC", "RLIMIT_DATA", "RLIMIT_FSIZE", "RLIMIT_CPU")
    return {"uid": os.getuid(), "gid": os.getgid(), **{n: resource.getrlimit(getattr(resource, n))[0] for n in names}}


@app.tool()
def fetch(url: str) -> str:
    """GET a URL the way most clients do (the environment's proxy settings apply): the status and body, or the error."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return f"{resp.status} {resp.read(200).decode()}"
    except urllib.error.HTTPError as exc:
        return f"{exc.code} {exc.read(300).decode()}"
    except OSError as exc:
        return f"error: {exc}"


@app.tool()
def fail(message: str) -> str:
    """Raise an error with this message."""
    raise ValueError(message)


@app.tool()
def die() -> str:
    """Answer, then exit the server process."""
    threading.Timer(0.2, os._exit, (3,)).start()
    return "bye"


def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


@app.tool()
async def grow(ctx: Context) -> str:
    """Add the `shout` tool and tell the client the tool list changed."""
    app.add_tool(shout)
    await ctx.session.send_tool_list_changed()
    return "grown"


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        app.run("stdio")
