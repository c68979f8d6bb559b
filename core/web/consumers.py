"""The agent websocket: joins the agent's group and forwards its events; browser sends start runs.

A socket opened with `?conversation=conv-…` follows that conversation of the agent: its sends go there, and the
events of runs in the agent's other threads are not forwarded (events of no run, such as block updates, are).

A socket opened with `?batch=1` (the IDE's pages) gets every frame as a JSON array of events: a run's events
travel in batches (core.runs.emit), each then one frame instead of one per event. Without it, one event a frame.
The IDE's events that the conversation shows carry their item's server-rendered HTML (core.web.live).

A socket lives only as long as the session that opened it: logging out (any tab) closes it at once, a message
sent after the session ended is refused, and the socket closes when the session expires.
"""

import asyncio
import hashlib
from importlib import import_module
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.contrib.auth.signals import user_logged_out
from django.dispatch import receiver

from core import jsontext
from core.accounts import principal_from_user
from core.events import agent_group, send_event, server_loop_remember
from core.models import Agent, Conversation
from core.runs.emit import resync_request
from core.selectors import agent_names
from core.telemetry import metrics
from core.text import first_bad_string, json_input
from core.web.live import needs_database, renderer_close, renderer_open
from core.web.ws_handlers import handle_client_message

SESSION_ENDED = 4401  # close code: the session that opened the socket ended (logout or expiry)
SESSION_ENDED_EVENT = "session_ended"


def session_group(session_key: str) -> str:
    """The channel group of every socket opened with this session (the key itself never leaves the server)."""
    return "session." + hashlib.sha256(session_key.encode()).hexdigest()[:40]


class AgentConsumer(AsyncWebsocketConsumer):
    async def connect(self):
        user = self.scope.get("user")
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        self.batched = query.get("batch", [""])[-1] in ("1", "true")
        self.live = None
        self.agent_id = self.scope["url_route"]["kwargs"]["agent_id"]
        self.principal = await database_sync_to_async(_principal_for)(user, self.agent_id)
        self.thread = query.get("conversation", [""])[-1] or None
        if (
            self.principal is not None
            and self.thread is not None
            and not await database_sync_to_async(_conversation_exists)(self.agent_id, self.thread)
        ):
            self.principal = None  # not one of this agent's conversations: refused like another owner's agent
        # Behind AuthMiddlewareStack (agents_ide/asgi.py) a user is only ever authenticated by a session; a scope
        # built without one (in-process tests) has no session to outlive.
        session = self.scope.get("session")
        self.session_key = getattr(session, "session_key", None)
        if self.principal is None or (session is not None and not self.session_key):
            await self.close(code=4404)  # unauthenticated or not this owner's agent: indistinguishable
            return
        self.group = agent_group(self.agent_id)
        # the IDE's pages draw the conversation from the items' HTML (core.web.live); the API's sockets get Letta's
        if self.batched:
            names = await database_sync_to_async(agent_names)(owner=self.principal.org)
            self.live = renderer_open(self.agent_id, names)
        self.groups_joined = [self.group] + ([session_group(self.session_key)] if self.session_key else [])
        server_loop_remember()
        for group in self.groups_joined:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept()
        metrics.WEBSOCKETS.inc()
        self.counted = True
        await resync_request(self.agent_id)  # a reply streaming now: what it streamed so far, then the rest
        if self.session_key:
            age = await database_sync_to_async(session.get_expiry_age)()
            self._expiry = asyncio.get_running_loop().call_later(
                max(age, 0), lambda: asyncio.ensure_future(self.close(code=SESSION_ENDED))
            )

    async def disconnect(self, code):
        if getattr(self, "counted", False):
            metrics.WEBSOCKETS.dec()
        if getattr(self, "live", None) is not None:
            renderer_close(self.agent_id)
        if getattr(self, "_expiry", None) is not None:
            self._expiry.cancel()
        for group in getattr(self, "groups_joined", ()):
            await self.channel_layer.group_discard(group, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None):
        if self.session_key and not await database_sync_to_async(_session_alive)(
            self.session_key, self.principal.user.pk
        ):
            await self.close(code=SESSION_ENDED)
            return
        try:
            payload = json_input(text_data or "")
            if not isinstance(payload, dict):
                raise ValueError
        except ValueError:
            await self.send_json(
                {
                    "message_type": "error_message",
                    "message": 'Send JSON objects such as {"type": "user_message", "text": "hi"}',
                }
            )
            return
        if found := first_bad_string(payload):
            await self.send_json(
                {"message_type": "error_message", "message": f"{found[0]} contains {found[1]}, which cannot be stored."}
            )
            return

        reply = await handle_client_message(
            owner=self.principal.org, agent_id=self.agent_id, payload=payload, thread=self.thread
        )
        if reply is not None:
            await self.send_json(reply)

    async def dispatch(self, message):
        # An agent's events touch no database: they skip channels' close_old_connections before each handler, a
        # hop to a worker thread per event batch (database_sync_to_async closes them for the handlers that query).
        if message["type"] == "agent.event":
            await self.agent_event(message)
        else:
            await super().dispatch(message)

    async def agent_event(self, message):
        if message.get("run_id") and message.get("conversation_id") != self.thread:
            return  # a run in another of the agent's threads
        events = message.get("events") or [message["event"]]
        if any(e.get("message_type") == SESSION_ENDED_EVENT for e in events):
            await self.close(code=SESSION_ENDED)
            return
        if self.live is not None:  # rendered once for every socket of the agent in this process
            frame = self.live.frame_sent(message)
            if frame is None and needs_database(events):
                frame = await database_sync_to_async(self.live.frame)(message, events)
            elif frame is None:
                frame = self.live.frame(message, events)
            await self.send(text_data=frame)
            return
        for event in events:
            await self._send_frame(event)

    async def send_json(self, data: dict):
        await self._send_frame([self.live.event(data)] if self.live is not None else data)

    async def _send_frame(self, value):
        await self.send(text_data=jsontext.dumps(value, default=str))


def _conversation_exists(agent_id: str, conversation_id: str) -> bool:
    return Conversation.objects.filter(pk=conversation_id, agent_id=agent_id, deleted=False).exists()


def _principal_for(user, agent_id: str):
    if user is None or not user.is_authenticated:
        return None
    principal = principal_from_user(user)
    if not Agent.objects.filter(owner=principal.org, id=agent_id).exists():
        return None
    return principal


def _session_alive(session_key: str, user_pk) -> bool:
    """Whether the session still exists, unexpired, for the same user (read from the session store, not the copy
    the socket loaded when it connected)."""

    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    return str(store.load().get(SESSION_KEY)) == str(user_pk)


@receiver(user_logged_out)
def _close_sockets_of_session(sender, request=None, **kwargs):
    """Logout: every socket opened with this session closes (in any process, through the channel layer)."""
    key = getattr(getattr(request, "session", None), "session_key", None)
    if key:
        send_event(session_group(key), {"message_type": SESSION_ENDED_EVENT})
