"""Server-rendered conversation history: the same Letta message dicts the websocket streams
(core.agents.messages), plus what the page shows (pretty arguments, the sender, which rows are in the context
window and what evicted the others, and how system-injected messages are told apart from the person)."""

import json

from django.db.models import Q
from django.template.loader import render_to_string
from django.utils import timezone

from core.agents import run_view
from core.agents.messages import message_to_letta
from core.engine.loop import NON_USER_PREFIX
from core.engine.types import uses_heartbeats
from core.models import RUN_ACTIVE, Agent, Message, Run, RunStatus
from core.selectors import WindowMarks, agent_window_marks
from core.web.waits import answer_items, calls_card

PAGE_SIZE = 40
SUMMARY_SPLIT = "The following is a summary of the previous messages: "
# Letta v1 wrapped what the agent was told in JSON; an imported conversation keeps that shape.
_V1_NOTICES = {"heartbeat": "heartbeat", "system_alert": "system alert", "login": "login"}
_KIND_LABELS = {"memory_warning": "memory pressure warning", "heartbeat": "heartbeat"}


def _args(raw) -> dict:
    try:
        value = json.loads(raw or "{}")
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _v1_wrapped(text: str) -> dict | None:
    if not text.startswith("{"):
        return None
    value = _args(text)
    return value if isinstance(value.get("type"), str) else None


def _user_shape(d: dict, kind: str) -> dict:
    """How a user-role message of this kind shows: the person's words, or a notice the system injected."""
    if kind == "summary":
        text = d["content"] or ""
        return {"shape": "summary", "summary": text.split(SUMMARY_SPLIT, 1)[-1]}
    row_kind = kind
    wrapped = None if row_kind else _v1_wrapped(d["content"] or "")
    kind = row_kind or (wrapped or {}).get("type", "")
    if kind == "heartbeat":
        return {"shape": "heartbeat", "notice": (wrapped or _args(d["content"])).get("reason") or d["content"]}
    if wrapped and kind == "system_alert" and str(wrapped.get("message", "")).startswith("Note: prior messages"):
        return {
            "shape": "summary",
            "summary": str(wrapped["message"]).split(SUMMARY_SPLIT, 1)[-1],
        }  # a Letta v1 summary
    if wrapped and kind == "user_message":
        return {"content": str(wrapped.get("message", ""))}
    if wrapped and kind in _V1_NOTICES:
        return {
            "shape": "notice",
            "notice_label": _V1_NOTICES[kind],
            "notice": str(wrapped.get("message") or d["content"]),
        }
    if row_kind:
        return {
            "shape": "notice",
            "notice_label": _KIND_LABELS.get(row_kind, row_kind.replace("_", " ")),
            "notice": d["content"].removeprefix(NON_USER_PREFIX),
        }
    if (d["content"] or "").startswith(NON_USER_PREFIX):
        return {"shape": "notice", "notice_label": "system", "notice": d["content"].removeprefix(NON_USER_PREFIX)}
    return {}


def message_items(
    row: Message,
    *,
    names: dict[str, str] | None = None,
    resets: set[str] = frozenset(),
    call_names: dict[str, str] | None = None,
    agent_type: str | None = None,
) -> list[dict]:
    """One stored message as display items, in the order they happened."""
    items = []
    reply_beside_calls = agent_type is not None and not uses_heartbeats(agent_type)
    if row.role == "assistant" and row.tool_calls and row.body and not row.reasoning and not reply_beside_calls:
        # Letta v1 kept the inner monologue as the content of a tool-calling message: it is the reasoning
        items.append(
            {
                **message_to_letta(row)[0],
                "message_type": "reasoning_message",
                "reasoning": row.body,
                "date": row.created_at,
                "sender_agent_id": "",
                "name": row.name,
                "seq": row.seq,
                "kind": row.kind,
            }
        )
    # a tool return is named after its call (imported Letta v1 returns carry the agent's name instead)
    name = (call_names or {}).get(row.tool_call_id) or row.name if row.role == "tool" else row.name
    for d in message_to_letta(row, agent_type=agent_type):
        d = {
            **d,
            "date": row.created_at,
            "sender_agent_id": row.sender_agent_id,
            "name": name,
            "sender_name": (names or {}).get(row.sender_agent_id, ""),
            "seq": row.seq,
            "kind": d.get("kind") or row.kind,  # the marker of a message that cannot be shown keeps its kind
        }
        items.extend(display_items(d, reset=row.id in resets, before=items))
    return items


def display_items(d: dict, *, reset: bool = False, before: list[dict] = ()) -> list[dict]:
    """What the page shows for one Letta message dict (stored or arriving live): the item, with its pretty
    arguments (the `thinking` argument shown as the reasoning before it, unless `before` holds one) and its shape
    (a system prompt, a reset, a notice the system injected, a summary)."""
    d = dict(d)
    items = []
    if d["message_type"] == "tool_call_message":
        args = _args(d["tool_call"].get("arguments"))
        if args.get("thinking") and not any(i["message_type"] == "reasoning_message" for i in before):
            items.append({**d, "message_type": "reasoning_message", "reasoning": args["thinking"]})
        shown = {k: v for k, v in args.items() if k != "thinking"} if args else d["tool_call"].get("arguments")
        d["tool_call"] = {**d["tool_call"], "arguments": json.dumps(shown, indent=2, ensure_ascii=False)}
    if d["message_type"] == "system_message":
        d["is_prompt"] = not d.get("kind") and not d.get("sender_agent_id")
        if d["is_prompt"]:
            d["shape"] = "reset" if reset else "prompt"
    if d["message_type"] == "user_message":
        d.update(_user_shape(d, d.get("kind") or ""))
    items.append(d)
    return items


def _mark(items: list[dict], marks: WindowMarks) -> None:
    index = run_view.step_numbers_of(step_ids={i["step_id"] for i in items if i.get("step_id")})
    for item in items:
        item["in_context"] = item["id"] in marks.in_window
        item["evicted"] = marks.evicted.get(item["id"])
        item["step_index"] = index.get(item.get("step_id"))


def history_page(*, agent, before_seq: int | None = None, size: int = PAGE_SIZE) -> tuple[list[dict], int | None]:
    """The newest `size` messages of the agent's thread (`thread_view`; its own by default) older than
    `before_seq`, oldest first, and the cursor for the page before. The inputs of a run that ended before a step took
    them are left to its notice (`undelivered`), which offers them again, as the tab that sent them showed it."""
    thread = getattr(agent, "thread", None)
    # a branched conversation holds messages of the thread it came from: they are part of its history too
    mine = Q(conversation_id=thread) | Q(id__in=agent.message_ids or []) if thread else Q(conversation_id=None)
    qs = Message.objects.filter(mine, agent=agent).exclude(
        role="user", step__isnull=True, run__status__in=(RunStatus.FAILED, RunStatus.CANCELLED)
    )
    if before_seq is not None:
        qs = qs.filter(seq__lt=before_seq)
    rows = list(qs.order_by("-seq")[: size + 1])
    more = len(rows) > size
    rows = list(reversed(rows[:size]))
    senders = {r.sender_agent_id for r in rows if r.sender_agent_id}
    names = (
        dict(Agent.objects.filter(owner_id=agent.owner_id, id__in=senders).values_list("id", "name")) if senders else {}
    )
    marks = agent_window_marks(agent=agent, since_seq=rows[0].seq if rows else None)
    call_names = {c.get("id"): c.get("name") for r in rows for c in r.tool_calls or () if isinstance(c, dict)}
    items = [
        item
        for row in rows
        for item in message_items(
            row, names=names, resets=marks.resets, call_names=call_names, agent_type=agent.agent_type
        )
    ]
    _mark(items, marks)
    _approvals(items, rows, call_names)
    return items, (rows[0].seq if more and rows else None)


def history_after(*, agent, after_seq: int, size: int = 200) -> list[dict]:
    """The thread's messages after `after_seq`, oldest first, as display items (what a tab whose socket was away
    missed: it fetches them when the socket is back)."""
    qs = Message.objects.filter(agent=agent, conversation_id=getattr(agent, "thread", None), seq__gt=after_seq)
    rows = list(qs.order_by("seq")[:size])
    if not rows:
        return []
    items, _ = history_page(agent=agent, before_seq=rows[-1].seq + 1, size=len(rows))
    return items


def in_flight(*, agent) -> list[dict]:
    """The person's inputs the thread's run in progress holds that no message stores yet (the claim stores them, so
    only a run claimed before that held any), as the page draws them: a tab opened mid-run shows them as sent, as the
    tab that sent them does."""
    run = (
        Run.objects.filter(agent_id=agent.id, conversation_id=getattr(agent, "thread", None), status__in=RUN_ACTIVE)
        .order_by("-created_at")
        .values("id", "input_messages")
        .first()
    )
    if run is None or Message.objects.filter(run_id=run["id"], role="user").exists():
        return []
    shown = {"message_type": "user_message", "pending": True, "run_id": run["id"], "date": timezone.now()}
    shown["pending_label"] = "sent · waiting for the agent"
    return [
        {**shown, "content": m.get("text", ""), "otid": m.get("otid", "")}
        for m in run["input_messages"] or ()
        if m.get("role") == "user" and not m.get("kind")
    ]


def undelivered(*, agent, look_back: int = 20) -> list[dict]:
    """Among the thread's latest `look_back` runs, those that failed or were cancelled before a step took the
    person's message, newest last: their notices (the error, the message with Retry and Edit) show again after a
    reload, as they did live. A later run, going or done, does not hide them (a later send of other text would lose
    what was pasted); a later send of the same text (Retry, or the person sending it again) replaces the failed
    copy, as it does live."""
    runs = Run.objects.filter(agent_id=agent.id, conversation_id=getattr(agent, "thread", None)).order_by("-created_at")
    found, sent_later = [], set()
    for run in runs.only("id", "status", "stop_reason", "error", "completed_at", "input_messages")[:look_back]:
        inputs = [m for m in run.input_messages or () if m.get("role") == "user" and not m.get("kind")]
        texts = {m.get("text", "") for m in inputs}
        if run.status in RUN_ACTIVE:
            sent_later |= texts
            continue
        if run.status not in (RunStatus.FAILED, RunStatus.CANCELLED):
            sent_later |= texts
            continue
        delivered = Message.objects.filter(run_id=run.id, role="user", step__isnull=False).exists()
        if inputs and not texts <= sent_later and not delivered:
            found.append({"run": run, "inputs": inputs})
        sent_later |= texts
    return found[::-1]


def _approvals(items: list[dict], rows: list[Message], call_names: dict[str, str]) -> None:
    """Approval requests get their card (waiting, or what was decided); stored answers name the calls they answer."""
    by_id = {r.id: r for r in rows}
    for item in items:
        if item["message_type"] == "approval_request_message":
            item["card"] = calls_card(reply=by_id[item["id"]])
        elif item["message_type"] == "approval_response_message":
            item["answers"] = answer_items(item.get("approvals"), call_names)


def window_marks_json(*, agent, since_seq: int | None) -> dict:
    """What the page needs to re-mark messages already shown after the window changed (a summary, a reset)."""
    marks = agent_window_marks(agent=agent, since_seq=since_seq)
    drawn: dict[tuple, str] = {}  # one render per way of being out (the summarizer step, a reset)

    def mark(evicted) -> str:
        key = (getattr(evicted, "by", None), getattr(evicted, "step_id", None), getattr(evicted, "step_index", None))
        if key not in drawn:
            drawn[key] = render_to_string("core/_ctx_mark.html", {"item": {"in_context": False, "evicted": evicted}})
        return drawn[key]

    return {
        # each mark as templates/core/_ctx_mark.html draws it: "in", "out", and per evicted message
        "html": {
            "in": render_to_string("core/_ctx_mark.html", {"item": {"in_context": True}}),
            "out": mark(None),
            **{i: mark(e) for i, e in marks.evicted.items()},
        },
        "in_context": sorted(marks.in_window),
        "evicted": {
            i: {
                "by": e.by,
                "step_id": e.step_id,
                "step_index": e.step_index,
                "run_id": e.run_id,
                "message_id": e.message_id,
            }
            for i, e in marks.evicted.items()
        },
    }
