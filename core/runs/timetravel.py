"""Time travel: what a step was compiled from, replaying it on other models or edited state, forking at it.

Every agent step records its `state`: the agent spec, the blocks' values, the tools, the rules, the memory
statistics, the message ids in its window and the rules' choice of tools, exactly as the compiler got
them. Compiling that state again gives the stored request byte for byte, so a replay changes only what
its overrides change, and a fork starts from exactly what the model saw.
"""

import dataclasses
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from django.conf import settings
from django.db import connections, transaction
from django.utils import timezone

from core import mapping
from core.engine import types as t
from core.engine.context import compile_context
from core.engine.tokens import step_cost
from core.errors import Invalid
from core.llm import client as llm
from core.models import Agent, AgentTag, Message, Organization, Replay, Step
from core.providers import model_resolve
from core.selectors import owned_get
from memory.models import AgentBlock, Block, BlockHistory, Passage, PassageTag
from memory.selectors import agent_blocks
from tools.models import Tool

log = logging.getLogger(__name__)
MAX_REPLAY_MODELS = 8


# --------------------------------------------------------------------------- the state a step was compiled from


def _fields(obj) -> dict:
    """A flat dataclass's fields as a dict, without `dataclasses.asdict`'s deep copy (every step records this, and
    the values are only serialized)."""
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


def step_state(snap, allowed, pending) -> dict:
    """What the compiler got for this step (call before any tool runs: tools edit the snapshot's blocks)."""
    return {
        "spec": _fields(snap.spec),
        "blocks": [_fields(b) for b in snap.blocks],
        "tools": [_fields(x) for x in snap.tools],
        "rules": list(snap.agent.tool_rules or []),
        "stats": _fields(snap.stats),
        "summary_id": snap.summary.id if snap.summary is not None else None,
        "message_ids": [m.id for m in snap.body] + [r.id for r in pending],
        "allowed_tools": list(allowed.tools) if allowed.tools is not None else None,
        "tool_choice": allowed.tool_choice,
    }


def _state(step: Step) -> dict:
    if not step.state:
        raise Invalid(
            f"Step '{step.id}' was recorded before steps kept their state; it can be replayed only as it "
            "was sent (no system, block, message or tool overrides) and not forked."
        )
    return step.state


def _messages(ids: list[str]) -> dict[str, Message]:
    return {m.id: m for m in Message.objects.filter(id__in=ids)}


def state_compile(
    state: dict,
    *,
    system: str | None = None,
    blocks: dict[str, str] | None = None,
    drop: set[str] | frozenset = frozenset(),
    tools: list[t.ToolSpec] | None = None,
) -> t.CompiledContext:
    """Compile a recorded state again, with overrides (a new system prompt, block values by label, message ids
    to leave out, another tool list) — through the same compiler, so the token breakdown is real."""
    spec = t.AgentSpec(**state["spec"])
    if system is not None:
        spec = dataclasses.replace(spec, system=system)
    specs = [t.BlockSpec(**b) for b in state["blocks"]]
    unknown = set(blocks or {}) - {b.label for b in specs}
    if unknown:
        raise Invalid(
            f"No block labelled {', '.join(sorted(unknown))} at this step; it had "
            f"{', '.join(b.label for b in specs) or 'none'}."
        )
    specs = [dataclasses.replace(b, value=blocks[b.label]) if b.label in (blocks or {}) else b for b in specs]
    ids = [i for i in state["message_ids"] if i not in drop]
    rows = _messages(ids + ([state["summary_id"]] if state["summary_id"] else []))
    if any(i not in rows for i in ids):
        raise Invalid(
            "Some of this step's messages were never stored (its model call failed before its input was "
            "kept); it can be replayed only as it was sent."
        )
    summary = mapping.message(rows[state["summary_id"]]) if state["summary_id"] in rows else None
    messages = [mapping.message(rows[i]) for i in ids if i in rows]
    tool_specs = tools if tools is not None else [t.ToolSpec(**x) for x in state["tools"]]
    names = {x.name for x in tool_specs}
    allowed = state["allowed_tools"]
    if allowed is not None and tools is not None:
        allowed = [n for n in allowed if n in names] + [x.name for x in tool_specs if x.name not in allowed]
    rules = [t.tool_rule_from_dict(r) for r in state["rules"]]
    return compile_context(
        spec,
        specs,
        messages,
        tool_specs,
        rules,
        t.MemoryStats(**state["stats"]),
        allowed_tools=allowed,
        tool_choice=state["tool_choice"],
        summary=summary,
    )


# --------------------------------------------------------------------------- replay


def _tools_changed(owner: Organization, state: dict, add: list[str], remove: list[str]) -> list[t.ToolSpec] | None:
    if not add and not remove:
        return None

    current = [t.ToolSpec(**x) for x in state["tools"]]
    missing = set(remove) - {x.name for x in current}
    if missing:
        raise Invalid(f"The step offered no tool named {', '.join(sorted(missing))}.")
    found = {x.name: x for x in Tool.objects.filter(owner=owner, name__in=add)}
    unknown = set(add) - set(found)
    if unknown:
        raise Invalid(f"No tool named {', '.join(sorted(unknown))} in your tool library.")
    kept = [x for x in current if x.name not in set(remove)]
    return kept + [mapping.tool_spec(found[n]) for n in add if n not in {x.name for x in kept}]


def _one_model_thread(owner, handle: str, request: dict) -> dict:
    """`_one_model` on a thread of its own, which ends after: it closes its database connection (a pooled one
    goes back to the pool; Django tidies only the request's thread)."""
    try:
        return _one_model(owner, handle, request)
    finally:
        connections.close_all()


def _one_model(owner, handle: str, request: dict) -> dict:
    """Send the request to one model (outside any transaction); never raises: errors are part of the result."""

    out = {
        "model": handle,
        "request": None,
        "response": None,
        "content": None,
        "reasoning": None,
        "tool_calls": [],
        "usage": None,
        "cost_usd": None,
        "latency_ms": None,
        "error": None,
    }
    try:
        resolved = model_resolve(owner=owner, handle=handle)
        sent = {**request, "model": resolved.litellm_model}
        out["request"] = sent
        started = time.perf_counter()
        result = llm.complete(
            sent,
            api_base=resolved.api_base,
            api_key=resolved.api_key,
            timeout=settings.LLM_TIMEOUT_S,
            guarded=resolved.guarded,
        )
        out["latency_ms"] = round((time.perf_counter() - started) * 1000, 3)
    except llm.LLMError as exc:
        out["error"] = exc.message
        return out
    except Exception as exc:  # noqa: BLE001 - a model that cannot be reached is a result, not a failure of the rest
        out["error"] = getattr(exc, "message", None) or str(exc)
        return out
    usage = {
        "prompt_tokens": result.usage.prompt_tokens,
        "completion_tokens": result.usage.completion_tokens,
        "total_tokens": result.usage.total_tokens,
    }
    out.update(
        response=result.raw,
        content=result.content,
        reasoning=result.reasoning,
        usage=usage,
        tool_calls=[{"id": c.id, "name": c.name, "arguments": c.arguments} for c in result.tool_calls],
        cost_usd=step_cost(handle, usage),
    )
    return out


def _actual(step: Step) -> dict:
    message = ((step.response or {}).get("choices") or [{}])[0].get("message") or {}
    return {
        "model": step.model,
        "content": message.get("content"),
        "tool_calls": [
            {
                "id": c.get("id"),
                "name": (c.get("function") or {}).get("name"),
                "arguments": (c.get("function") or {}).get("arguments"),
            }
            for c in message.get("tool_calls") or []
        ],
        "usage": step.usage,
        "error": step.error or None,
    }


def step_replay(
    *,
    owner: Organization,
    step: Step,
    models: list[str] | None = None,
    system: str | None = None,
    blocks: dict[str, str] | None = None,
    drop_messages: list[str] | None = None,
    tools_add: list[str] | None = None,
    tools_remove: list[str] | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
) -> Replay:
    """Send a recorded step again (to each model concurrently, provider calls outside any transaction), with
    overrides; the agent is not touched. Stores and returns the replay."""
    if step.kind != "agent":
        raise Invalid("Only agent steps can be replayed (this one summarized evicted messages).")
    models = list(dict.fromkeys(models or [step.agent.model]))
    if len(models) > MAX_REPLAY_MODELS:
        raise Invalid(f"Replay on at most {MAX_REPLAY_MODELS} models at once.")
    recompile = system is not None or blocks or drop_messages or tools_add or tools_remove
    if recompile:
        state = _state(step)
        unknown = set(drop_messages or []) - set(state["message_ids"])
        if unknown:
            raise Invalid(f"Messages {', '.join(sorted(unknown))} were not in this step's context.")
        tools = _tools_changed(owner, state, list(tools_add or []), list(tools_remove or []))
        ctx = state_compile(state, system=system, blocks=blocks, drop=set(drop_messages or []), tools=tools)
        request, sections = ctx.request, [{"name": s.name, "tokens": s.tokens} for s in ctx.sections]
    else:
        request, sections = {k: v for k, v in step.request.items() if k != "model"}, step.context_sections
    if temperature is not None:
        request["temperature"] = temperature
    if max_tokens is not None:
        request["max_tokens"] = max_tokens
    with ThreadPoolExecutor(max_workers=len(models)) as pool:
        results = list(pool.map(lambda handle: _one_model_thread(owner, handle, request), models))
    overrides = {
        "models": models,
        "system": system,
        "blocks": blocks or None,
        "drop_messages": drop_messages or None,
        "tools_add": tools_add or None,
        "tools_remove": tools_remove or None,
        "temperature": temperature,
        "max_tokens": max_tokens,
    }
    return Replay.objects.create(
        owner=owner, step=step, overrides=overrides, sections=sections, results=results, actual=_actual(step)
    )


def step_get(*, owner: Organization, step_id: str) -> Step:
    return owned_get(Step.objects.select_related("agent"), owner=owner, id=step_id)


def replays_list(*, step: Step) -> list[Replay]:
    return list(Replay.objects.filter(step=step).order_by("-created_at"))


# --------------------------------------------------------------------------- fork


def _after_step_blocks(step: Step, state: dict) -> list[dict]:
    edits = {h.block_id: h.new_value for h in BlockHistory.objects.filter(step_id=step.id).order_by("version")}
    return [{**b, "value": edits.get(b["id"], b["value"])} for b in state["blocks"]]


def _edit_time(state: dict) -> datetime | None:
    text = state["stats"].get("last_memory_edit")
    if not text:
        return None
    return datetime.strptime(text, "%Y-%m-%d %I:%M:%S %p UTC").replace(tzinfo=UTC)


def _times_restore(created: dict) -> None:
    """Give copied messages their originals' times (auto_now_add stamped them now; recall search and the transcript
    need them): one update per distinct time, or one bulk update when there are many (its CASE costs more)."""
    by_time: dict = {}
    for message_id, stamp in created.items():
        by_time.setdefault(stamp, []).append(message_id)
    if len(by_time) > 20:
        rows = [Message(pk=message_id, created_at=stamp) for message_id, stamp in created.items()]
        Message.objects.bulk_update(rows, ["created_at"], batch_size=500)
        return
    for stamp, message_ids in by_time.items():
        Message.objects.filter(pk__in=message_ids).update(created_at=stamp)


def _copy(
    *,
    agent: Agent,
    name: str,
    metadata: dict,
    system: str,
    window: list[str],
    summary_id: str | None,
    blocks: list[dict],
    share_blocks: bool,
    blocks_edited_at: datetime | None,
    passages,
) -> Agent:
    """A new agent with the original's settings, tools, rules and tags, the given blocks and window, its messages
    up to the window's end (recall memory, same times) and the given passages. Caller holds a transaction."""

    keep = [summary_id, *window] if summary_id else list(window)
    rows = _messages(keep)
    last_seq = max((rows[i].seq for i in keep if i in rows), default=None)
    if last_seq is None:
        last_seq = Message.objects.filter(agent=agent).order_by("-seq").values_list("seq", flat=True).first() or 0
    first_seq = min((rows[i].seq for i in keep if i in rows), default=last_seq + 1)
    history = list(Message.objects.filter(agent=agent, seq__lte=last_seq).order_by("seq"))
    # The system message in force then: the last one written before the window starts (resets add new ones).
    system_row = next((m for m in reversed(history) if m.role == "system" and m.kind == "" and m.seq < first_seq), None)
    system_id = system_row.id if system_row else None
    ids = {m.id: Message._meta.get_field("id").get_default() for m in history}
    copy = Agent.objects.get(pk=agent.pk)
    copy.pk = None
    copy.id = Agent._meta.get_field("id").get_default()
    copy.name = name[:200]
    copy.system = system
    copy.metadata = metadata
    copy.message_ids = ([ids[system_id]] if system_id else []) + [ids[i] for i in keep if i in ids]
    copy.save(force_insert=True)
    AgentTag.objects.bulk_create(
        [AgentTag(agent=copy, tag=tag) for tag in agent.tag_rows.values_list("tag", flat=True)]
    )
    through = Tool.agents.through
    through.objects.bulk_create(
        through(tool_id=tool_id, agent_id=copy.id)
        for tool_id in through.objects.filter(agent_id=agent.id).values_list("tool_id", flat=True)
    )
    created = {}
    for m in history:
        created[ids[m.id]] = m.created_at
        m.pk, m.id, m.agent, m.run, m.step = None, ids[m.id], copy, None, None
    Message.objects.bulk_create(history)
    _times_restore(created)
    shared = Block.objects.in_bulk([b["id"] for b in blocks]) if share_blocks else {}
    made = Block.objects.bulk_create(
        Block(
            owner=agent.owner,
            label=b["label"],
            value=b["value"],
            limit=b["limit"],
            description=b.get("description") or "",
            read_only=b.get("read_only", False),
        )
        for b in blocks
        if b["id"] not in shared
    )
    if made and blocks_edited_at is not None:
        Block.objects.filter(pk__in=[block.pk for block in made]).update(updated_at=blocks_edited_at)
    fresh = iter(made)
    AgentBlock.objects.bulk_create(
        AgentBlock(agent=copy, block=shared[b["id"]] if b["id"] in shared else next(fresh), position=position)
        for position, b in enumerate(blocks)
    )
    for p in passages:
        stamp, tags = p.created_at, list(p.tags or [])
        p.pk, p.id, p.agent = None, Passage._meta.get_field("id").get_default(), copy
        p.save()
        Passage.objects.filter(pk=p.pk).update(created_at=stamp)
        PassageTag.objects.bulk_create([PassageTag(passage=p, agent=copy, tag=tag) for tag in tags])
    return copy


@transaction.atomic
def agent_fork(
    *, agent: Agent, step: Step, before: bool = False, share_blocks: bool = False, name: str | None = None
) -> Agent:
    """A new agent whose state is the original's at a step: with `before`, exactly what the step's request was
    compiled from (its input included); otherwise as right after it (its reply, tool results and block edits).
    Messages up to there are copied (recall memory), blocks copied unless `share_blocks`, passages written
    before the step copied; tools, rules and settings are the original's. The original is not touched."""

    if step.agent_id != agent.id or step.kind != "agent":
        raise Invalid("Fork at one of this agent's own steps.")
    state = _state(step)
    window = list(state["message_ids"])
    if not before:
        window += [m.id for m in Message.objects.filter(step=step).order_by("seq") if m.id not in set(window)]
    at = step.created_at
    passages = (
        Passage.objects.filter(agent=agent, created_at__lt=at)
        if before
        else Passage.objects.filter(agent=agent, created_at__lte=at)
    )
    metadata = {
        **(agent.metadata or {}),
        "forked_from": {"agent_id": agent.id, "step_id": step.id, "step_index": step.index, "before": before},
    }
    return _copy(
        agent=agent,
        name=name or f"{agent.name} · fork at step {step.index}",
        metadata=metadata,
        system=state["spec"]["system"],
        window=window,
        summary_id=state["summary_id"],
        blocks=state["blocks"] if before else _after_step_blocks(step, state),
        share_blocks=share_blocks,
        blocks_edited_at=_edit_time(state) if before else timezone.now(),
        passages=list(passages),
    )


@transaction.atomic
def agent_copy(*, agent: Agent, name: str, metadata: dict | None = None) -> Agent:
    """A throwaway copy of the agent as it is now (messages, window, blocks as copies, passages, settings)."""

    window = list(agent.message_ids or [])[1:]
    summary_id = None
    kinds = dict(Message.objects.filter(id__in=window[:1]).values_list("id", "kind"))
    if window and kinds.get(window[0]) == "summary":
        summary_id, window = window[0], window[1:]
    rows = agent_blocks(agent=agent)
    blocks = [
        {
            "id": b.id,
            "label": b.label,
            "value": b.value,
            "limit": b.limit,
            "description": b.description,
            "read_only": b.read_only,
        }
        for b in rows
    ]
    edited = max((b.updated_at for b in rows), default=None)
    return _copy(
        agent=agent,
        name=name,
        metadata=metadata if metadata is not None else dict(agent.metadata or {}),
        system=agent.system,
        window=window,
        summary_id=summary_id,
        blocks=blocks,
        share_blocks=False,
        blocks_edited_at=edited,
        passages=list(Passage.objects.filter(agent=agent)),
    )


# --------------------------------------------------------------------------- what it cost


def usage_totals(*, steps) -> dict:
    """Tokens and cost summed over steps; steps whose model has no known price are counted, not priced at 0."""
    out = {
        "steps": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "total_tokens": 0,
        "cost_usd": 0.0,
        "unpriced_steps": 0,
    }
    for usage in steps.values_list("usage", flat=True):
        usage = usage or {}
        out["steps"] += 1
        for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
            out[key] += usage.get(key) or 0
        if usage.get("cost_usd") is None:
            out["unpriced_steps"] += 1
        else:
            out["cost_usd"] += usage["cost_usd"]
    out["cost_usd"] = round(out["cost_usd"], 8)
    return out


def token_calibration(*, owner: Organization, model: str, last: int = 50) -> dict:
    """How far our pre-call prompt counts were from the provider's, for a model (its last `last` steps)."""
    pairs = [
        (u.get("estimated_prompt_tokens"), u.get("prompt_tokens"))
        for u in Step.objects.filter(owner=owner, model__endswith=model.split("/", 1)[-1], kind="agent")
        .order_by("-created_at")
        .values_list("usage", flat=True)[:last]
        if u
    ]
    pairs = [(ours, theirs) for ours, theirs in pairs if ours and theirs]
    if not pairs:
        return {"model": model, "steps": 0, "ratio": None, "mean_difference": None}
    ratio = sum(theirs / ours for ours, theirs in pairs) / len(pairs)
    diff = sum(theirs - ours for ours, theirs in pairs) / len(pairs)
    return {"model": model, "steps": len(pairs), "ratio": round(ratio, 4), "mean_difference": round(diff, 1)}


def replay_out(replay: Replay) -> dict:
    return {
        "id": replay.id,
        "step_id": replay.step_id,
        "overrides": replay.overrides,
        "context_sections": replay.sections,
        "results": replay.results,
        "actual": replay.actual,
        "created_at": replay.created_at,
    }
