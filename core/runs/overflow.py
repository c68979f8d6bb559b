"""Context overflow: evict the oldest in-context messages, summarize (or just drop) them, keep going.

Triggered before a call when the compiled context reaches the eviction threshold (90 % of the window), and
reactively on a provider context-length error. Evicted messages stay in the database (recall memory). The same
eviction and summary also run on request (`agent_compact`, Letta's summarize), per the agent's compaction settings.
"""

import re
import time
from dataclasses import dataclass

from django.db import transaction

from core import ids
from core.agents.context import agent_snapshot
from core.agents.messages import messages_to_letta
from core.engine import loop, tokens
from core.engine.types import CompiledContext
from core.errors import Busy, DomainError
from core.events import agent_group, send_events
from core.llm import client as llm
from core.models import RUN_ACTIVE, Agent, Run
from core.providers import model_resolve
from core.runs import persistence

AFTER_EVICTION_FRACTION = 0.6
_HIDDEN = re.compile(r"^Note: (\d+) messages from the beginning")
_SUMMARY_SPLIT = "The following is a summary of the previous messages: "


class ContextTooLarge(Exception):
    """Even with every evictable message gone the context does not fit; str() explains what takes the room."""


def fixed_tokens(ctx: CompiledContext) -> int:
    """Tokens that eviction cannot reduce: system prompt, rules, memory, metadata, tool definitions."""
    by_name = {s.name: s.tokens for s in ctx.sections}
    return ctx.total_tokens - by_name.get("messages", 0) - by_name.get("summary", 0)


_PARTS = {  # a section of the context: what it is called, and what to do when it is the biggest part
    "system": ("the system prompt", "Shorten the system prompt or raise context_window_limit."),
    "tool_rules": ("the tool rules", "Remove tool rules or raise context_window_limit."),
    "core_memory": (
        "the core memory blocks",
        "Shorten memory blocks (or lower their limits) or raise context_window_limit.",
    ),
    "memory_metadata": ("the memory metadata", "Raise context_window_limit."),
    "tools": ("the tool definitions", "Detach tools the agent does not need or raise context_window_limit."),
}


def too_large_message(ctx: CompiledContext, pending=()) -> str:
    """Why a turn cannot fit, naming its biggest part and what to do: a section that cannot shrink (the system prompt,
    memory blocks, tool definitions) or a message of the turn itself (`pending`: its unsaved rows)."""
    by_name = {s.name: s.tokens for s in ctx.sections}
    parts = [(by_name.get(name, 0), label, advice) for name, (label, advice) in _PARTS.items()]
    for row in pending:
        text = row.text or ""
        what = "your message" if row.role == "user" and not row.kind else f"the {row.kind or row.role} message"
        parts.append(
            (
                row.token_count,
                f"{what} ({len(text):,} characters)",
                "Send it in smaller parts, or give the agent the document to search instead of pasting it "
                "(archival memory, or a folder of files).",
            )
        )
    tokens, label, advice = max(parts, key=lambda p: p[0])
    needed = fixed_tokens(ctx) + sum(r.token_count for r in pending)
    head = f"The context window ({ctx.context_window:,} tokens) is too small for this turn: it needs {needed:,} tokens"
    return f"{head} even with older messages evicted. The biggest part is {label}: {tokens:,} tokens. {advice}"


def _previous(summary) -> tuple[int, str | None]:
    if summary is None:
        return 0, None
    m = _HIDDEN.match(summary.content)
    text = summary.content.split(_SUMMARY_SPLIT, 1)[1] if _SUMMARY_SPLIT in summary.content else None
    return (int(m.group(1)) if m else 0), text


def _summarizer_request(model: str, evicted, previous: str | None, window: int) -> dict:
    words = max(50, min(300, window // 20))
    max_chars = max(1000, window * 2)
    while True:
        request = loop.build_summarizer_request(
            model=model,
            evicted=evicted,
            previous_summary=previous,
            max_words=words,
            max_chars=max_chars,
            per_message_chars=max_chars // 4,
        )
        used = sum(tokens.count_message(model, m) for m in request["messages"]) + tokens.REPLY_PRIMING_TOKENS
        if used + words * 2 <= window or max_chars <= 200:
            request["max_tokens"] = words * 2
            return request
        max_chars //= 2


def _summarize(*, snap, evicted, previous: str | None, resolved, run, step_index: int, prompt: str | None = None):
    """Ask the model for a summary (one LLM call, recorded as a summarizer step); None if the call failed. `prompt`
    replaces the summarizer's instructions (Letta's compaction_settings.prompt)."""
    model = snap.spec.model
    request = _summarizer_request(
        model, evicted, previous, tokens.context_window(model, snap.spec.context_window_limit)
    )
    if prompt:
        request["messages"][0] = {"role": "system", "content": prompt}
    step_id = ids.new_id("step")
    started = time.perf_counter()
    try:
        result = llm.complete(
            {**request, "model": resolved.litellm_model},
            api_base=resolved.api_base,
            api_key=resolved.api_key,
            guarded=resolved.guarded,
        )
        text, error, raw, usage = (result.content or "").strip(), "", result.raw, persistence.usage_dict(result.usage)
    except llm.LLMError as exc:
        text, error, raw, usage = "", exc.message, {}, {}
    elapsed = (time.perf_counter() - started) * 1000
    return step_id, request, raw, usage, elapsed, text, error


def evict(
    *, snap, ctx: CompiledContext, extra_tokens: int, resolved, run, step_index: int, force: bool = False, pending=()
):
    """Evict the oldest messages so the context drops to ~60 % of the window, summarize them, and commit.

    Writes a summary message and (for "summarize") a summarizer step; one LLM call; raises ContextTooLarge.
    Returns the new summary row, or None when nothing could be evicted.
    """
    window = ctx.context_window
    fixed = fixed_tokens(ctx)
    if fixed + extra_tokens >= window:
        raise ContextTooLarge(too_large_message(ctx, pending))
    summary_reserve = max(50, min(400, window // 8))
    target = int(window * AFTER_EVICTION_FRACTION) - fixed - summary_reserve - extra_tokens
    if force:
        target = min(target, ctx.section("messages").tokens // 2)
    plan = loop.plan_eviction(snap.body, max(0, target), min_keep=0 if extra_tokens else 1)
    if not plan.evict:
        return None
    hidden, previous = _previous(snap.summary)
    hidden += len(plan.evict)
    step = None
    if snap.agent.overflow_strategy == "summarize":
        step = _summarize(
            snap=snap, evicted=list(plan.evict), previous=previous, resolved=resolved, run=run, step_index=step_index
        )
    summary_text = step[5] if step and step[5] else (previous or "")
    if summary_text:
        text = loop.summary_message_text(hidden, summary_text)
    else:
        text = (
            f"Note: {hidden} messages from the beginning of the conversation have been hidden from view due to "
            f"memory constraints. Use conversation_search to recall them."
        )
    return _commit(
        snap=snap, run=run, evicted_ids={m.id for m in plan.evict}, text=text, step=step, step_index=step_index
    )


def _commit(*, snap, run, evicted_ids: set[str], text: str, step, step_index: int):
    with transaction.atomic(durable=True):
        agent = persistence.thread_lock(snap.agent)
        step_row = None
        if step is not None:
            step_id, request, raw, usage, elapsed, _, error = step
            step_row = persistence.step_record(
                run=run,
                agent=agent,
                step_id=step_id,
                index=step_index,
                kind="summarizer",
                request=request,
                response=raw,
                usage=usage,
                model_ms=elapsed,
                total_ms=elapsed,
                error=error,
            )
        row = persistence.message_build(agent=agent, role="user", text=text, kind="summary")
        persistence.messages_store(agent=agent, rows=[row], run=run, step=step_row)
        if snap.summary is not None:
            evicted_ids.add(snap.summary.id)
        current = list(agent.message_ids)
        window = current[:1] + [row.id] + [i for i in current[1:] if i not in evicted_ids]
        persistence.window_set(agent_id=agent.id, message_ids=window, conversation_id=agent.thread)
    return row


# --------------------------------------------------------------------------- compaction on request


COMPACTION_DEFAULTS = {
    "model": None,
    "model_settings": None,
    "prompt": None,
    "prompt_acknowledgement": False,
    "clip_chars": 50_000,
    "mode": "sliding_window",
    "sliding_window_percentage": 0.3,
}
NOT_REDUCED = (
    "Summarization failed to reduce the number of messages. You may not have enough messages to compact or need to "
    "use a different CompactionSettings (e.g. using `all` mode)."
)


class NotCompacted(DomainError):
    """Nothing could be evicted (Letta answers 400)."""

    status = 400


class SummaryFailed(DomainError):
    """The summarizer's model call failed; nothing was changed."""

    status = 502


@dataclass(frozen=True)
class Compaction:
    summary: str | None
    num_messages_before: int
    num_messages_after: int


def compaction_settings_set(*, agent: Agent, settings: dict | None) -> Agent:
    """Replace the agent's compaction settings (Letta's update replaces the whole object; None clears them). One
    UPDATE of that field; the agent's definition version is not changed by it."""
    agent.compaction_settings = dict(settings or {})
    Agent.objects.filter(pk=agent.pk).update(compaction_settings=agent.compaction_settings)
    return agent


def compaction_settings_merged(agent: Agent, overrides: dict | None) -> dict:
    """The settings a compaction uses: defaults, then the agent's, then the fields a request set explicitly. A new
    `mode` without a `prompt` of its own goes back to the default prompt (Letta: that mode's default)."""
    merged = {**COMPACTION_DEFAULTS, **(agent.compaction_settings or {})}
    overrides = dict(overrides or {})
    if "mode" in overrides and "prompt" not in overrides:
        merged["prompt"] = None
    return {**merged, **overrides}


def _compaction_plan(body, settings: dict):
    if settings["mode"] in ("all", "self_compact_all"):
        return loop.plan_eviction(body, 0, min_keep=0)
    held = sum(m.token_count for m in body)
    share = min(1.0, max(0.0, float(settings["sliding_window_percentage"] or 0.0)))
    return loop.plan_eviction(body, held - max(1, int(held * share)), min_keep=1)


def agent_compact(*, agent: Agent, conversation_id: str | None = None, overrides: dict | None = None) -> Compaction:
    """Compact one thread's in-context messages now (Letta's `POST /agents/{id}/summarize`; with `conversation_id`,
    a conversation's `…/compact`): evict per the compaction mode, summarize the evicted messages in one LLM call
    outside any transaction, then store the summary message (and the summarizer step) and the new window in one
    durable transaction under the agent's lock; tabs get a context_update after it commits.

    Conflict while a run of the agent is active; NotCompacted when nothing can be evicted (for the agent's own
    thread, only a system message and a summary in context answers the existing summary with equal counts);
    NotConfigured when no provider serves the summarizer's model; SummaryFailed when its call fails.
    """
    busy = Run.objects.filter(agent_id=agent.pk, status__in=RUN_ACTIVE).values_list("id", flat=True).first()
    if busy is not None:
        raise Busy(f"The agent is busy with run '{busy}'; cancel it or wait for it before compacting.", run_id=busy)
    snap = agent_snapshot(agent=persistence.thread_view(agent, conversation_id))
    before = len(snap.agent.message_ids or [])
    hidden, previous = _previous(snap.summary)
    if not snap.body:
        if conversation_id is not None:
            raise NotCompacted("No in-context messages found for this conversation.")
        return Compaction(previous, before, before)
    settings = compaction_settings_merged(agent, overrides)
    plan = _compaction_plan(snap.body, settings)
    if not plan.evict:
        raise NotCompacted(NOT_REDUCED)
    own_model = settings["mode"].startswith("self_compact") or not settings["model"]
    resolved = model_resolve(owner=agent.owner, handle=snap.agent.model if own_model else settings["model"])
    step = _summarize(
        snap=snap,
        evicted=list(plan.evict),
        previous=previous,
        resolved=resolved,
        run=None,
        step_index=0,
        prompt=settings["prompt"],
    )
    summary = step[5]
    if not summary:
        raise SummaryFailed(f"Summarization failed: {step[6] or 'the model returned no summary'}")
    if settings["clip_chars"]:
        summary = summary[: int(settings["clip_chars"])]
    text = loop.summary_message_text(hidden + len(plan.evict), summary)
    row = _commit(snap=snap, run=None, evicted_ids={m.id for m in plan.evict}, text=text, step=step, step_index=0)
    after = persistence.thread_view(Agent.objects.get(pk=agent.pk), conversation_id).message_ids
    _announce_compaction(agent.id, row, snap.spec.agent_type)
    return Compaction(summary, before, len(after or []))


def _announce_compaction(agent_id: str, row, agent_type: str) -> None:
    events = [*messages_to_letta([row], agent_type=agent_type), {"message_type": "context_update", "reason": "summary"}]
    send_events(agent_group(agent_id), events)
