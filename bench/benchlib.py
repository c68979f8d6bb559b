"""What the benchmarks share: the machine's speed printed beside their figures, a scratch PostgreSQL database, and a
live server to measure from outside (started, watched, its latencies and memory read). The scripts run as files
(`python bench/x.py`), so this is imported by its bare name."""

import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

_SPEED_LOOP = "import time\nt = time.time()\nx = 0\nfor i in range(10_000_000):\n    x += i\nprint(time.time() - t)"


def machine_speed_s() -> float:
    """Seconds a pure-Python loop of 10 million additions (at module level, as the README's earlier figures were
    read) takes now: this kind of machine's speed drifts by up to 1.7 times within minutes, so figures from runs
    apart are compared with this next to them (the benchmarks table's "machine's loop")."""
    return float(subprocess.run([sys.executable, "-c", _SPEED_LOOP], capture_output=True, text=True).stdout)


def scratch_postgres(action: str, *, admin_url: str, name: str, extensions: tuple[str, ...] = ()) -> str:
    """Drop the database `name` and, for action "create", create it afresh with `extensions`; its URL."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        if action == "create":
            conn.execute(f"CREATE DATABASE {name}")
    url = admin_url.rsplit("/", 1)[0] + "/" + name
    if action == "create" and extensions:
        with psycopg.connect(url, autocommit=True) as conn:
            for extension in extensions:
                conn.execute(f"CREATE EXTENSION IF NOT EXISTS {extension}")
    return url


# Live servers: the benches start the real server (agents_ide.serve, as scripts/serve does) on a throwaway database
# and measure it from outside.

ROOT = Path(__file__).resolve().parent.parent
SERVER = ["-m", "agents_ide.serve", "-b", "127.0.0.1"]
APPLICATION = "agents_ide.asgi:application"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values, q: float) -> float:
    """The `q` quantile (0..1) of `values`, nearest rank."""
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def p50_p95(values_ms) -> str:
    return f"p50 {statistics.median(values_ms):.1f} ms p95 {pct(values_ms, 0.95):.1f} ms"


def throwaway_sqlite(prefix: str) -> str:
    """Point this process (and the servers it starts) at a fresh SQLite database in a temp directory, no Redis."""
    os.environ["AGENTS_IDE_DATA_DIR"] = directory = tempfile.mkdtemp(prefix=prefix)
    os.environ.pop("DATABASE_URL", None)
    os.environ["REDIS_URL"] = ""
    return directory


def django_ready() -> None:
    """Set Django up in this process and migrate its database (the benches create their accounts here)."""
    import django
    from django.core.management import call_command

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agents_ide.settings")
    django.setup()
    call_command("migrate", verbosity=0)


def spawn(args: list[str], env: dict[str, str], name: str, procs: list[subprocess.Popen]) -> subprocess.Popen:
    """Start `python <args>` from the project's root, its output in <tmp>/bench-<name>.log; append it to `procs`."""
    with open(Path(tempfile.gettempdir()) / f"bench-{name}.log", "w") as log:
        proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    procs.append(proc)
    return proc


def cpu_split(pid: int) -> tuple[float, float]:
    """User and system CPU seconds a process has used so far (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) / os.sysconf("SC_CLK_TCK"), int(fields[12]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0, 0.0


def cpu_s(pid: int) -> float:
    """User + system CPU seconds a process has used so far."""
    return sum(cpu_split(pid))


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """A process's resident memory in MB (`VmRSS` now, `VmHWM` its peak), from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def wait_healthy(url: str, limit_s: float = 90) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"server {url} did not start")


def wait_idle(procs, quiet_s: float = 1.0, limit_s: float = 120) -> float:
    """Wait until the processes' start-up work (litellm's import, token encodings, the heap's freeze: seconds,
    in a background thread after /healthz already answers) is over: no process used more than 10 % of a core
    for `quiet_s`. Returns the seconds waited. Measuring earlier would charge that start-up to what is measured."""
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        before = [cpu_s(p.pid) for p in procs]
        time.sleep(quiet_s)
        if all(cpu_s(p.pid) - b <= 0.1 * quiet_s for p, b in zip(procs, before, strict=True)):
            break
    return time.monotonic() - started


def stop_all(procs) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.wait(timeout=20)


@contextlib.contextmanager
def live_server(env: dict[str, str], name: str, *, start_s: float = 90):
    """A server process (`agents_ide.serve`, the project's ASGI application) on a free port with `env`, healthy
    within `start_s` and past its start-up work; yields (base URL, process). Terminated on exit."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []
    try:
        spawn([*SERVER, "-p", str(port), APPLICATION], {"ALLOWED_HOSTS": "127.0.0.1,localhost", **env}, name, procs)
        wait_healthy(base, start_s)
        wait_idle(procs)
        yield base, procs[0]
    finally:
        stop_all(procs)


def timed_gets(base: str, token: str, count: int, stop: threading.Event | None = None, path="/v1/agents/"):
    """Times in ms of `GET path` as `token`'s account: `count` of them, or until `stop` is set."""
    import httpx

    out = []
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=120) as client:
        while len(out) < count and not (stop and stop.is_set()):
            started = time.perf_counter()
            client.get(path).raise_for_status()
            out.append((time.perf_counter() - started) * 1000)
    return out


@contextlib.contextmanager
def bystander(base: str, token: str, path: str = "/v1/agents/"):
    """Another account's `GET path`, one after another in a thread while the block runs; yields the list their
    times (ms) are added to."""
    stop = threading.Event()
    times: list[float] = []
    watcher = threading.Thread(target=lambda: times.extend(timed_gets(base, token, 10**9, stop, path)))
    watcher.start()
    try:
        yield times
    finally:
        stop.set()
        watcher.join()
