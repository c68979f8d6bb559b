"""Context overflow: evict the oldest in-context messages, summarize (or just drop) them, keep going.

Triggered before a call when the compiled context reaches the eviction threshold (90 % of the window), and
reactively on a provider context-length error. Evicted messages stay in the database (recall memory).
"""

import re
import time

from django.db import transaction

from core import ids
from core.engine import llm, loop, tokens
from core.engine.types import CompiledContext
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


def too_large_message(ctx: CompiledContext) -> str:
    by_name = {s.name: s.tokens for s in ctx.sections}
    return (
        f"The context window ({ctx.context_window} tokens) is too small for this agent: its system prompt, memory "
        f"blocks and tool definitions alone take {fixed_tokens(ctx)} tokens (system {by_name.get('system', 0)}, "
        f"core memory {by_name.get('core_memory', 0)}, tools {by_name.get('tools', 0)}). Raise "
        f"context_window_limit, shorten memory blocks or detach tools."
    )


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


def _summarize(*, snap, evicted, previous: str | None, resolved, run, step_index: int):
    """Ask the model for a summary (one LLM call, recorded as a summarizer step); None if the call failed."""
    model = snap.spec.model
    request = _summarizer_request(
        model, evicted, previous, tokens.context_window(model, snap.spec.context_window_limit)
    )
    step_id = ids.new_id("step")
    started = time.perf_counter()
    try:
        result = llm.complete(
            {**request, "model": resolved.litellm_model}, api_base=resolved.api_base, api_key=resolved.api_key
        )
        text, error, raw, usage = (result.content or "").strip(), "", result.raw, persistence.usage_dict(result.usage)
    except llm.LLMError as exc:
        text, error, raw, usage = "", exc.message, {}, {}
    elapsed = (time.perf_counter() - started) * 1000
    return step_id, request, raw, usage, elapsed, text, error


def evict(*, snap, ctx: CompiledContext, extra_tokens: int, resolved, run, step_index: int, force: bool = False):
    """Evict the oldest messages so the context drops to ~60 % of the window, summarize them, and commit.

    Writes a summary message and (for "summarize") a summarizer step; one LLM call; raises ContextTooLarge.
    Returns the new summary row, or None when nothing could be evicted.
    """
    window = ctx.context_window
    fixed = fixed_tokens(ctx)
    if fixed + extra_tokens >= window:
        raise ContextTooLarge(too_large_message(ctx))
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
