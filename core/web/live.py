"""The conversation's live items as the history draws them: an IDE socket's events get the HTML of their item,
rendered by templates/core/_item.html (one renderer for the history and for what arrives live).

Rendered in the consumer, so nothing renders when no page listens and the API's streams (SSE, a socket without
`batch=1`) carry Letta's events unchanged; once per channel message for every IDE socket of the agent in the process
(one renderer per agent, which keeps the last frames). A streamed part's shell (its meta line, an empty body) is
rendered once, with its first token chunk; the page appends the tokens' text to it. The page's texts come from here
too: a run_status's `label` (the status line), an error's `reason` and, for a thread that waits, `busy_text`; a
run_status's `html` is the notice of a run that did not complete, or the card of a run that waits before a model call.
"""

from collections import deque

from channels.layers import get_channel_layer
from django.template.loader import render_to_string
from django.utils.dateparse import parse_datetime

from core import jsontext
from core.channel_layer import LocalChannelLayer
from core.models import Message, Run
from core.web.history import display_items
from core.web.runs import notice_context
from core.web.waits import answer_items, calls_item, model_call_card

# what the conversation shows of the events a socket receives
SHOWN = {
    "approval_request_message",
    "approval_response_message",
    "user_message",
    "system_message",
    "reasoning_message",
    "assistant_message",
    "tool_call_message",
    "tool_return_message",
    "error_message",
    "stop_reason",
    "usage_statistics",
}
STREAMED = {"reasoning_message", "assistant_message", "tool_call_message", "approval_request_message"}
# drawn from the database (the card as it stands, the names of the calls answered): rare, and read off the event loop
APPROVALS = {"approval_request_message", "approval_response_message"}


FRAMES_KEPT = 8
_renderers: dict[str, "LiveRenderer"] = {}


def renderer_open(agent_id: str, names: dict[str, str]) -> "LiveRenderer":
    """The agent's renderer, shared by its IDE sockets in this process (pair with `renderer_close`)."""
    renderer = _renderers.get(agent_id) or _renderers.setdefault(agent_id, LiveRenderer(agent_id))
    renderer.names = names
    renderer.sockets += 1
    return renderer


def renderer_close(agent_id: str) -> None:
    """A socket of the agent closed: its renderer goes with the last one."""
    renderer = _renderers.get(agent_id)
    if renderer is not None:
        renderer.sockets -= 1
        if renderer.sockets <= 0:
            del _renderers[agent_id]


def _waits_for_model_call(event: dict) -> bool:
    return isinstance(event.get("waiting"), dict) and event["waiting"].get("before") == "model_call"


def _drawn_from_run(event: dict) -> bool:
    """A run_status whose run the page shows a card of: the card of a wait before a model call, or the notice of a
    run that did not complete."""
    return event.get("message_type") == "run_status" and (
        _waits_for_model_call(event) or event.get("status") not in ("created", "running", "completed")
    )


def needs_database(events: list[dict]) -> bool:
    """Whether rendering these events reads the database (an approval request's card, an answer's call names, a run's
    notice or its wait's card)."""
    return any((e.get("message_type") in APPROVALS and not e.get("delta")) or _drawn_from_run(e) for e in events)


def _date(value):
    return parse_datetime(value) if isinstance(value, str) else value


def _detail_text(detail) -> str:
    if isinstance(detail, str):
        return detail
    if isinstance(detail, dict) and isinstance(detail.get("available"), list):
        return "Available models: " + ", ".join(map(str, detail["available"]))
    return ""  # structured details (a busy run id, …) are told by the texts below


def _error_texts(event: dict) -> dict:
    """What the page tells of an error: `reason` (a failed send's), and `busy_text` for Letta's 409 of a thread
    that waits (the busy bar's)."""
    detail = event.get("detail")
    reason = " ".join(t for t in (str(event.get("message") or ""), _detail_text(detail)) if t)
    out = {"reason": reason}
    if isinstance(detail, dict) and detail.get("code") == "PENDING_APPROVAL":
        names = [c["name"] for c in detail.get("tool_calls") or () if isinstance(c, dict) and c.get("name")]
        if names:
            said = str(event.get("message") or "The agent is waiting for approval on a tool call.")
            out["busy_text"] = f"{said} Waiting: {', '.join(names)}. Your message is back in the box."
        else:  # a wait with no calls is a breakpoint before a model call
            out["busy_text"] = (
                "The agent is paused at a breakpoint before a model call: Continue, Step or Stop it first."
                " Your message is back in the box."
            )
    return out


WAIT_LABELS = {"client": "waiting for the client", "breakpoint": "paused at a breakpoint"}


def status_label(event: dict) -> str:
    """What the conversation's status line says of a run_status event."""
    status, stop = event.get("status"), event.get("stop_reason")
    if status in ("created", "running"):
        return f"running …{str(event.get('run_id'))[-8:]}…"
    if isinstance(event.get("waiting"), dict):
        return WAIT_LABELS.get(event["waiting"].get("kind"), "waiting for approval")
    if stop == "cancelled":  # a wait ended by Stop leaves its run "completed" with this stop reason
        return "cancelled"
    return f"{status} · {stop}" if stop and stop != status else str(status)


def item_html(item: dict, *, agent_id: str) -> str:
    """One display item drawn as the history draws it."""
    return render_to_string("core/_item.html", {"item": item, "agent": {"id": agent_id}}).strip()


def event_item(event: dict, *, names: dict[str, str]) -> dict:
    """A Letta event as the display item the history builds from the stored message (a message just stored is in
    the context window)."""
    sender = event.get("sender_id") or ""
    base = {
        **event,
        "date": _date(event.get("date")),
        "seq": event.get("seq_id"),
        "kind": event.get("kind") or "",
        "sender_agent_id": sender,
        "sender_name": names.get(sender, ""),
        "in_context": True,
        "evicted": None,
        "step_index": None,  # the event's is the step's index in its run: the page numbers it from Past steps
    }
    if event.get("message_type") == "error_message":
        base["detail_text"] = _detail_text(event.get("detail"))
    return base


def shell_item(part: dict) -> dict:
    """The empty item a streamed part's token text fills (a chunk, or a part of a catch-up snapshot)."""
    call = part.get("tool_call") if isinstance(part.get("tool_call"), dict) else {}
    return {
        "message_type": part.get("message_type"),
        "id": part.get("id"),
        "date": _date(part.get("date")),
        "step_id": part.get("step_id"),
        "step_index": None,  # the event's is the step's index in its run: the page numbers it from Past steps
        "sender_agent_id": part.get("sender_id") or "",
        "tool_call": {"name": call.get("name") or part.get("name") or "", "arguments": ""},
        "call_ids": call.get("tool_call_id") or "",
        "in_context": True,
        "streaming": True,
    }


class LiveRenderer:
    """The renderer of an agent's IDE sockets in this process: adds `html` to the events their pages draw (copies: a
    channel-layer message is shared by every listener in the process), and renders each message once into the frame
    every socket sends."""

    def __init__(self, agent_id: str, names: dict[str, str] | None = None):
        self.agent_id = agent_id
        self.names = names or {}
        self.sockets = 0
        self._shells: set[str] = set()  # streamed parts whose shell the sockets were sent
        self._reasoned: set[str] = set()  # messages of the run whose reasoning was shown (once per message, as stored)
        # the last channel messages and their frames: the embedded layer hands every socket the same message; a
        # shared layer (Redis) an equal copy
        self._frames: deque[tuple[dict, str]] = deque(maxlen=FRAMES_KEPT)
        self.layer_shared = not isinstance(get_channel_layer(), LocalChannelLayer)

    def frame_sent(self, message: dict) -> str | None:
        """The frame already rendered for this channel message (by another socket of the agent), if any."""
        if self.sockets < 2:
            return None  # one socket: nothing to share, nothing kept
        for m, text in self._frames:
            if m is message:
                return text
        if self.layer_shared:
            return next((text for m, text in self._frames if m == message), None)
        return None

    def frame(self, message: dict, events: list[dict]) -> str:
        """The frame of a channel message's events (call through database_sync_to_async when `needs_database`)."""
        text = jsontext.dumps(self.events(events), default=str)
        if self.sockets > 1:
            self._frames.append((message, text))
        return text

    def events(self, events: list[dict]) -> list[dict]:
        """The events as the page gets them (call through database_sync_to_async when `needs_database`)."""
        return [self.event(e) for e in events]

    def event(self, event: dict) -> dict:
        kind = event.get("message_type")
        if kind == "stream_snapshot":
            parts = [p for p in event.get("parts") or () if isinstance(p, dict)]
            return {**event, "parts": [self._shell(p, p, again=True) for p in parts]}
        if kind == "run_status":
            if event.get("status") not in ("created", "running"):
                self._shells.clear()
                self._reasoned.clear()
            out = {**event, "label": status_label(event)}
            return {**out, "html": self._run_card(event)} if _drawn_from_run(event) else out
        if kind not in SHOWN:
            return event
        if event.get("delta"):
            return self._shell(event, event) if kind in STREAMED else event
        if kind in APPROVALS:
            return {**event, "html": self._approval(event)}
        if kind == "error_message":
            event = {**event, **_error_texts(event)}
        self._shells.discard(f"{kind}:{event.get('id')}")
        said = [{"message_type": "reasoning_message"}] if event.get("id") in self._reasoned else []
        items = display_items(event_item(event, names=self.names), before=said)
        if any(i["message_type"] == "reasoning_message" for i in items):
            self._reasoned.add(event.get("id"))
        return {**event, "html": "".join(item_html(i, agent_id=self.agent_id) for i in items)}

    def _approval(self, event: dict) -> str:
        if event["message_type"] == "approval_request_message":
            self._shells.discard(f"approval_request_message:{event.get('id')}")
            reply = Message.objects.select_related("agent").filter(pk=event.get("id"), agent_id=self.agent_id).first()
            if reply is None:
                return ""
            item = {**calls_item(reply=reply), "message_type": "approval_request_message"}
            return render_to_string("core/_wait_calls.html", {"item": item, "agent": {"id": self.agent_id}}).strip()
        recent = Message.objects.filter(agent_id=self.agent_id, role="assistant")
        calls = [c for row in recent.order_by("-seq").values_list("tool_calls", flat=True)[:50] for c in row or ()]
        names = {c.get("id"): c.get("name") for c in calls if isinstance(c, dict)}
        item = {**event_item(event, names=self.names), "answers": answer_items(event.get("approvals"), names)}
        item["in_context"] = False  # the model reads the answers as tool results, not this message
        return item_html(item, agent_id=self.agent_id)

    def _run_card(self, event: dict) -> str:
        """A run's notice (it did not complete: the error, the message to retry) or its model-call wait's card."""
        run = Run.objects.filter(pk=event.get("run_id"), agent_id=self.agent_id).first()
        if run is None:
            return ""
        agent = {"id": self.agent_id}
        if _waits_for_model_call(event):
            return render_to_string("core/_wait_model_call.html", {"agent": agent, "card": model_call_card(run=run)})
        return render_to_string("core/_run_notice.html", {"agent": agent, **notice_context(run)}).strip()

    def _shell(self, part: dict, out: dict, *, again: bool = False) -> dict:
        key = f"{part.get('message_type')}:{part.get('id')}"
        if part.get("message_type") not in STREAMED or (key in self._shells and not again):
            return out
        self._shells.add(key)
        return {**out, "html": item_html(shell_item(part), agent_id=self.agent_id)}
