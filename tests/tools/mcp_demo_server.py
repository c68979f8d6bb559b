"""A real MCP server for the tests (the `mcp` SDK's FastMCP, called MCPServer in mcp 2.x).

python mcp_demo_server.py stdio
python mcp_demo_server.py http PORT      (streamable HTTP at http://127.0.0.1:PORT/mcp)
"""

import os
import socket
import sys
import threading

from mcp.server.mcpserver import Context, MCPServer

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
