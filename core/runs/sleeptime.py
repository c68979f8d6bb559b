"""Sleep-time companions (Letta's `enable_sleeptime`): a second agent that shares the primary's memory blocks and
runs in the background every N primary turns, on the transcript since its last run, to reorganize and
consolidate memory with the memory tools. Its runs go through the run executor like any other (its own
agent's lock, never the primary's), and its block edits are recorded under its own agent id.
"""

from __future__ import annotations

import logging

from django.db import transaction

from core.agents import queries
from core.agents.services import agent_create
from core.errors import Conflict, Invalid, NotFound
from core.models import Agent, Message, Run, SleeptimeCompanion
from core.runs.executor import run_submit
from core.runs.request import RunRequest
from memory.models import AgentBlock, BlockHistory
from memory.services import block_attach

log = logging.getLogger(__name__)

MAX_FREQUENCY = 1000
_MESSAGE_CHARS = 2000
_TRANSCRIPT_CHARS = 24000

SLEEPTIME_SYSTEM = """You are the sleep-time memory agent of another agent (the primary). You never talk to the \
user. Each time you run you receive the part of the primary's conversation that happened since your last run. \
Your memory blocks are the primary's own blocks: what you write there is what the primary will read in its \
next turn.

Your job: reorganize and consolidate that memory. Record new durable facts about the user and the task, merge \
duplicates, fix facts the conversation corrected, drop what is stale, and keep each block within its limit \
and easy to read. Use the memory tools (memory_replace, memory_insert, core_memory_append, \
core_memory_replace). Make the edits that are worth making, then stop by calling your last tool with \
request_heartbeat false. If nothing is worth changing, make no edit."""


def companion_name(agent: Agent) -> str:
    return f"{agent.name[:180]} (sleep-time)"


def sleeptime_get(*, agent: Agent) -> SleeptimeCompanion | None:
    """The agent's companion link, or None."""
    return SleeptimeCompanion.objects.select_related("companion").filter(agent=agent).first()


def _frequency_checked(frequency) -> int:
    if isinstance(frequency, bool) or not isinstance(frequency, int) or not 1 <= frequency <= MAX_FREQUENCY:
        raise Invalid(
            f"frequency must be a whole number of turns from 1 to {MAX_FREQUENCY}",
            detail={"frequency": f"1..{MAX_FREQUENCY}"},
        )
    return frequency


@transaction.atomic
def sleeptime_configure(
    *, agent: Agent, enabled: bool | None = None, frequency: int | None = None
) -> SleeptimeCompanion:
    """Enable/disable the agent's companion or change how often it runs; the first enable creates the
    companion agent (same model, the memory tools only) and shares every block of the primary with it."""

    if frequency is not None:
        _frequency_checked(frequency)
    if agent.agent_type == "sleeptime_agent" or SleeptimeCompanion.objects.filter(companion=agent).exists():
        raise Invalid("a sleep-time agent cannot have a sleep-time companion of its own")
    link = SleeptimeCompanion.objects.select_for_update().filter(agent=agent).first()
    if link is None:
        if not enabled:
            raise NotFound("this agent has no sleep-time companion; enable one first")
        companion = agent_create(
            owner=agent.owner,
            name=companion_name(agent),
            model=agent.model,
            system=SLEEPTIME_SYSTEM,
            description=f"Sleep-time memory agent of {agent.id}",
            include_base_tools=False,
            tools=["memory_replace", "memory_insert", "core_memory_append", "core_memory_replace"],
            agent_type="sleeptime_agent",
            embedding=agent.embedding,
            model_settings=dict(agent.model_settings or {}),
            metadata={"sleeptime_primary_id": agent.id},
        )
        link = SleeptimeCompanion.objects.create(agent=agent, companion=companion, frequency=frequency or 5)
        _share_blocks(link)
        return link
    if enabled is not None:
        link.enabled = enabled
    if frequency is not None:
        link.frequency = frequency
    link.save(update_fields=["enabled", "frequency", "updated_at"])
    return link


def _share_blocks(link: SleeptimeCompanion) -> None:
    """Attach to the companion every block of the primary it does not have yet (blocks added since)."""

    have = set(AgentBlock.objects.filter(agent=link.companion).values_list("block_id", flat=True))
    for row in AgentBlock.objects.filter(agent=link.agent).select_related("block").order_by("position"):
        if row.block_id not in have:
            block_attach(agent=link.companion, block=row.block)


def transcript_since(*, agent: Agent, after_seq: int) -> tuple[str, int]:
    """The primary's conversation after `after_seq` as plain text (newest kept when long), and its last seq."""
    rows = list(Message.objects.filter(agent=agent, seq__gt=after_seq).exclude(role="system").order_by("seq"))
    lines: list[str] = []
    for m in rows:
        if m.kind == "summary":
            continue
        if m.role == "tool":
            lines.append(f"[tool {m.name} returned] {m.text[:_MESSAGE_CHARS]}")
            continue
        if m.text:
            lines.append(f"[{m.role}] {m.text[:_MESSAGE_CHARS]}")
        for call in m.tool_calls or ():
            lines.append(f"[{m.role} called {call.get('name')}] {str(call.get('arguments', ''))[:_MESSAGE_CHARS]}")
    text = "\n".join(lines)
    if len(text) > _TRANSCRIPT_CHARS:
        text = "[… earlier messages omitted]\n" + text[-_TRANSCRIPT_CHARS:]
    return text, (rows[-1].seq if rows else after_seq)


def sleeptime_run_submit(*, link: SleeptimeCompanion, manual: bool = False) -> Run | None:
    """Queue a companion run on the transcript since its last run (run executor; returns at once).

    Manual: raises Invalid when there is nothing new and Conflict when the companion is still running; automatic
    (manual=False): returns None in both cases and the turn count carries over to the next turn.
    """

    text, last_seq = transcript_since(agent=link.agent, after_seq=link.last_seq)
    if not text:
        if manual:
            raise Invalid("nothing new in the conversation since the companion's last run")
        return None
    _share_blocks(link)
    prompt = (
        "Conversation of the primary agent since your last run:\n\n"
        + text
        + "\n\nReorganize and consolidate the shared memory blocks as your instructions say."
    )
    try:
        with transaction.atomic():
            request = RunRequest(
                owner=link.agent.owner,
                agent_id=link.companion_id,
                background=True,
                input_messages=[{"role": "user", "content": prompt}],
                refuse_unconfigured=False,  # the companion's run ends with the how-to, shown in its history
            )
            run = run_submit(request)
            SleeptimeCompanion.objects.filter(pk=link.pk).update(turns_since=0, last_seq=last_seq, last_run_id=run.id)
    except Conflict:
        if manual:
            raise Conflict("the sleep-time companion is still running; try again when its run ends") from None
        return None
    link.turns_since, link.last_seq, link.last_run_id = 0, last_seq, run.id
    return run


def sleeptime_after_run(
    sender=None, *, run_id: str, agent_id: str, completed: bool, companion: bool | None = None, **kwargs
) -> None:
    """Receiver of executor.run_ended (connected in CoreConfig.ready; sent after waking waiters): count a completed
    turn of an agent with an enabled companion and, every `frequency` turns, queue the companion's run. `companion`:
    whether the agent had one when the run began, read with the agent then (None: asked here). Never raises."""
    try:
        if not completed:
            return
        if not (companion if companion is not None else queries.companion_enabled(agent_id=agent_id)):
            return
        companions = SleeptimeCompanion.objects.filter(agent_id=agent_id, enabled=True)
        with transaction.atomic():
            link = companions.select_for_update().first()
            if link is None:
                return
            link.turns_since += 1
            link.save(update_fields=["turns_since"])
        if link.turns_since >= link.frequency:
            link = SleeptimeCompanion.objects.select_related("agent__owner", "companion").get(pk=link.pk)
            sleeptime_run_submit(link=link)
    except Exception:  # the primary's run is over and fine; a companion that could not start is only logged
        log.exception("sleep-time companion after run %s", run_id)


def sleeptime_edits(*, link: SleeptimeCompanion, limit: int = 20):
    """The companion's block edits, newest first (block history rows attributed to it)."""

    return list(
        BlockHistory.objects.filter(agent_id=link.companion_id).select_related("block").order_by("-created_at")[:limit]
    )


def sleeptime_runs(*, link: SleeptimeCompanion, limit: int = 10) -> list[Run]:
    """The companion's runs, newest first."""
    return list(Run.objects.filter(agent_id=link.companion_id).order_by("-created_at")[:limit])
