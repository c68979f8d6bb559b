"""Conversations: more message threads on one agent (Letta's `conversations`). Each has its own in-context list,
beginning with a system message of its own, over the agent's shared memory blocks, tools and archival memory;
its runs see the agent through it (core.runs.persistence.thread_view). The agent's own thread is the `default`
conversation and has no row. A conversation is deleted softly: its messages stay in the agent's recall memory.

Each thread takes one run at a time (a second send is Letta's 409 naming the first); the agent's threads run side by
side, their steps' commits ordered by the agent's row lock, which every writer of its messages and windows holds.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.db.models import F, Max, Q

from core.agents.messages import assistant_returns
from core.errors import Busy, DomainError, Invalid, NotFound
from core.models import RUN_ACTIVE, Agent, Conversation, Message, Organization, Run
from core.pagination import queryset_page
from memory.selectors import agent_blocks

ORDER_FIELDS = ("created_at", "last_run_completion", "last_message_at")


def conversation_get(*, owner: Organization, conversation_id: str) -> Conversation:
    """The owner's live conversation, or NotFound (Letta's wording)."""
    found = Conversation.objects.filter(owner=owner, pk=conversation_id, deleted=False).first()
    if found is None:
        raise NotFound(f"Conversation not found with id '{conversation_id}'")
    return found


def _model_checked(model: str | None) -> str | None:
    if model is not None and "/" not in model:
        raise Invalid("INVALID_ARGUMENT: The model handle should be in the format provider/model-name")
    return model


@transaction.atomic
def conversation_create(
    *,
    agent: Agent,
    summary: str | None = None,
    model: str | None = None,
    model_settings: dict | None = None,
    isolated_block_labels: list[str] | None = None,
    message_ids: list[str] = (),
) -> Conversation:
    """Start a conversation on the agent with a fresh system message (under the agent's lock, which orders its
    message seqs); `message_ids` continues an existing thread's in-context messages after it (a fork)."""
    labels = list(isolated_block_labels or [])
    known = {b.label for b in agent_blocks(agent=agent)}
    for label in labels:
        if label not in known:
            raise Invalid(f"INVALID_ARGUMENT: Block with label '{label}' not found on agent '{agent.id}'")
    locked = Agent.objects.select_for_update().get(pk=agent.pk)
    conversation = Conversation.objects.create(
        owner_id=locked.owner_id,
        agent=locked,
        summary=summary,
        model=_model_checked(model) or "",
        model_settings=model_settings or {},
        isolated_block_labels=labels,
    )
    seq = (Message.objects.filter(agent=locked).aggregate(m=Max("seq"))["m"] or 0) + 1
    system = Message.objects.create(
        owner_id=locked.owner_id,
        agent=locked,
        seq=seq,
        role="system",
        content=[{"type": "text", "text": locked.system}],
        text=locked.system,
        conversation=conversation,
    )
    conversation.message_ids = [system.id, *message_ids]
    conversation.save(update_fields=["message_ids"])
    return conversation


def conversation_fork(
    *, owner: Organization, source: Conversation | None, agent: Agent, up_to_message_id: str | None = None
) -> Conversation:
    """A new conversation continuing `source`'s in-context messages (the agent's own thread when None): the same
    message rows, not copies, after a system message of its own; with `up_to_message_id`, only those up to that
    message (and the tool returns answering it), so the new thread goes on from there. Invalid when that message is
    not in the source's context window."""
    ids = list((source.message_ids if source is not None else agent.message_ids) or [])[1:]
    if up_to_message_id is not None:
        ids = _up_to(ids, up_to_message_id)
    return conversation_create(
        agent=agent,
        summary=source.summary if source is not None else None,
        model=(source.model or None) if source is not None else None,
        model_settings=source.model_settings if source is not None else None,
        message_ids=ids,
    )


def conversation_branch_at(*, agent: Agent, message_id: str) -> Conversation:
    """Branch here: a new conversation of the agent continuing the thread of one of its messages up to that message
    (conversation_fork with `up_to_message_id`). NotFound for a message of another agent, Invalid for one out of
    its thread's context window."""
    message = Message.objects.filter(pk=message_id, agent=agent).only("id", "conversation_id").first()
    if message is None:
        raise NotFound(f"No message '{message_id}' of this agent to branch from.")
    source = Conversation.objects.filter(pk=message.conversation_id, deleted=False).first()
    if message.conversation_id and source is None:
        raise NotFound("The conversation of that message was deleted.")
    return conversation_fork(owner=agent.owner, source=source, agent=agent, up_to_message_id=message.id)


def _up_to(ids: list[str], message_id: str) -> list[str]:
    """The in-context ids up to `message_id`, with the tool returns right after it (a call is never cut from its
    answer, which a provider would refuse)."""
    if message_id not in ids:
        raise Invalid("That message is no longer in the conversation's context window: branch from a message in it.")
    end = ids.index(message_id) + 1
    roles = dict(Message.objects.filter(id__in=ids[end:]).values_list("id", "role"))
    while end < len(ids) and roles.get(ids[end]) == "tool":
        end += 1
    return ids[:end]


def conversations_list(
    *,
    owner: Organization,
    agent_id: str | None = None,
    limit: int = 50,
    after: str | None = None,
    before: str | None = None,
    summary_search: str | None = None,
    ascending: bool = False,
    order_by: str = "created_at",
) -> list[Conversation]:
    """The owner's live conversations (of one agent, or all), ordered by `order_by` with ties by id; conversations
    without a value for it come last. `after` is a conversation id (unknown: from the start); `before` one to list
    the page just ahead of (unknown: up to the end)."""
    if order_by not in ORDER_FIELDS:
        raise Invalid(f"order_by must be one of {', '.join(ORDER_FIELDS)}")
    qs = Conversation.objects.filter(owner=owner, deleted=False)
    if agent_id:
        qs = qs.filter(agent_id=agent_id)
    if summary_search:
        qs = qs.filter(summary__icontains=summary_search)
    key = F(order_by).asc(nulls_last=True) if ascending else F(order_by).desc(nulls_last=True)
    rows = list(qs.order_by(key, "id" if ascending else "-id"))
    if after:
        index = next((i for i, c in enumerate(rows) if c.id == after), None)
        if index is not None:
            rows = rows[index + 1 :]
    size = max(1, min(limit, 1000))
    if before:
        index = next((i for i, c in enumerate(rows) if c.id == before), None)
        if index is not None:
            rows = rows[:index]
        return rows[-size:] if not after else rows[:size]
    return rows[:size]


def conversation_update(
    *,
    conversation: Conversation,
    summary: str | None = None,
    model: str | None = None,
    model_settings: dict | None = None,
    last_message_at: datetime | None = None,
) -> Conversation:
    """Change the fields given (None leaves a field as it is, as Letta's update does)."""
    changes = {
        "summary": summary,
        "model": _model_checked(model),
        "model_settings": model_settings,
        "last_message_at": last_message_at,
    }
    fields = [name for name, value in changes.items() if value is not None]
    for name in fields:
        setattr(conversation, name, changes[name])
    if fields:
        conversation.save(update_fields=[*fields, "updated_at"])
    return conversation


def conversation_delete(*, conversation: Conversation) -> None:
    """Delete softly: the conversation leaves every list; its messages stay in the agent's recall memory. Conflict
    while one of its runs is active."""
    busy = Run.objects.filter(conversation=conversation, status__in=RUN_ACTIVE).values_list("id", flat=True).first()
    if busy is not None:
        raise Busy(f"CONFLICT: Conversation '{conversation.id}' is busy with run '{busy}'", run_id=busy)
    Conversation.objects.filter(pk=conversation.pk).update(deleted=True)


def conversation_messages(
    *,
    conversation: Conversation,
    before: str | None = None,
    after: str | None = None,
    limit: int = 100,
    ascending: bool = False,
) -> list[Message]:
    """Every message written in the conversation, in and out of its window, by seq (cursors are message ids; an
    unknown one is ignored, as Letta does)."""
    scope = Message.objects.filter(conversation=conversation)
    known = set(scope.filter(pk__in=[c for c in (before, after) if c]).values_list("pk", flat=True))
    return queryset_page(
        scope,
        after=after if after in known else None,
        before=before if before in known else None,
        limit=limit,
        order="asc" if ascending else "desc",
        field="seq",
        scope=scope,
    )


def conversation_active_runs(*, agent: Agent, conversation: Conversation | None, waiting: bool = False) -> list[str]:
    """Ids of the thread's active runs (the agent's own thread: runs outside any conversation); with `waiting`, its
    runs that wait for an answer too."""
    active = Q(status__in=RUN_ACTIVE) | Q(waiting_until__isnull=False) if waiting else Q(status__in=RUN_ACTIVE)
    qs = Run.objects.filter(active, agent=agent)
    qs = qs.filter(conversation=conversation) if conversation is not None else qs.filter(conversation__isnull=True)
    return list(qs.values_list("id", flat=True))


def default_thread_messages(
    *, agent: Agent, before: str | None = None, after: str | None = None, limit: int = 100, ascending: bool = False
) -> list[Message]:
    """The agent's own thread's messages (those written outside any conversation), paged as the agent's message
    list pages, without send_message's returns."""
    scope = Message.objects.filter(agent=agent, conversation__isnull=True)
    return queryset_page(
        scope.exclude(assistant_returns()),
        after=after,
        before=before,
        limit=limit,
        order="asc" if ascending else "desc",
        field="seq",
        scope=scope,
    )


def thread_run_for_stream(
    *, agent: Agent, conversation: Conversation | None, run_id: str | None = None, otid: str | None = None
) -> Run:
    """The run whose stream a client resumes in this thread (Letta's order): the one named, else the one that took
    the message with this `otid`, else the thread's newest active run. NotFound or Invalid with Letta's texts."""
    runs = Run.objects.filter(agent=agent)
    if run_id:
        found = runs.filter(pk=run_id).first()
        if found is None:
            raise NotFound(f"Run {run_id} not found.")
        return found
    thread = runs.filter(conversation=conversation) if conversation else runs.filter(conversation__isnull=True)
    if otid:
        found_id = (
            Message.objects.filter(agent=agent, otid=otid, run__isnull=False).values_list("run_id", flat=True).first()
        )
        found = thread.filter(pk=found_id).first() if found_id else None
        if found is None:
            found = next((r for r in thread.order_by("-created_at")[:20] if _took(r, otid)), None)
        if found is None:
            raise NotFound(f"No run found for otid={otid}. The run may have expired or never existed.")
        return found
    found = thread.filter(status__in=RUN_ACTIVE).order_by("-created_at").first()
    if found is None:
        raise DomainError("INVALID_ARGUMENT: No active runs found for this conversation.")  # 400, as Letta
    return found


def _took(run: Run, otid: str) -> bool:
    """Whether the run's input held the message with this otid (stored before its first step commits it)."""
    return any(isinstance(m, dict) and m.get("otid") == otid for m in run.input_messages or ())
