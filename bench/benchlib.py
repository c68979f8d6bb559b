"""What the benchmarks share: the machine's speed printed beside their figures, and a scratch PostgreSQL database.
The scripts run as files (`python bench/x.py`), so this is imported by its bare name."""

import subprocess
import sys

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
