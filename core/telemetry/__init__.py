"""Telemetry: OpenTelemetry traces of runs (tracing.py), Prometheus metrics (metrics.py, served by views.py) and
structured logs carrying run, step, agent and request ids (logs.py, middleware.py). Off by default but for the
metrics, which cost a counter increment; see docs/observability.md."""
