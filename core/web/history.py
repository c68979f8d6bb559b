"""Server-rendered conversation history: the same Letta message dicts the websocket streams
(core.messages), plus what the page shows (pretty arguments, the sender, which rows are the prompt)."""

import json

from core.messages import message_to_letta
from core.models import Agent, Message

PAGE_SIZE = 40


def _args(raw) -> dict:
    try:
        value = json.loads(raw or "{}")
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def message_items(row: Message, *, names: dict[str, str] | None = None) -> list[dict]:
    """One stored message as display items, in the order they happened."""
    items = []
    for d in message_to_letta(row):
        d = {**d, "date": row.created_at, "sender_agent_id": row.sender_agent_id, "name": row.name,
             "sender_name": (names or {}).get(row.sender_agent_id, "")}
        if d["message_type"] == "tool_call_message":
            args = _args(d["tool_call"].get("arguments"))
            if args.get("thinking") and not any(i["message_type"] == "reasoning_message" for i in items):
                items.append({**d, "message_type": "reasoning_message", "reasoning": args["thinking"]})
            shown = {k: v for k, v in args.items() if k != "thinking"} if args else d["tool_call"].get("arguments")
            d["tool_call"] = {**d["tool_call"], "arguments": json.dumps(shown, indent=2, ensure_ascii=False)}
        if d["message_type"] == "system_message":
            d["is_prompt"] = not row.kind and not row.sender_agent_id
        items.append(d)
    return items


def history_page(*, agent, before_seq: int | None = None, size: int = PAGE_SIZE) -> tuple[list[dict], int | None]:
    """The newest `size` messages older than `before_seq`, oldest first, and the cursor for the page before."""
    qs = Message.objects.filter(agent=agent)
    if before_seq is not None:
        qs = qs.filter(seq__lt=before_seq)
    rows = list(qs.order_by("-seq")[: size + 1])
    more = len(rows) > size
    rows = list(reversed(rows[:size]))
    senders = {r.sender_agent_id for r in rows if r.sender_agent_id}
    names = dict(Agent.objects.filter(owner_id=agent.owner_id, id__in=senders).values_list("id", "name")) if senders else {}
    items = [item for row in rows for item in message_items(row, names=names)]
    return items, (rows[0].seq if more and rows else None)
