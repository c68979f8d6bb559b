"""What a tenant's MCP server can reach: a stdio server sees only /usr, its interpreter and the approved
directories (never a path its arguments name), runs as a throwaway uid with limits, and reaches only the public
internet through the egress proxy; HTTP servers on loopback or the metadata address are refused before any
connection; who may run stdio servers or give network is the operator's choice. Against the real demo server."""

import os
import shutil
import socket
import tempfile

import pytest
from django.conf import settings

from core.accounts import user_create
from tests.factories import ApiClient, make_account
from tests.tools.test_mcp import DEMO, STDIO
from tools.mcp_client import UID_RANGE, McpManager, ServerSpec, StdioLimits, manager

PG_SOCKET_DIR = "/var/run/postgresql"


@pytest.fixture(autouse=True)
def _connections_closed():
    yield
    manager().close_all()


@pytest.fixture
def listening():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    yield sock, sock.getsockname()[1]
    sock.close()


def _accepted(sock) -> int:
    sock.setblocking(False)
    count = 0
    try:
        while True:
            sock.accept()[0].close()
            count += 1
    except BlockingIOError:
        return count


def _register(api, name="demo", config=STDIO, status=200):
    resp = api.post("/v1/mcp-servers/", {"server_name": name, "config": config})
    assert resp.status_code == status, resp.content
    return resp.json()


def _run(api, server, tool, args):
    body = api.post(f"/v1/mcp-servers/{server['id']}/tools/{tool}/run", {"args": args}).json()
    assert body["status"] == "success", body
    return body["func_return"]


def test_paths_named_in_the_arguments_are_not_mounted(api, account):
    """The audit's attack: arguments naming the shadow file, the data directory and the database's socket."""
    secrets = ["/etc/shadow", str(settings.DATA_DIR), PG_SOCKET_DIR, str(settings.BASE_DIR), "/root"]
    server = _register(api, config={**STDIO, "args": [DEMO, "stdio", *secrets]})
    assert server["last_error"] is None
    visible = __import__("json").loads(_run(api, server, "paths_visible", {"paths": [*secrets, DEMO, "/usr/bin"]}))
    assert visible == {**dict.fromkeys(secrets, False), DEMO: True, "/usr/bin": True}


@pytest.mark.skipif(os.geteuid() != 0, reason="a throwaway uid is taken only by a server running as root")
def test_a_stdio_server_runs_as_a_throwaway_uid_with_limits(api, account):
    server = _register(api)
    me = __import__("json").loads(_run(api, server, "identity", {}))
    limits = StdioLimits()
    assert UID_RANGE[0] <= me["uid"] <= UID_RANGE[1] and me["gid"] == me["uid"]
    assert me["RLIMIT_NPROC"] == limits.max_processes
    assert me["RLIMIT_DATA"] == limits.memory_mb * 1024 * 1024
    assert me["RLIMIT_FSIZE"] == limits.file_size_mb * 1024 * 1024
    assert me["RLIMIT_CPU"] == limits.cpu_s


def test_a_networked_stdio_server_reaches_neither_loopback_nor_private_nor_metadata(api, account, listening):
    sock, port = listening
    server = _register(api, config={**STDIO, "allow_network": True})
    assert _run(api, server, "connect", {"port": port}).startswith("refused")  # its own loopback: nothing there
    for url in (f"http://127.0.0.1:{port}/", "http://169.254.169.254/latest/meta-data/", "http://10.1.2.3/"):
        answer = _run(api, server, "fetch", {"url": url})
        assert answer.startswith("403 egress refused"), (url, answer)
    assert _accepted(sock) == 0


def test_the_operator_lets_an_internal_address_through(api, account, listening, settings):
    sock, port = listening
    settings.EGRESS_ALLOW = [f"127.0.0.1:{port}"]
    server = _register(api, config={**STDIO, "allow_network": True})
    sock.settimeout(10)
    answer = {}
    import threading

    def serve():
        conn, _ = sock.accept()
        conn.recv(4096)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: close\r\n\r\ninside!")
        conn.close()

    thread = threading.Thread(target=serve)
    thread.start()
    answer = _run(api, server, "fetch", {"url": f"http://127.0.0.1:{port}/"})
    thread.join(5)
    assert answer == "200 inside!"


def test_stdio_servers_are_for_staff_unless_the_operator_opens_them(settings, transactional_db):
    settings.MCP_STDIO = "staff"
    ordinary = make_account("ordinary")
    refused = _register(ApiClient(ordinary.token), config=STDIO, status=403)
    assert "only staff accounts" in refused["detail"]
    staff = make_account("operator")
    staff.user.is_staff = True
    staff.user.save(update_fields=["is_staff"])
    assert _register(ApiClient(staff.token))["last_error"] is None
    settings.MCP_STDIO = "off"
    assert "turned off" in _register(ApiClient(staff.token), "again", status=403)["detail"]


def test_a_stored_server_stops_starting_when_the_operator_closes_stdio(api, account, settings):
    server = _register(api)
    manager().close_all()
    settings.MCP_STDIO = "staff"
    body = api.post(f"/v1/mcp-servers/{server['id']}/tools/add/run", {"args": {"a": 1, "b": 2}}).json()
    assert body["status"] == "error" and "only staff accounts" in body["func_return"]


def test_network_for_tools_is_the_operators_choice(api, account, settings):
    settings.TOOL_NETWORK = "off"
    refused = _register(api, config={**STDIO, "allow_network": True}, status=403)
    assert "network access for tools is not permitted" in refused["detail"]
    source = "def ping() -> str:\n    '''Ping.'''\n    return 'pong'\n"
    assert api.post("/v1/tools/", {"source_code": source, "allow_network": True}).status_code == 403
    run = api.post("/v1/tools/run", {"source_code": source, "args": {}, "allow_network": True})
    assert run.status_code == 403
    ran = api.post("/v1/tools/run", {"source_code": source, "args": {}}).json()
    assert ran["status"] == "success"


@pytest.mark.parametrize("host", ["127.0.0.1", "[::1]", "169.254.169.254", "10.0.0.7", "localhost"])
def test_http_server_urls_inside_are_refused_before_any_connection(api, account, listening, host):
    sock, port = listening
    resp = api.post(
        "/v1/mcp-servers/",
        {
            "server_name": "inside",
            "config": {"mcp_server_type": "streamable_http", "server_url": f"http://{host}:{port}/mcp"},
        },
    )
    assert resp.status_code == 422, resp.content
    assert "public internet" in resp.json()["detail"]
    assert _accepted(sock) == 0


def test_a_malformed_server_url_is_a_422(api, account):
    for url in ("http://[::1", "http://exa mple.com:99999/x", "http://:80/"):
        resp = api.post("/v1/mcp-servers/", {"server_name": "bad", "config": {"server_url": url}})
        assert resp.status_code == 422, (url, resp.content)
        assert "server_url" in resp.json()["detail"]


def test_an_http_server_allowed_once_is_checked_again_at_each_connection(api, account, listening, settings):
    """A URL stored while the operator allowed it is refused, unconnected, once the allowance is gone."""
    sock, port = listening
    settings.EGRESS_ALLOW = [f"127.0.0.1:{port}"]
    url = f"http://127.0.0.1:{port}/mcp"
    server = _register(api, "remote", {"mcp_server_type": "streamable_http", "server_url": url})
    while _accepted(sock):  # the registration's own attempt (nothing speaks MCP there)
        pass
    settings.EGRESS_ALLOW = []
    manager().close_all()
    refresh = api.patch(f"/v1/mcp-servers/{server['id']}/refresh")
    assert refresh.status_code == 422 and "loopback" in refresh.json()["detail"]
    assert _accepted(sock) == 0


def test_a_command_that_does_not_speak_mcp_fails_at_once_and_a_silent_one_at_the_start_timeout(account):
    mcp = McpManager(connect_timeout_s=5.0)
    chatty = ServerSpec(
        key="chatty",
        server_type="stdio",
        command="python3",
        args=("-c", "print('hello', flush=True); import time; time.sleep(60)"),
    )
    with pytest.raises(Exception, match="does not speak MCP"):
        mcp.list_tools(chatty, timeout_s=30)
    silent = ServerSpec(key="silent", server_type="stdio", command="sleep", args=("60",))
    with pytest.raises(Exception, match="did not answer the MCP handshake within 5s"):
        mcp.list_tools(silent, timeout_s=30)
    mcp.close_all()


@pytest.fixture
def slow_npx():
    """An `npx` in a directory approved for MCP servers that waits $SLOW_START seconds (as a download and install
    would) and then runs the demo server."""
    directory = tempfile.mkdtemp(prefix="agents-ide-test-npx-")
    script = os.path.join(directory, "npx")
    with open(script, "w") as f:
        f.write(f'#!/bin/sh\nsleep "$SLOW_START"\nexec {settings.MCP_DEMO_PYTHON} {DEMO} stdio\n')
    os.chmod(script, 0o755)
    os.chmod(directory, 0o755)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def test_the_first_start_of_a_package_runner_may_install_within_the_install_timeout(account, slow_npx):
    mcp = McpManager(connect_timeout_s=2.0, install_timeout_s=120.0)
    spec = ServerSpec(
        key="npx-demo",
        server_type="stdio",
        command=os.path.join(slow_npx, "npx"),  # not the system's npx, which would try the registry
        args=("-y", "demo-server"),
        env=(("SLOW_START", "5"),),
        paths=(slow_npx, *settings.MCP_STDIO_PATHS),
    )
    try:
        assert "add" in {t.name for t in mcp.list_tools(spec, timeout_s=30)}  # installed within the longer timeout
        mcp.close("npx-demo")
        # installed once, so a later start has the ordinary start timeout again
        with pytest.raises(Exception, match="did not answer the MCP handshake within 2s"):
            mcp.list_tools(spec, timeout_s=30)
    finally:
        mcp.close_all()


def test_a_command_outside_usr_and_the_approved_directories_is_refused(api, account, tmp_path):
    script = tmp_path / "server"
    script.write_text("#!/bin/sh\nexec sleep 60\n")
    script.chmod(0o755)
    server = _register(api, "outside", {"mcp_server_type": "stdio", "command": str(script)})
    assert "outside /usr and the directories approved for MCP servers" in server["last_error"]


def test_an_approved_directory_that_overlaps_a_sensitive_place_is_left_out(settings, tmp_path):
    from tools.policy import mcp_stdio_paths

    settings.MCP_STDIO_PATHS = [
        "/",
        "/root",
        str(settings.DATA_DIR),
        str(settings.BASE_DIR / "tools"),
        "/opt",
        str(tmp_path),
    ]
    assert mcp_stdio_paths() == (os.path.realpath(tmp_path),)


def test_staff_user_made_by_the_first_run_may_run_stdio(settings, transactional_db):
    settings.MCP_STDIO = "staff"
    admin = user_create(username="admin", password="a-long-password", is_superuser=True)
    from core.accounts import org_for_user
    from tools.policy import organization_is_staff

    assert organization_is_staff(org_for_user(admin))


def test_a_node_server_runs_in_the_sandbox_from_an_approved_directory(api, account):
    """`node server.js`, as npm-installed servers start: the runtime from /usr, the script approved, read-only."""
    server = _register(api, "node", {"mcp_server_type": "stdio", "command": "node", "args": [settings.MCP_NODE_SERVER]})
    assert server["last_error"] is None, server["last_error"]
    names = sorted(t["name"] for t in api.get(f"/v1/mcp-servers/{server['id']}/tools").json())
    assert names == ["echo", "node_version"]
    assert _run(api, server, "echo", {"text": "from node"}) == "from node"
    assert _run(api, server, "node_version", {}).startswith("v")


def test_a_node_server_that_crashes_fails_at_once_with_its_own_stderr(api, account):
    crash = "console.error('node-demo: missing API_TOKEN'); process.exit(1)"
    server = _register(api, "crash", {"mcp_server_type": "stdio", "command": "node", "args": ["-e", crash]})
    assert "node-demo: missing API_TOKEN" in server["last_error"]
