"""Prometheus metrics. The counters and histograms are incremented where things happen (always on: an increment
costs well under a microsecond); `exposition` renders them for /metrics, with the gauges read from the database at
scrape time (queue depth, runs in progress, runs waiting). With PROMETHEUS_MULTIPROC_DIR set (several web and worker
processes), prometheus-client keeps each process's values in files there and the scrape sums them; the live gauges
(open websockets) of processes that are gone are dropped, so a crash does not leave its connections counted."""

import os
from collections.abc import Callable, Collection
from pathlib import Path

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily

if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    # A file a dead process of this pid left (a crash: it never decremented) would be read as this process's values.
    multiprocess.mark_process_dead(os.getpid())

_LATENCY = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)

RUNS = Counter("agents_ide_runs", "Runs ended, by status and stop reason.", ["status", "stop_reason"])
STEP_SECONDS = Histogram(
    "agents_ide_step_duration_seconds", "Wall time of a step (model call, tools, commit).", buckets=_LATENCY
)
MODEL_CALL_SECONDS = Histogram(
    "agents_ide_model_call_duration_seconds", "Wall time of a model call.", ["model", "outcome"], buckets=_LATENCY
)
TOKENS = Counter(
    "agents_ide_tokens", "Tokens the provider reported, by model and type (input, output).", ["model", "type"]
)
COST = Counter(
    "agents_ide_cost_usd", "Cost of steps in US dollars, by model (steps of unpriced models add nothing).", ["model"]
)
TOOL_RUNS = Counter("agents_ide_tool_runs", "Tool calls run in steps, by status and sandbox.", ["status", "sandbox"])
LEASE_SWEEPS = Counter("agents_ide_lease_sweeps", "Sweeps of lapsed run leases.")
RUNS_REAPED = Counter("agents_ide_runs_reaped", "Runs failed by a sweep because their lease lapsed.")
WEBSOCKETS = Gauge("agents_ide_websocket_connections", "Open IDE websocket connections.", multiprocess_mode="livesum")
ERRORS = Counter("agents_ide_errors", "Errors by kind (llm_<kind>, run_<exception>, http_5xx).", ["kind"])
HTTP_REQUESTS = Counter(
    "agents_ide_http_requests", "HTTP requests answered, by method and status.", ["method", "status"]
)
SPANS_DROPPED = Counter(
    "agents_ide_trace_spans_dropped",
    "Trace spans dropped rather than exported (queue_full, export_failed).",
    ["reason"],
)


# The model handles that are label values by name: the operator's configured models, handed down at start by
# core/apps.py (core.providers sits above this module). Each label value is a series every process keeps for good,
# so a model a tenant named (its own provider's, any handle typed into an agent) is counted as "other".
operator_models: Callable[[], Collection[str]] = frozenset


def model_label(model: str) -> str:
    """A model handle as a label: one of the operator's configured models, or "other"."""
    return model if model and model in operator_models() else "other"


class _DatabaseGauges:
    """Gauges counted in the database when scraped: every process sees the same queue, so one scrape counts it once."""

    def collect(self):
        from django.db.models import Q
        from django.utils import timezone

        # here: the model client imports this module before apps load
        from core.models import RUN_ACTIVE, QueuedTask, Run

        queued = GaugeMetricFamily("agents_ide_queue_depth", "Run tasks in the queue, not yet claimed by a worker.")
        due = Q(run_after=None) | Q(run_after__lte=timezone.now())
        queued.add_metric([], QueuedTask.objects.filter(due, status=QueuedTask.READY).count())
        yield queued
        active = GaugeMetricFamily("agents_ide_runs_in_progress", "Runs created or running.")
        active.add_metric([], Run.objects.filter(status__in=RUN_ACTIVE).count())
        yield active
        waiting = GaugeMetricFamily(
            "agents_ide_runs_waiting", "Runs waiting for an approval, a tool result or a person."
        )
        waiting.add_metric([], Run.objects.filter(waiting_until__isnull=False).count())
        yield waiting


def process_registry() -> CollectorRegistry:
    """The counters, histograms and gauges this module defines: with PROMETHEUS_MULTIPROC_DIR, every process's values
    summed (from the files they write there); else this process's, with prometheus-client's process metrics."""
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return REGISTRY
    _forget_the_dead(Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]))
    summed = CollectorRegistry()
    multiprocess.MultiProcessCollector(summed)
    return summed


def _forget_the_dead(directory: Path) -> None:
    """Drop the live gauges of processes that no longer run here (their counters and histograms stay summed: what
    they counted happened). The directory is one host's, as its process ids are."""
    for path in directory.glob("gauge_live*_*.db"):
        pid = path.stem.rpartition("_")[2]
        if pid.isdigit() and not _running(int(pid)):
            multiprocess.mark_process_dead(int(pid), str(directory))


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def exposition() -> tuple[bytes, str]:
    """The metrics in Prometheus' text format, and its content type. Reads three counts from the database."""
    database = CollectorRegistry(auto_describe=False)
    database.register(_DatabaseGauges())
    return generate_latest(process_registry()) + generate_latest(database), CONTENT_TYPE_LATEST
