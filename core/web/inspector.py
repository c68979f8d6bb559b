"""The inspector: the next request and any past step as readable parts with token counts, and what changed
in the context since the step before. Thin: read through selectors, shape with core.web.payload, render."""

import json

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.template.response import TemplateResponse
from django.views.decorators.http import require_POST

from core import selectors
from core.agents import run_view
from core.agents.context import agent_context
from core.agents.steps import step_feedback_set
from core.errors import Invalid, NotFound
from core.models import Message
from core.runs.timetravel import token_calibration
from core.web.common import agent_or_404, thread_or_404
from core.web.payload import SECTION_COLORS, SECTION_LABELS, payload_diff, payload_parts
from core.web.waits import model_call_wait
from memory.selectors import agent_blocks


def context_view_model(ctx, *, limit: int | None = None, blocks=(), calibration: dict | None = None) -> dict:
    """The stacked bar's rows (tokens per section and their share of the window) and the next request's parts;
    with a calibration (our counts against the provider's), the bar draws calibrated counts, the raw ones kept."""
    limit = limit or ctx.context_window
    ratio = (calibration or {}).get("ratio") if (calibration or {}).get("steps") else None
    scale = (lambda n: round(n * ratio)) if ratio else (lambda n: n)  # noqa: E731
    rows = [
        {
            "name": s.name,
            "label": SECTION_LABELS.get(s.name, s.name),
            "color": SECTION_COLORS.get(s.name, "system"),
            "tokens": scale(s.tokens),
            "raw": s.tokens,
            "pct": round(100 * scale(s.tokens) / max(limit, 1), 2),
        }
        for s in ctx.sections
    ]
    total = sum(r["tokens"] for r in rows) if ratio else ctx.total_tokens
    sections = [{"name": s.name, "tokens": s.tokens, "text": s.text} for s in ctx.sections]
    model = ctx.request.get("model", "")
    evictable = sum(s.tokens for s in ctx.sections if s.name in ("messages", "summary"))
    return {
        "rows": rows,
        "total": total,
        "raw_total": ctx.total_tokens,
        "calibration": calibration if ratio else None,
        "limit": limit,
        "tokenizer": ctx.tokenizer,
        "fixed": ctx.total_tokens - evictable,
        "fixed_over": ctx.total_tokens - evictable >= limit,
        "free": limit - total,
        "over": ctx.total_tokens > limit,
        "pct": round(100 * total / max(limit, 1), 1),
        "parts": payload_parts(model=model, request=ctx.request, sections=sections, blocks=blocks),
        "request_json": json.dumps(ctx.request, indent=2, ensure_ascii=False),
    }


@login_required
def context_panel(request, agent_id: str):
    """The context window breakdown and the next call's exact payload (read-only)."""

    agent = thread_or_404(request, agent_or_404(request, agent_id))
    view = context_view_model(
        agent_context(agent=agent),
        blocks=agent_blocks(agent=agent),
        calibration=token_calibration(owner=agent.owner, model=agent.model),
    )
    held = model_call_wait(agent=agent)  # the simulator then compiles the call that run is held before
    ctx = {"agent": agent, "context": view, "held_run_id": held.id if held else None}
    if held is not None:  # its card in the conversation says the size of this call (an out-of-band swap)
        ctx["held_card"] = {
            "run_id": held.id,
            "why": (held.waiting or {}).get("why") or "",
            "tokens": view["raw_total"],
        }
    return TemplateResponse(request, "core/_context.html", ctx)


def _step_parts(step):
    return payload_parts(model=step.model, request=step.request or {}, sections=step.context_sections or [])


@login_required
def step_detail(request, agent_id: str, step_id: str):
    """The payload actually sent at a past step, its response and usage, and what changed since the step before;
    `?call=`: that call's result is pointed at (highlighted, brought into view and focused: data-reveal)."""
    agent = agent_or_404(request, agent_id)
    try:
        step = selectors.agent_step_get(agent=agent, step_id=step_id)
    except NotFound as exc:
        raise Http404(str(exc)) from exc
    prev, after = selectors.step_previous(step=step), selectors.step_next(step=step)
    numbers = run_view.step_numbers_of(step_ids={s.id for s in (step, prev, after) if s is not None})
    for s in (step, prev, after):
        if s is not None:
            s.number = numbers.get(s.id)
    parts = _step_parts(step)
    before = {s["name"]: s.get("tokens", 0) for s in (prev.context_sections if prev else [])}
    rows = [
        {
            "name": s["name"],
            "label": SECTION_LABELS.get(s["name"], s["name"]),
            "tokens": s.get("tokens", 0),
            "delta": s.get("tokens", 0) - before.get(s["name"], 0) if prev else None,
        }
        for s in step.context_sections or []
    ]
    return TemplateResponse(
        request,
        "core/_step.html",
        {
            "agent": agent,
            "step": step,
            "number": step.number,
            "prev": prev,
            "rows": rows,
            "parts": parts,
            "diff": payload_diff(_step_parts(prev), parts) if prev else None,
            "next": after,
            "next_diff": payload_diff(parts, _step_parts(after)) if after else None,
            "total_tokens": sum(p.tokens for p in parts),
            "request_json": json.dumps(step.request, indent=2, ensure_ascii=False),
            "response_json": json.dumps(step.response, indent=2, ensure_ascii=False),
            "usage": step.usage or {},
            "estimate_diff": _estimate_diff(step.usage or {}),
            "tool_results": step_tool_results(step=step),
            "call": request.GET.get("call"),  # a call to point at (a block change's "show the call")
        },
    )


def _pretty(value) -> str:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    if isinstance(value, dict):
        value = {k: v for k, v in value.items() if k != "thinking"}
    return json.dumps(value, indent=2, ensure_ascii=False)


def step_tool_results(*, step) -> list[dict]:
    """The tool results this step's calls got, in order: name, status, and — for a call a person edited at a
    breakpoint or an approval (`tool_return["arguments"]`) — the arguments it ran with beside the model's."""
    rows = list(Message.objects.filter(step_id=step.id, role__in=("assistant", "tool")).order_by("seq"))
    asked = {c.get("id"): c for r in rows if r.role == "assistant" for c in r.tool_calls or () if isinstance(c, dict)}
    out = []
    for row in rows:
        if row.role != "tool":
            continue
        ret = row.tool_return or {}
        call = asked.get(row.tool_call_id) or {}
        edited = ret.get("arguments")
        out.append(
            {
                "name": row.name or call.get("name") or "?",
                "tool_call_id": row.tool_call_id,
                "status": ret.get("status") or "success",
                "denied": bool(ret.get("denied")),
                "edited": edited is not None,
                "arguments": _pretty(edited if edited is not None else call.get("arguments") or "{}"),
                "asked": _pretty(call.get("arguments") or "{}") if edited is not None else "",
                "text": row.body,
            }
        )
    return out


def _estimate_diff(usage: dict) -> int | None:
    """How many prompt tokens the provider counted beyond our own estimate (negative: fewer)."""
    ours, theirs = usage.get("estimated_prompt_tokens"), usage.get("prompt_tokens")
    return theirs - ours if ours and theirs is not None else None


@login_required
@require_POST
def step_feedback(request, agent_id: str, step_id: str):
    """Set a person's feedback on a past step (`feedback`: positive, negative, or empty to clear; `comment`) and
    answer with the step view's feedback form as it now is."""
    agent = agent_or_404(request, agent_id)
    try:
        step = selectors.agent_step_get(agent=agent, step_id=step_id)
        step = step_feedback_set(
            step=step, feedback=request.POST.get("feedback") or None, comment=request.POST.get("comment", "")
        )
    except NotFound as exc:
        raise Http404(str(exc)) from exc
    except Invalid as exc:
        return TemplateResponse(
            request, "core/_step_feedback.html", {"agent": agent, "step": step, "error": exc.message}
        )
    return TemplateResponse(request, "core/_step_feedback.html", {"agent": agent, "step": step, "saved": True})
