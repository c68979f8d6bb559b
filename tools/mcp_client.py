"""Connections to MCP servers, through the official `mcp` SDK: one background event loop per process holds
each server's session open between calls (a stdio server stays warm until it has been idle for
`MCP_IDLE_TIMEOUT_S`), starts it on first use, and starts it again when it died.

A stdio server is a process this server starts under the local sandbox's rules: bubblewrap namespaces
with no network unless the server is allowed it, a root holding /usr, the command's own installation and
the files its arguments name (read-only), and an environment holding only PATH/HOME/TMPDIR/LANG and the
server's configured variables — never the server's own secrets. Nothing here touches the database.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED

from tools.sandbox.bwrap import SANDBOX_HOME, bwrap_argv, find_bwrap, python_mounts

log = logging.getLogger(__name__)

BASE_PATH = "/usr/local/bin:/usr/bin:/bin"


class McpUnavailable(Exception):
    """The server could not be started or reached, or it died during the call (after one restart)."""


class McpRefused(Exception):
    """The server answered the request with an MCP error (unknown tool, bad params…); it is alive and kept."""


@dataclass(frozen=True)
class ServerSpec:
    """Everything needed to connect to one server; a changed spec means a new connection."""

    key: str
    server_type: str  # stdio | sse | streamable_http
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    allow_network: bool = False
    weak_isolation: bool = False  # no bwrap here and the deployment allows running without it


def stdio_argv(spec: ServerSpec) -> tuple[list[str], dict[str, str]]:
    """The command line and environment that start a stdio server in its sandbox (bwrap unless weak)."""

    executable = shutil.which(spec.command, path=BASE_PATH) or shutil.which(spec.command) or spec.command
    env = {"PATH": BASE_PATH, "HOME": SANDBOX_HOME, "TMPDIR": "/tmp", "LANG": "C.UTF-8", **dict(spec.env)}
    bwrap = find_bwrap()
    if bwrap is None:
        if spec.weak_isolation:
            return [executable, *spec.args], env
        raise McpUnavailable("stdio MCP servers run in the local sandbox, which needs bubblewrap (`bwrap`)")
    argv = bwrap_argv(
        bwrap=bwrap,
        mounts=_mounts(executable, spec.args, python_mounts),
        runner=os.devnull,
        allow_network=spec.allow_network,
        scratch_mb=256,
    )
    return [*argv, "--", executable, *spec.args], env


def _mounts(executable: str, args, python_mounts) -> list[str]:
    """Read-only paths the server needs: its interpreter's installation, else its own directory, and the
    absolute paths its arguments name."""
    mounts: list[str] = []
    if os.path.isabs(executable) and not os.path.realpath(executable).startswith("/usr/"):
        try:
            mounts += python_mounts(executable)
        except Exception:  # not a Python: mount the directory it lives in
            mounts.append(os.path.dirname(os.path.realpath(executable)))
    for arg in args:
        if os.path.isabs(arg) and os.path.exists(arg) and arg not in mounts:
            mounts.append(arg)
    return mounts


@dataclass
class _Connection:
    spec: ServerSpec
    session: Any = None
    task: asyncio.Task | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    error: BaseException | None = None
    last_used: float = field(default_factory=time.monotonic)
    errlog: Any = None
    stderr_last: str = ""  # what the server wrote to stderr, kept when its connection ends

    @property
    def alive(self) -> bool:
        return self.session is not None and self.task is not None and not self.task.done()

    def stderr_tail(self) -> str:
        if self.errlog is None or self.errlog.closed:
            return self.stderr_last
        try:
            self.errlog.seek(0)
            return self.errlog.read()[-2000:].strip()
        except (OSError, ValueError):
            return ""


class McpManager:
    """The process's MCP connections, on a private event loop thread; every public method is blocking."""

    def __init__(self, *, idle_timeout_s: float = 300.0, connect_timeout_s: float = 30.0):
        self.idle_timeout_s = idle_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.on_tools_changed: Callable[[str], None] | None = None
        self.starts: dict[str, int] = {}  # how many times each server was started (tests and the IDE read it)
        self._conns: dict[str, _Connection] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread_lock = threading.Lock()

    # --- blocking API -------------------------------------------------------------------------------
    def list_tools(self, spec: ServerSpec, *, timeout_s: float = 60.0) -> list[Any]:
        """The server's tools (mcp `Tool` objects: name, description, input_schema); starts it if needed."""

        async def op(session):
            tools, cursor = [], None
            while True:
                from mcp import types  # the SDK's submodules load with the first connection; most processes open none

                page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
                tools += page.tools
                cursor = page.next_cursor
                if not cursor:
                    return tools

        return self._run(self._with_session(spec, op, timeout_s), timeout_s)

    def call_tool(self, spec: ServerSpec, name: str, args: dict, *, timeout_s: float = 60.0) -> Any:
        """Call one tool (an mcp `CallToolResult`); a dead server is started again and the call retried once."""
        return self._run(self._with_session(spec, lambda s: s.call_tool(name, args), timeout_s), timeout_s)

    def close(self, key: str) -> None:
        """Stop the server's connection (and its process) if one is open."""
        if self._loop is not None:
            self._run(self._close(key), 30)

    def close_all(self) -> None:
        """Stop every open connection (process shutdown, tests)."""
        for key in list(self._conns):
            self.close(key)

    def is_running(self, key: str) -> bool:
        conn = self._conns.get(key)
        return bool(conn and conn.alive)

    # --- loop plumbing ------------------------------------------------------------------------------
    def _run(self, coro: Awaitable, timeout_s: float):
        loop = self._ensure_loop()
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result(timeout_s + self.connect_timeout_s + 10)
        except TimeoutError as exc:
            future.cancel()
            raise McpUnavailable("the MCP server did not answer in time") from exc

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._thread_lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="mcp-connections", daemon=True).start()
                asyncio.run_coroutine_threadsafe(self._reap_idle(), loop)
                self._loop = loop
            return self._loop

    async def _reap_idle(self) -> None:
        while True:
            await asyncio.sleep(min(5.0, max(0.2, self.idle_timeout_s / 4)))
            now = time.monotonic()
            for key, conn in list(self._conns.items()):
                if now - conn.last_used > self.idle_timeout_s:
                    await self._close(key)

    async def _with_session(self, spec: ServerSpec, op: Callable[[Any], Awaitable], timeout_s: float):
        for attempt in (1, 2):
            conn = await self._connected(spec)
            conn.last_used = time.monotonic()
            try:
                return await asyncio.wait_for(op(conn.session), timeout_s)
            except TimeoutError as exc:
                await self._close(spec.key)  # a hung server is restarted on the next call
                raise McpUnavailable(f"the MCP server did not answer within {timeout_s:g}s") from exc
            except MCPError as exc:
                if exc.code != CONNECTION_CLOSED:
                    raise McpRefused(exc.message) from exc
                tail = conn.stderr_tail()
                await self._close(spec.key)
                if attempt == 2:
                    raise McpUnavailable(_describe(exc, tail)) from exc
            except Exception as exc:  # the transport failed: the process died or the connection dropped
                tail = conn.stderr_tail()
                await self._close(spec.key)
                if attempt == 2:
                    raise McpUnavailable(_describe(exc, tail)) from exc
                log.info("MCP server %s failed (%s); starting it again", spec.key, exc)
            finally:
                conn.last_used = time.monotonic()

    async def _connected(self, spec: ServerSpec) -> _Connection:
        lock = self._locks.setdefault(spec.key, asyncio.Lock())
        async with lock:
            conn = self._conns.get(spec.key)
            if conn is not None and conn.alive and conn.spec == spec:
                return conn
            if conn is not None:
                await self._close(spec.key)
            conn = _Connection(spec=spec)
            self._conns[spec.key] = conn
            self.starts[spec.key] = self.starts.get(spec.key, 0) + 1
            conn.task = asyncio.get_running_loop().create_task(self._hold(conn))
            try:
                await asyncio.wait_for(conn.ready.wait(), self.connect_timeout_s)
            except TimeoutError:
                await self._close(spec.key)
                raise McpUnavailable(f"the MCP server did not start within {self.connect_timeout_s:g}s") from None
            if not conn.alive:
                self._conns.pop(spec.key, None)
                raise McpUnavailable(
                    _describe(conn.error, conn.stderr_tail()) if conn.error else "the MCP server closed the connection"
                )
            return conn

    async def _hold(self, conn: _Connection) -> None:
        """Open the transport and session and keep them open until asked to close (same task: anyio scopes)."""
        from mcp.client.session import ClientSession  # loaded with the first connection (most processes open none)

        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport(conn))
                session = await stack.enter_async_context(
                    ClientSession(read, write, message_handler=self._message_handler(conn.spec.key))
                )
                await session.initialize()
                conn.session = session
                conn.ready.set()
                await conn.closing.wait()
        except BaseException as exc:  # noqa: BLE001 — recorded for the caller; the task must not raise
            conn.error = exc
        finally:
            conn.session = None
            if conn.errlog is not None:
                conn.stderr_last = conn.stderr_tail()
                conn.errlog.close()
            conn.ready.set()

    def _transport(self, conn: _Connection):
        spec = conn.spec
        if spec.server_type == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client  # each transport loads when first used

            argv, env = stdio_argv(spec)
            conn.errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
            return stdio_client(
                StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd="/"), errlog=conn.errlog
            )
        headers = dict(spec.headers)
        if spec.server_type == "sse":
            from mcp.client.sse import sse_client  # each transport loads when first used

            return sse_client(spec.url, headers=headers, timeout=self.connect_timeout_s)
        # each transport loads when first used
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        return _with_client(create_mcp_http_client(headers=headers), streamable_http_client, spec.url)

    def _message_handler(self, key: str):
        async def handle(message) -> None:
            from mcp import types  # loaded with the first connection (most processes open none)

            if isinstance(message, types.ToolListChangedNotification) and self.on_tools_changed is not None:
                # The refresh writes the database: off the loop, in a worker thread.
                asyncio.get_running_loop().run_in_executor(None, self.on_tools_changed, key)

        return handle

    async def _close(self, key: str) -> None:
        conn = self._conns.pop(key, None)
        if conn is None or conn.task is None:
            return
        conn.closing.set()
        try:
            await asyncio.wait_for(asyncio.shield(conn.task), 15)
        except (TimeoutError, Exception):  # noqa: BLE001
            conn.task.cancel()


class _with_client:
    """Enter an httpx client and the streamable-HTTP transport using it as one async context."""

    def __init__(self, client, transport, url):
        self.client, self.transport, self.url = client, transport, url
        self.stack = AsyncExitStack()

    async def __aenter__(self):
        client = await self.stack.enter_async_context(self.client)
        return await self.stack.enter_async_context(self.transport(self.url, http_client=client))

    async def __aexit__(self, *exc):
        return await self.stack.__aexit__(*exc)


def _describe(exc: BaseException | None, stderr_tail: str) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = f"{type(exc).__name__}: {exc}" if exc is not None else "the MCP server stopped"
    return f"{text}\n{stderr_tail}" if stderr_tail else text


_manager: McpManager | None = None
_manager_lock = threading.Lock()

# What the manager calls when a server says its tools changed: tools.mcp_services.mcp_tools_changed, set by
# ToolsConfig.ready (the services use this client, so it must not import them).
tools_changed_hook: Callable[[str], None] | None = None


def manager() -> McpManager:
    """The process's connection manager (created on first use with the deployment's idle timeout)."""
    global _manager
    with _manager_lock:
        if _manager is None:
            _manager = McpManager(idle_timeout_s=float(getattr(settings, "MCP_IDLE_TIMEOUT_S", 300)))
            _manager.on_tools_changed = tools_changed_hook
        return _manager
