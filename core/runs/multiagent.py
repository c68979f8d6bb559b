"""Multi-agent tools: agents of one owner messaging each other (one-way, wait-for-reply, fan-out by tags).

They run outside the caller's step transaction (like every tool call): waiting for another agent means that
agent's run must be able to write while the caller waits. The receiving run is claimed and queued like
any run (core.runs.executor); a caller waiting for it lends its pool slot meanwhile. The receiver gets a
system-role "[Incoming message from agent with ID '…'] …" message (kind agent_message, sender_agent_id)
as the input of a new run; the receiving run's depth is the caller's + 1, and a hop beyond
MULTI_AGENT_MAX_DEPTH is refused with an error to the model and an error_message event to open tabs.
"""

import json
import logging
import time
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django_tasks import task

from core.agents import history
from core.agents.messages import messages_to_letta
from core.engine import loop
from core.errors import Conflict, DomainError, NotFound
from core.events import agent_group, send_event
from core.models import RUN_ACTIVE, RUN_TERMINAL, Agent, AgentTag, Run, RunStatus
from core.runs import executor, runner
from core.runs.request import RunRequest
from core.runs.tool_exec import ToolOutcome
from core.telemetry import hooks as telemetry

log = logging.getLogger(__name__)
DELIVERY_RETRY_S = 1.0
DELIVERY_ATTEMPTS = 600


class _Refused(Exception):
    """A multi-agent call that must come back to the model as a tool error."""


def incoming_text(*, sender_id: str, message: str) -> str:
    return f"[Incoming message from agent with ID '{sender_id}'] {message}"


def _inputs(sender_id: str, message: str) -> list[dict]:
    return [
        {"role": "system", "content": incoming_text(sender_id=sender_id, message=message), "sender_agent_id": sender_id}
    ]


def _caller_run(agent: Agent) -> Run | None:
    """The run whose step sends: the one in progress in the thread `agent` is seen from (each thread runs one run at
    a time; the agent's other threads may be running too)."""
    thread = getattr(agent, "thread", None)
    return (
        Run.objects.filter(agent_id=agent.id, conversation_id=thread, status__in=RUN_ACTIVE)
        .order_by("-created_at")
        .first()
    )


def _hop_check(agent: Agent, caller: Run | None, tool: str) -> int:
    """The depth a message sent now would have; refuses (and tells open tabs) beyond the limit."""
    depth = (caller.depth if caller else 0) + 1
    limit = settings.MULTI_AGENT_MAX_DEPTH
    if depth <= limit:
        return depth
    text = (
        f"Multi-agent loop guard: this message would be hop {depth} of a conversation between agents, beyond "
        f"the limit of {limit} (MULTI_AGENT_MAX_DEPTH). It was not delivered; answer without messaging agents."
    )
    send_event(
        agent_group(agent.id),
        {
            "message_type": "error_message",
            "error_type": "multi_agent_loop_guard",
            "run_id": caller.id if caller else None,
            "tool_name": tool,
            "message": text,
            "detail": {"depth": depth, "max_depth": limit},
        },
    )
    raise _Refused(text)


def _target(agent: Agent, other_agent_id: str) -> Agent:
    if other_agent_id == agent.id:
        raise _Refused("An agent cannot send a message to itself.")
    target = Agent.objects.filter(owner_id=agent.owner_id, id=other_agent_id).first()
    if target is None:  # another owner's agent is indistinguishable from a missing one
        raise _Refused(f"Agent '{other_agent_id}' not found.")
    return target


def _submit(agent: Agent, target_id: str, message: str, depth: int, parent: Run | None) -> Run:
    request = RunRequest(
        owner=agent.owner,
        agent_id=target_id,
        input_messages=_inputs(agent.id, message),
        depth=depth,
        parent_run_id=parent.id if parent else None,
        kinds={0: "agent_message"},
        background=True,
        refuse_unconfigured=False,  # the receiving run ends with the how-to, which the sender reads
    )
    run = executor.run_submit(request)
    telemetry.run_linked(run.id)  # the sending tool call's span links to the receiving run's trace
    return run


# --------------------------------------------------------------------------- the three tools


def _send_async(agent: Agent, args: dict, caller: Run | None, depth: int) -> str:
    target = _target(agent, str(args.get("other_agent_id", "")))
    message = str(args.get("message", ""))
    try:
        run = _submit(agent, target.id, message, depth, caller)
    except Conflict:
        with transaction.atomic():
            agent_message_deliver_task.enqueue(
                owner_id=agent.owner_id,
                target_id=target.id,
                sender_id=agent.id,
                message=message,
                depth=depth,
                parent_run_id=caller.id if caller else None,
            )
            executor.queue.woken_after_commit()
        return f"Message queued for agent '{target.id}': it is busy and will receive it when its current run ends."
    return f"Message delivered to agent '{target.id}' (run '{run.id}' started in the background)."


def _replies(run_id: str) -> list[str]:
    run = Run.objects.get(pk=run_id)
    return [
        m["content"]
        for m in messages_to_letta(history.run_messages(run=run))
        if m["message_type"] == "assistant_message"
    ]


def _converse(agent: Agent, targets: list[Agent], message: str, caller: Run | None, depth: int) -> list[dict]:
    """Deliver to each target (their runs execute concurrently on the run pool) and collect their replies."""
    runs, out = {}, []
    for target in targets:
        try:
            runs[target.id] = _submit(agent, target.id, message, depth, caller)
        except Conflict as exc:
            out.append({"agent_id": target.id, "error": exc.message})
    deadline = time.monotonic() + settings.MULTI_AGENT_REPLY_TIMEOUT_S
    for tid, run in runs.items():
        run = executor.run_wait(run=run, timeout=max(0.0, deadline - time.monotonic()))
        if run.status not in RUN_TERMINAL:
            runner.run_cancel(owner=agent.owner, agent_id=tid, run_ids=[run.id])
            out.append(
                {
                    "agent_id": tid,
                    "run_id": run.id,
                    "error": f"no reply within {settings.MULTI_AGENT_REPLY_TIMEOUT_S:g} s (its run was asked to stop)",
                }
            )
        elif run.status != RunStatus.COMPLETED:
            out.append(
                {
                    "agent_id": tid,
                    "run_id": run.id,
                    "error": f"its run ended {run.status}: {run.error or run.stop_reason}",
                }
            )
        else:
            out.append({"agent_id": tid, "run_id": run.id, "replies": _replies(run.id)})
    return out


def _send_and_wait(agent: Agent, args: dict, caller: Run | None, depth: int) -> str:
    target = _target(agent, str(args.get("other_agent_id", "")))
    [result] = _converse(agent, [target], str(args.get("message", "")), caller, depth)
    if "error" in result:
        raise _Refused(f"Agent '{target.id}': {result['error']}")
    return "\n".join(result["replies"]) or f"Agent '{target.id}' finished without replying."


def agents_matching_tags(*, agent: Agent, match_all: list[str], match_some: list[str]) -> list[Agent]:
    """The owner's other agents having every tag of match_all and (if given) at least one of match_some."""
    qs = Agent.objects.filter(owner_id=agent.owner_id).exclude(id=agent.id)
    for tag in set(match_all):
        qs = qs.filter(id__in=AgentTag.objects.filter(tag=tag).values("agent_id"))
    if match_some:
        qs = qs.filter(id__in=AgentTag.objects.filter(tag__in=match_some).values("agent_id"))
    return list(qs.order_by("created_at"))


def _send_by_tags(agent: Agent, args: dict, caller: Run | None, depth: int) -> str:
    match_all = [str(t) for t in args.get("match_all") or []]
    match_some = [str(t) for t in args.get("match_some") or []]
    if not match_all and not match_some:
        raise _Refused("Give at least one tag in match_all or match_some.")
    targets = agents_matching_tags(agent=agent, match_all=match_all, match_some=match_some)
    if not targets:
        return "No agents match these tags."
    return json.dumps(_converse(agent, targets, str(args.get("message", "")), caller, depth), ensure_ascii=False)


_TOOLS = {
    "send_message_to_agent_async": _send_async,
    "send_message_to_agent_and_wait_for_reply": _send_and_wait,
    "send_message_to_agents_matching_tags": _send_by_tags,
}


def tool_run(call, snap, step_id: str) -> ToolOutcome:
    """Run one multi-agent tool call (outside the step transaction): deliver, maybe wait; errors go to the model."""
    agent = snap.agent
    try:
        caller = _caller_run(agent)
        depth = _hop_check(agent, caller, call.name)
        return ToolOutcome(True, _TOOLS[call.name](agent, call.args, caller, depth))
    except _Refused as exc:
        return ToolOutcome(False, loop.tool_error_text(call.name, str(exc), "MultiAgentError"))
    except (DomainError, NotFound) as exc:
        return ToolOutcome(False, loop.tool_error_text(call.name, exc.message, "MultiAgentError"))


def agent_message_deliver(
    *,
    owner_id: str,
    target_id: str,
    sender_id: str,
    message: str,
    depth: int,
    parent_run_id: str | None,
    attempt: int = 0,
) -> str:
    """Queue task body: claim the receiver and queue its run (retrying later while it is busy)."""
    sender = Agent.objects.filter(pk=sender_id, owner_id=owner_id).first()
    if sender is None or not Agent.objects.filter(pk=target_id, owner_id=owner_id).exists():
        return "gone"
    try:
        run = _submit(sender, target_id, message, depth, Run.objects.filter(pk=parent_run_id).first())
    except Conflict:
        if attempt >= DELIVERY_ATTEMPTS:
            return "undelivered: receiver stayed busy"
        agent_message_deliver_task.using(run_after=timezone.now() + timedelta(seconds=DELIVERY_RETRY_S)).enqueue(
            owner_id=owner_id,
            target_id=target_id,
            sender_id=sender_id,
            message=message,
            depth=depth,
            parent_run_id=parent_run_id,
            attempt=attempt + 1,
        )
        return "receiver busy: retry queued"
    return f"delivered: run {run.id}"


@task()
def agent_message_deliver_task(
    *,
    owner_id: str,
    target_id: str,
    sender_id: str,
    message: str,
    depth: int,
    parent_run_id: str | None,
    attempt: int = 0,
) -> str:
    """Task-queue entry point of agent_message_deliver: once the receiver is free, claim it and queue its run."""
    return agent_message_deliver(
        owner_id=owner_id,
        target_id=target_id,
        sender_id=sender_id,
        message=message,
        depth=depth,
        parent_run_id=parent_run_id,
        attempt=attempt,
    )
