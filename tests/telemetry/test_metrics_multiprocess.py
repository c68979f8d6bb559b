"""With PROMETHEUS_MULTIPROC_DIR, what several processes count (web processes, workers) is summed in one scrape.
prometheus-client chooses its multiprocess storage when imported, so each process here is a fresh interpreter."""

import os
import subprocess
import sys
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[2]
COUNT = """
from core.telemetry import metrics
metrics.RUNS.labels("completed", "end_turn").inc()
metrics.STEP_SECONDS.observe(0.05)
metrics.WEBSOCKETS.inc()
"""
SCRAPE = """
from prometheus_client import generate_latest
from core.telemetry import metrics
print(generate_latest(metrics.process_registry()).decode())
"""


def _python(code: str, env: dict) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _scrape(env: dict) -> dict:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(_python(SCRAPE, env))
        for s in family.samples
    }


def test_a_scrape_sums_what_every_process_counted_and_only_live_processes_connections(tmp_path):
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    _python(COUNT, env)  # a process that counted and ended, say a worker, its websocket never closed (a crash)
    live = subprocess.Popen(  # one still running, say a web process
        [sys.executable, "-c", COUNT + "print('counted', flush=True)\nimport sys\nsys.stdin.read()"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert live.stdout.readline() == "counted\n"
        samples = _scrape(env)
        assert samples[("agents_ide_runs_total", (("status", "completed"), ("stop_reason", "end_turn")))] == 2
        assert samples[("agents_ide_step_duration_seconds_count", ())] == 2
        assert samples[("agents_ide_websocket_connections", ())] == 1  # the ended process's is not counted
        assert (tmp_path / f"gauge_livesum_{live.pid}.db").exists()
    finally:
        live.kill()
        live.wait()
    samples = _scrape(env)
    assert samples[("agents_ide_websocket_connections", ())] == 0
    assert samples[("agents_ide_runs_total", (("status", "completed"), ("stop_reason", "end_turn")))] == 2
    assert not (tmp_path / f"gauge_livesum_{live.pid}.db").exists()
