"""What the runner, the tool runner and the model client call: each hook times its work for the metrics, binds its
ids for the logs and, when tracing is on, makes its span (none at all when it is off)."""

import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from core.telemetry import logs, metrics, tracing

log = logging.getLogger("agents_ide.runs")
_run_started: ContextVar[float] = ContextVar("telemetry_run_started", default=0.0)


@contextmanager
def run_span(run) -> Iterator[None]:
    """A run's execution: its log ids and, traced, the root span of its trace (trace id: the run id's UUID),
    linked to the run of the agent that messaged it, if one did. The request that started it is named by
    `request_id` / `user` bound in the logs context (`origin`), or by the request this thread answers."""
    bound = {"user": logs.request_user(), **logs.ids()}
    started = _run_started.set(time.perf_counter())
    try:
        with logs.bound(
            run_id=run.id, agent_id=run.agent_id, trace_id=tracing.trace_id_hex(run.id), user=bound.get("user")
        ):
            span = _root_span(run, bound)
            with trace.use_span(span, end_on_exit=True) if span is not None else nullcontext():
                yield
    finally:
        _run_started.reset(started)


def _root_span(run, bound: dict):
    """The run's root span, started (None when tracing is off)."""
    tracer = tracing.tracer()
    if tracer is None:
        return None
    attributes = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.id": run.agent_id,
        "agents_ide.run.id": run.id,
        "agents_ide.agent.id": run.agent_id,
        "agents_ide.owner.id": run.owner_id,
        "agents_ide.run.background": bool(run.background),
    }
    for key, name in (("request_id", "agents_ide.request.id"), ("user", "enduser.id")):
        if bound.get(key):
            attributes[name] = bound[key]
    links = []
    if run.parent_run_id and (parent := tracing.run_span_context(run.parent_run_id)) is not None:
        attributes["agents_ide.parent_run.id"] = run.parent_run_id
        links.append(Link(parent, {"agents_ide.link": "agent_message"}))
    token = tracing.forced(run.id)
    try:  # a root of its own (whatever span this thread is in), with the ids the run's id gives
        return tracer.start_span(
            "invoke_agent", context=Context(), kind=SpanKind.INTERNAL, attributes=attributes, links=links
        )
    finally:
        tracing.forced_reset(token)


def run_ended(run, *, stop_reason: str, steps: int, usage: dict) -> None:
    """Count the run's end, log one line for it and put its outcome on its span (called inside `run_span`)."""
    metrics.RUNS.labels(str(run.status), stop_reason).inc()
    took = (time.perf_counter() - _run_started.get()) * 1000 if _run_started.get() else None
    log.info(
        "run ended",
        extra={
            "status": str(run.status),
            "stop_reason": stop_reason,
            "steps": steps,
            "total_tokens": usage.get("total_tokens", 0),
            "cost_usd": usage.get("cost_usd"),
            "duration_ms": round(took, 1) if took is not None else None,
            "error": run.error or None,
        },
    )
    if tracing.tracer() is None:
        return
    span = trace.get_current_span()
    span.set_attributes(
        {
            "agents_ide.run.status": str(run.status),
            "agents_ide.run.stop_reason": stop_reason,
            "agents_ide.run.steps": steps,
            "gen_ai.usage.input_tokens": usage.get("prompt_tokens", 0),
            "gen_ai.usage.output_tokens": usage.get("completion_tokens", 0),
        }
    )
    if str(run.status) == "failed":  # (a cancelled run ended as asked: not an error)
        span.set_status(Status(StatusCode.ERROR, run.error or stop_reason))


def cost(model: str, usd: float | None) -> None:
    """Count a step's cost by model (a model without a known price adds nothing)."""
    if usd:
        metrics.COST.labels(metrics.model_label(model)).inc(usd)


def run_error(exc: BaseException) -> None:
    """Count an exception that failed a run."""
    metrics.ERRORS.labels(f"run_{type(exc).__name__}").inc()


@contextmanager
def step(index: int) -> Iterator[None]:
    """One step of the loop: its duration into the histogram and, traced, its span (its id comes later:
    `step_identify`)."""
    started = time.perf_counter()
    with logs.bound():  # the step's id, bound inside, ends with the step
        tracer = tracing.tracer()
        try:
            if tracer is None:
                yield
            else:
                with tracer.start_as_current_span(f"step {index}", attributes={"agents_ide.step.index": index}):
                    yield
        finally:
            metrics.STEP_SECONDS.observe(time.perf_counter() - started)


def step_identify(step_id: str) -> None:
    """Name the current step (its row's id) on its span and in the logs."""
    logs.bind(step_id=step_id)
    if tracing.tracer() is not None:
        trace.get_current_span().set_attribute("agents_ide.step.id", step_id)


def _phase(parent, name: str, start_ns: int, ms: float, attributes: dict) -> None:
    """A finished child span of `parent` from `start_ns` lasting `ms` (the first part of a call, measured by it)."""
    tracer = tracing.tracer()
    if tracer is None or parent is None:
        return
    span = tracer.start_span(
        name, context=trace.set_span_in_context(parent), start_time=start_ns, attributes=attributes
    )
    span.end(end_time=start_ns + round(ms * 1_000_000))


class ModelCall:
    """What a model call's hook records once the reply is in (`done`)."""

    def __init__(self, model: str, span, start_ns: int = 0):
        self.model, self.span, self.outcome, self.start_ns = model, span, "error", start_ns

    def done(self, result):
        """Record the reply's usage and finish reason; returns it."""
        self.outcome = "ok"
        usage = result.usage
        label = metrics.model_label(self.model)
        metrics.TOKENS.labels(label, "input").inc(usage.prompt_tokens or 0)
        metrics.TOKENS.labels(label, "output").inc(usage.completion_tokens or 0)
        if self.span is not None:
            attributes = {
                "gen_ai.usage.input_tokens": usage.prompt_tokens or 0,
                "gen_ai.usage.output_tokens": usage.completion_tokens or 0,
                "gen_ai.response.finish_reasons": [result.finish_reason or ""],
            }
            if result.model:
                attributes["gen_ai.response.model"] = result.model
            if (result.raw or {}).get("id"):
                attributes["gen_ai.response.id"] = str(result.raw["id"])
            if result.first_token_ms is not None:  # streamed: the wait for its first fragment, as a span of its own
                attributes["agents_ide.llm.first_token_ms"] = round(result.first_token_ms, 3)
                _phase(
                    self.span, "first_token", self.start_ns, result.first_token_ms, {"gen_ai.operation.name": "chat"}
                )
            if tracing.capture_content():
                attributes["gen_ai.output.messages"] = _json(
                    [
                        {
                            "role": "assistant",
                            "content": result.content or "",
                            "tool_calls": [
                                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in result.tool_calls
                            ],
                            "finish_reason": result.finish_reason or "",
                        }
                    ]
                )
            self.span.set_attributes(attributes)
        return result


def _json(value) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


@contextmanager
def model_call(request: dict, *, api_base: str | None, stream: bool) -> Iterator[ModelCall]:
    """A model call: its latency by model and outcome, token counts, errors by kind, and its span with OpenTelemetry's
    GenAI attributes (messages only with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true)."""
    handle = str(request.get("model", ""))
    system, _, name = handle.partition("/")
    started, start_ns = time.perf_counter(), time.time_ns()
    tracer = tracing.tracer()
    span = None
    if tracer is not None:
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.system": system if name else "",
            "gen_ai.provider.name": system if name else "",
            "gen_ai.request.model": name or handle,
            "agents_ide.llm.stream": stream,
        }
        for key in ("temperature", "max_tokens", "top_p"):
            if isinstance(request.get(key), int | float):
                attributes[f"gen_ai.request.{key}"] = request[key]
        if api_base:
            attributes["server.address"] = api_base
        if tracing.capture_content():
            attributes["gen_ai.input.messages"] = _json(request.get("messages") or [])
        span = tracer.start_span(
            f"chat {name or handle}", kind=SpanKind.CLIENT, attributes=attributes, start_time=start_ns
        )
    call = ModelCall(handle, span, start_ns)
    try:
        with trace.use_span(span, end_on_exit=True) if span is not None else nullcontext():
            try:
                yield call
            except Exception as exc:
                kind = getattr(exc, "kind", None) or type(exc).__name__
                metrics.ERRORS.labels(f"llm_{kind}").inc()
                if span is not None:
                    span.set_attribute("error.type", str(kind))
                raise
    finally:
        took = time.perf_counter() - started
        metrics.MODEL_CALL_SECONDS.labels(metrics.model_label(handle), call.outcome).observe(took)


class ToolCall:
    """What a tool call's hook records once it ran (`done`)."""

    def __init__(self, span, start_ns: int = 0):
        self.span, self.start_ns = span, start_ns

    def done(self, outcome):
        """Record the outcome (status, sandbox, duration, its sandbox's start, error); returns it."""
        status = "success" if outcome.ok else "error"
        metrics.TOOL_RUNS.labels(status, (outcome.sandbox or "unknown").split(":")[0]).inc()
        if self.span is not None:
            self.span.set_attributes(
                {
                    "agents_ide.tool.sandbox": outcome.sandbox or "",
                    "agents_ide.tool.duration_ms": round(outcome.duration_ms, 3),
                    "agents_ide.tool.status": status,
                }
            )
            if outcome.sandbox_start_ms is not None:  # starting the sandbox, before the tool's code ran
                self.span.set_attribute("agents_ide.tool.sandbox_start_ms", round(outcome.sandbox_start_ms, 3))
                attributes = {"agents_ide.tool.sandbox": outcome.sandbox or ""}
                _phase(self.span, "sandbox_start", self.start_ns, outcome.sandbox_start_ms, attributes)
            if not outcome.ok:
                self.span.set_attribute("error.type", "tool_error")
                self.span.set_status(Status(StatusCode.ERROR, outcome.value[:500]))
        return outcome


@contextmanager
def tool_call(name: str, call_id: str) -> Iterator[ToolCall]:
    """A tool call of a step (GenAI's execute_tool span when traced)."""
    tracer = tracing.tracer()
    if tracer is None:
        yield ToolCall(None)
        return
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": call_id}
    start_ns = time.time_ns()
    with tracer.start_as_current_span(f"execute_tool {name}", attributes=attributes, start_time=start_ns) as span:
        yield ToolCall(span, start_ns)


@contextmanager
def memory_edit(*, label: str, tool: str, agent_id: str) -> Iterator[None]:
    """A memory block written by a step's tool (traced only)."""
    tracer = tracing.tracer()
    if tracer is None:
        yield
        return
    attributes = {"agents_ide.block.label": label, "agents_ide.tool.name": tool, "agents_ide.agent.id": agent_id}
    with tracer.start_as_current_span("memory_edit", attributes=attributes):
        yield


def run_linked(run_id: str) -> None:
    """Link the current span (a multi-agent tool call) to the run it started in another agent."""
    if tracing.tracer() is None:
        return
    context = tracing.run_span_context(run_id)
    if context is not None:
        trace.get_current_span().add_link(context, {"agents_ide.link": "agent_message", "agents_ide.run.id": run_id})


def origin() -> dict:
    """The request ids a queued run carries to the thread that executes it (empty outside a request)."""
    bound = {"user": logs.request_user(), **logs.ids()}
    return {k: bound[k] for k in ("request_id", "user") if bound.get(k)}


def lease_swept(*, reaped: int) -> None:
    """Count a sweep of lapsed leases and the runs it failed."""
    metrics.LEASE_SWEEPS.inc()
    if reaped:
        metrics.RUNS_REAPED.inc(reaped)
