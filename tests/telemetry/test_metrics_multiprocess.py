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


def test_a_scrape_sums_what_every_process_counted(tmp_path):
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    for _ in range(2):  # two processes, say a web process and a worker
        _python(COUNT, env)
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(_python(SCRAPE, env))
        for s in family.samples
    }
    assert samples[("agents_ide_runs_total", (("status", "completed"), ("stop_reason", "end_turn")))] == 2
    assert samples[("agents_ide_step_duration_seconds_count", ())] == 2
    assert samples[("agents_ide_websocket_connections", ())] == 2
    assert len(list(tmp_path.iterdir())) >= 2  # one file per process and kind of metric
