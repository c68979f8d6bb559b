"""A run's trace as Letta's `GET /v1/runs/{id}/trace` answers it (letta/server/rest_api/routers/v1/runs.py: rows of
ClickHouse's `otel_traces` table, only the spans its trace viewer shows: the root span, `agent_step` spans and
`*._execute_tool` spans, oldest first). Letta reads them from ClickHouse; here they are built from what the run
stored (its row, its steps' timings, its tool runs), so the route answers without a trace store. The ids are
derived from the run's and steps' ids, so a trace reads the same every time."""

import hashlib
from datetime import timedelta

from core.models import Message, Run, RunStatus, Step

SERVICE = "agents-ide"


def _hex(value: str, chars: int) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:chars]


def _span(*, trace_id, span_id, parent, name, start, duration_ms, attributes, error="") -> dict:
    return {
        "Timestamp": start.isoformat(),
        "TraceId": trace_id,
        "SpanId": span_id,
        "ParentSpanId": parent,
        "TraceState": "",
        "SpanName": name,
        "SpanKind": "Server" if not parent else "Internal",
        "ServiceName": SERVICE,
        "ScopeName": "agents_ide",
        "SpanAttributes": {k: str(v) for k, v in attributes.items() if v not in (None, "")},
        "Duration": round((duration_ms or 0) * 1_000_000),
        "StatusCode": "Error" if error else "Ok",
        "StatusMessage": error,
    }


def run_trace(*, run: Run, limit: int = 1000) -> list[dict]:
    """The run's spans, oldest first, at most `limit`: the run, each step, each tool the steps ran."""
    trace_id = _hex(run.id, 32)
    root = _hex(run.id, 16)
    end = run.completed_at or run.created_at
    spans = [
        _span(
            trace_id=trace_id,
            span_id=root,
            parent="",
            name="run",
            start=run.created_at,
            duration_ms=(end - run.created_at).total_seconds() * 1000,
            attributes={"run_id": run.id, "agent_id": run.agent_id, "stop_reason": run.stop_reason},
            error=run.error if run.status == RunStatus.FAILED else "",
        )
    ]
    steps = list(
        Step.objects.filter(run=run)
        .order_by("index")
        .only("id", "index", "model", "total_ms", "created_at", "error", "run_id", "agent_id", "kind")
    )
    tools_of: dict[str, list[Message]] = {}
    for row in (
        Message.objects.filter(step__in=steps, role="tool")
        .order_by("seq")
        .only("id", "step_id", "name", "tool_call_id", "tool_return", "created_at")
    ):
        tools_of.setdefault(row.step_id, []).append(row)
    for step in steps:
        span_id = _hex(step.id, 16)
        spans.append(
            _span(
                trace_id=trace_id,
                span_id=span_id,
                parent=root,
                name="agent_step",
                start=step.created_at - timedelta(milliseconds=step.total_ms),
                duration_ms=step.total_ms,
                attributes={"step_id": step.id, "step_index": step.index, "model": step.model, "kind": step.kind},
                error=step.error,
            )
        )
        for row in tools_of.get(step.id, []):
            spans.append(_tool_span(row, trace_id=trace_id, parent=span_id))
    return spans[:limit]


def _tool_span(row: Message, *, trace_id: str, parent: str) -> dict:
    """A tool's execution, from the tool message it returned (its status, duration and error output)."""
    ret = row.tool_return or {}
    failed = ret.get("status") == "error"
    return _span(
        trace_id=trace_id,
        span_id=_hex(row.id, 16),
        parent=parent,
        name="ToolExecutionManager._execute_tool",
        start=row.created_at - timedelta(milliseconds=ret.get("duration_ms") or 0),
        duration_ms=ret.get("duration_ms") or 0,
        attributes={"tool_name": row.name, "tool_call_id": row.tool_call_id, "sandbox": ret.get("sandbox")},
        error=str(ret.get("stderr") or "error")[:1000] if failed else "",
    )
