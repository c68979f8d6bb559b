"""Connections to MCP servers, through the official `mcp` SDK: one background event loop per process holds
each server's session open between calls (a stdio server stays warm until it has been idle for
`MCP_IDLE_TIMEOUT_S`), starts it on first use, and starts it again when it died.

A stdio server is a process this server starts under the tool sandbox's rules: bubblewrap namespaces with
their own network namespace (the public internet through the egress proxy when the server is allowed the
network), a throwaway uid when the server runs as root, resource limits (processes, memory, CPU, file size),
and a root holding only /usr, the command's own interpreter and the directories the operator approved for MCP
servers (`MCP_STDIO_PATHS`) read-only — a path never becomes visible because an argument names it. Its
environment holds only PATH/HOME/TMPDIR/LANG and the server's configured variables, never the server's own
secrets. An SSE or HTTP server is reached through the egress guard (`core.egress`). A command that does not
answer MCP fails within `MCP_START_TIMEOUT_S`, sooner when it writes something that is not MCP or exits; the first
start of a package runner's server (`npx -y pkg`, `uvx pkg`: it may download and install the package first) in this
process has `MCP_INSTALL_TIMEOUT_S` instead. Nothing here touches the database.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import sys
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

from core.egress import guarded_async_client
from tools.sandbox.base import SandboxError
from tools.sandbox.bwrap import (
    EGRESS_SOCKET_IN_SANDBOX,
    RELAY_IN_SANDBOX,
    SANDBOX_HOME,
    bwrap_argv,
    find_bwrap,
    python_mounts,
)
from tools.sandbox.egress import RELAY_PORT, egress_proxy, proxy_env
from tools.sandbox.local import RELAY_PATH, RUNNER_PATH, find_interpreter, shared_copy
from tools.sandbox.process import UidLease, kill_uid_processes

log = logging.getLogger(__name__)

BASE_PATH = "/usr/local/bin:/usr/bin:/bin"
PACKAGE_RUNNERS = frozenset({"npx", "uvx", "bunx", "pnpx", "pipx"})  # their first start may install the package
UID_RANGE = (52000, 59999)  # shared with the tool sandbox: a lease file keeps each uid to one holder


class McpUnavailable(Exception):
    """The server could not be started or reached, or it died during the call (after one restart)."""


class McpRefused(Exception):
    """The server answered the request with an MCP error (unknown tool, bad params…); it is alive and kept."""


@dataclass(frozen=True)
class StdioLimits:
    """Ceilings for a stdio server's whole life (CPU seconds add up across calls; past them it is restarted)."""

    cpu_s: int = 600
    memory_mb: int = 1024  # the data segment: V8 and the JVM reserve address space they never touch
    file_size_mb: int = 64
    max_processes: int = 64  # threads count too (node starts about a dozen)
    scratch_mb: int = 256  # its private HOME and /tmp (npx caches packages there)


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
    paths: tuple[str, ...] = ()  # directories the operator approved for stdio servers (read-only inside)
    limits: StdioLimits = field(default_factory=StdioLimits)


def stdio_executable(spec: ServerSpec) -> str:
    """The command's file: found on the system PATH or in an approved directory, and only there (or the server's
    own interpreter); McpUnavailable otherwise."""
    search = os.pathsep.join([BASE_PATH, *spec.paths, *(os.path.join(p, "bin") for p in spec.paths)])
    found = shutil.which(spec.command, path=search) if not os.path.isabs(spec.command) else spec.command
    if not found or not os.access(found, os.X_OK):
        raise McpUnavailable(
            f"command not found: {spec.command!r} (looked in {BASE_PATH} and the directories approved for MCP "
            f"servers, MCP_STDIO_PATHS)"
        )
    real = os.path.realpath(found)
    own = {os.path.realpath(sys.executable), os.path.abspath(sys.executable)}
    if _inside(real, "/usr") or found in own or real in own or any(_inside(found, p) for p in spec.paths):
        return found
    raise McpUnavailable(
        f"{found} is outside /usr and the directories approved for MCP servers (MCP_STDIO_PATHS); an operator "
        f"installs MCP servers in an approved directory"
    )


def installs_on_start(spec: ServerSpec) -> bool:
    """Whether the server's command is a package runner, which fetches and installs its package when not cached."""
    return spec.server_type == "stdio" and os.path.basename(spec.command) in PACKAGE_RUNNERS


def _inside(path: str, directory: str) -> bool:
    directory = directory.rstrip("/") or "/"
    return path == directory or path.startswith(directory + "/")


def stdio_argv(spec: ServerSpec, *, uid: int | None) -> tuple[list[str], dict[str, str]]:
    """The command line and environment that start a stdio server in its sandbox (bwrap unless weak), as `uid`."""
    executable = stdio_executable(spec)
    env = {"PATH": BASE_PATH, "HOME": SANDBOX_HOME, "TMPDIR": "/tmp", "LANG": "C.UTF-8", **dict(spec.env)}
    bwrap = find_bwrap()
    if bwrap is None:
        if spec.weak_isolation:
            return [executable, *spec.args], env
        raise McpUnavailable("stdio MCP servers run in the local sandbox, which needs bubblewrap (`bwrap`)")
    work_root = tempfile.gettempdir()
    python = find_interpreter(world_accessible=uid is not None)  # runs the relay: limits, and the way out
    try:
        mounts = _mounts(executable, spec.paths, python)
        argv = bwrap_argv(
            bwrap=bwrap,
            mounts=mounts,
            runner=shared_copy(work_root, RUNNER_PATH),
            allow_network=spec.allow_network,
            scratch_mb=spec.limits.scratch_mb,
            relay=shared_copy(work_root, RELAY_PATH),
            egress_socket=egress_proxy(work_root).socket_path if spec.allow_network else None,
        )
    except SandboxError as exc:
        raise McpUnavailable(str(exc)) from exc
    limits = spec.limits
    relay = [python, "-I", "-S", RELAY_IN_SANDBOX, "--limits"]
    relay.append(f"{limits.cpu_s},{limits.memory_mb},{limits.file_size_mb},{limits.max_processes}")
    if spec.allow_network:
        relay += ["--proxy", EGRESS_SOCKET_IN_SANDBOX, str(RELAY_PORT)]
        env = {**env, **proxy_env()}
    argv = [*argv, "--", *relay, "--", executable, *spec.args]
    if uid is not None:  # bwrap runs as the throwaway uid, so nothing inside is root's
        setpriv = shutil.which("setpriv", path=BASE_PATH + ":/usr/sbin:/sbin")
        if setpriv is None:
            raise McpUnavailable("running stdio MCP servers as root needs `setpriv` (util-linux) to drop privileges")
        argv = [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", *argv]
    return argv, env


def _mounts(executable: str, paths: tuple[str, ...], python: str) -> list[str]:
    """Read-only paths the server needs: the relay's interpreter, the command's own interpreter installation (a
    Python), and the approved directories. Never what its arguments name."""
    mounts: list[str] = []
    for candidate in (python, executable):
        if _inside(os.path.realpath(candidate), "/usr"):
            continue
        try:
            found = python_mounts(candidate)
        except SandboxError:
            continue  # not a Python: it lives in an approved directory (checked by stdio_executable)
        mounts += [m for m in found if m not in mounts]
    return mounts + [p for p in paths if p not in mounts]


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
    lease: UidLease | None = None  # the throwaway uid a stdio server runs as (server as root)
    start_scope: Any = None  # the cancel scope of the MCP handshake: output that is not MCP ends it at once
    not_mcp: str = ""  # why the handshake was ended early
    started_at: float = field(default_factory=time.monotonic)
    installing: bool = False  # a package runner's first start here: it may be installing its package

    @property
    def alive(self) -> bool:
        return self.session is not None and self.task is not None and not self.task.done()

    def stderr_peek(self, size: int = 2000) -> str:
        """The end of what the server wrote to stderr so far, read without moving the log's position (another
        thread may read it while the connection's own task does)."""
        errlog = self.errlog
        try:
            if errlog is None or errlog.closed:
                return ""
            fd = errlog.fileno()
            end = os.fstat(fd).st_size
            return os.pread(fd, size, max(0, end - size)).decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            return ""

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

    def __init__(
        self, *, idle_timeout_s: float = 300.0, connect_timeout_s: float = 10.0, install_timeout_s: float = 300.0
    ):
        self.idle_timeout_s = idle_timeout_s
        self.connect_timeout_s = connect_timeout_s  # the MCP handshake, process start included
        self.install_timeout_s = install_timeout_s  # the same for a package runner's first start (it may install)
        self._installed: set[tuple[str, tuple[str, ...]]] = set()  # package runs that answered once
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

    def starting(self, keys: set[str]) -> list[dict[str, Any]]:
        """The servers among `keys` whose start (a process launched, its MCP handshake not answered yet) is under way
        in this process: key, seconds so far, whether it may be installing its package (a package runner's first
        start) and the end of what it printed. A snapshot; starts nothing."""
        now = time.monotonic()
        return [
            {
                "key": key,
                "seconds": int(now - conn.started_at),
                "installing": conn.installing,
                "output": conn.stderr_peek(600),
            }
            for key, conn in list(self._conns.items())
            if key in keys and not conn.ready.is_set() and conn.task is not None and not conn.task.done()
        ]

    def is_running(self, key: str) -> bool:
        conn = self._conns.get(key)
        return bool(conn and conn.alive)

    # --- loop plumbing ------------------------------------------------------------------------------
    def _run(self, coro: Awaitable, timeout_s: float):
        loop = self._ensure_loop()
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result(timeout_s + max(self.connect_timeout_s, self.install_timeout_s) + 10)
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
            conn.installing = installs_on_start(spec) and (spec.command, spec.args) not in self._installed
            self._conns[spec.key] = conn
            self.starts[spec.key] = self.starts.get(spec.key, 0) + 1
            conn.task = asyncio.get_running_loop().create_task(self._hold(conn))
            deadline, why = self._start_deadline(spec)
            try:
                await asyncio.wait_for(conn.ready.wait(), deadline)
            except TimeoutError:
                tail = conn.stderr_tail()
                await self._close(spec.key, grace_s=1.0)
                raise McpUnavailable(
                    _describe(
                        TimeoutError(f"the MCP server did not answer the MCP handshake within {deadline:g}s{why}"),
                        tail,
                    )
                ) from None
            if not conn.alive:
                self._conns.pop(spec.key, None)
                raise McpUnavailable(
                    _describe(conn.error, conn.stderr_tail()) if conn.error else "the MCP server closed the connection"
                )
            if installs_on_start(spec):
                self._installed.add((spec.command, spec.args))
            return conn

    def _start_deadline(self, spec: ServerSpec) -> tuple[float, str]:
        """How long the handshake may take, and what to add to the error: a package runner's first start in this
        process may install its package first (MCP_INSTALL_TIMEOUT_S), any other start has MCP_START_TIMEOUT_S."""
        if installs_on_start(spec) and (spec.command, spec.args) not in self._installed:
            return max(
                self.install_timeout_s, self.connect_timeout_s
            ), " (its first start, installing: MCP_INSTALL_TIMEOUT_S)"
        return self.connect_timeout_s, ""

    async def _hold(self, conn: _Connection) -> None:
        """Open the transport and session and keep them open until asked to close (same task: anyio scopes)."""
        import anyio  # the SDK's own dependency: its cancel scopes end the handshake early
        from mcp.client.session import ClientSession  # loaded with the first connection (most processes open none)

        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport(conn))
                session = await stack.enter_async_context(
                    ClientSession(read, write, message_handler=self._message_handler(conn))
                )
                with anyio.CancelScope() as conn.start_scope:
                    await session.initialize()
                if conn.start_scope.cancelled_caught:
                    raise McpUnavailable(conn.not_mcp)
                conn.start_scope = None
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
            if conn.lease is not None:
                kill_uid_processes(conn.lease.uid)  # whatever the server left running under its uid
                conn.lease.release()
                conn.lease = None
            conn.ready.set()

    def _transport(self, conn: _Connection):
        spec = conn.spec
        if spec.server_type == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client  # each transport loads when first used

            if os.geteuid() == 0 and find_bwrap() is not None:
                conn.lease = UidLease.acquire(UID_RANGE, tempfile.gettempdir())
            argv, env = stdio_argv(spec, uid=conn.lease.uid if conn.lease else None)
            conn.errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
            return stdio_client(
                StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd="/"), errlog=conn.errlog
            )
        headers = dict(spec.headers)
        if spec.server_type == "sse":
            from mcp.client.sse import sse_client  # each transport loads when first used

            return sse_client(
                spec.url, headers=headers, timeout=self.connect_timeout_s, httpx_client_factory=_guarded_http_client
            )
        # each transport loads when first used
        from mcp.client.streamable_http import streamable_http_client

        return _with_client(_guarded_http_client(headers=headers), streamable_http_client, spec.url)

    def _message_handler(self, conn: _Connection):
        key = conn.spec.key

        async def handle(message) -> None:
            from mcp import types  # loaded with the first connection (most processes open none)

            if isinstance(message, Exception) and conn.start_scope is not None:
                # Output that is not MCP before the handshake finished: not an MCP server (or a broken one).
                conn.not_mcp = f"the command does not speak MCP on stdout ({type(message).__name__}: {message})"[:500]
                conn.start_scope.cancel()
            if isinstance(message, types.ToolListChangedNotification) and self.on_tools_changed is not None:
                # The refresh writes the database: off the loop, in a worker thread.
                asyncio.get_running_loop().run_in_executor(None, self.on_tools_changed, key)

        return handle

    async def _close(self, key: str, *, grace_s: float = 15.0) -> None:
        conn = self._conns.pop(key, None)
        if conn is None or conn.task is None:
            return
        conn.closing.set()
        if conn.start_scope is not None:
            conn.start_scope.cancel()  # still in the handshake: nothing to finish gracefully
        try:
            await asyncio.wait_for(asyncio.shield(conn.task), grace_s)
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


def _guarded_http_client(headers=None, timeout=None, auth=None):
    """The MCP SDK's HTTP client (httpx2), every request through the egress guard: the transports' usual timeouts
    (30 s, reads 300 s for a held stream), redirects followed by the transports within the endpoint's origin."""
    import httpx2  # the MCP SDK's HTTP client package, loaded with the first HTTP connection

    return guarded_async_client(
        module=httpx2, headers=headers, timeout=timeout or httpx2.Timeout(30.0, read=300.0), auth=auth
    )


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
            _manager = McpManager(
                idle_timeout_s=float(getattr(settings, "MCP_IDLE_TIMEOUT_S", 300)),
                connect_timeout_s=float(getattr(settings, "MCP_START_TIMEOUT_S", 10)),
                install_timeout_s=float(getattr(settings, "MCP_INSTALL_TIMEOUT_S", 300)),
            )
            _manager.on_tools_changed = tools_changed_hook
        return _manager
