"""The agent websocket: joins the agent's group and forwards its events; browser sends start runs."""

import json

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer

from core.events import agent_group, server_loop_remember


class AgentConsumer(AsyncWebsocketConsumer):
    async def connect(self):
        user = self.scope.get("user")
        self.agent_id = self.scope["url_route"]["kwargs"]["agent_id"]
        self.principal = await database_sync_to_async(_principal_for)(user, self.agent_id)
        if self.principal is None:
            await self.close(code=4404)  # unauthenticated or not this owner's agent: indistinguishable
            return
        self.group = agent_group(self.agent_id)
        server_loop_remember()
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        if getattr(self, "group", None):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive(self, text_data=None, bytes_data=None):
        try:
            payload = json.loads(text_data or "")
            if not isinstance(payload, dict):
                raise ValueError
        except ValueError:
            await self.send_json({"message_type": "error_message", "message": "Send JSON objects such as {\"type\": \"user_message\", \"text\": \"hi\"}"})
            return
        from core.ws_handlers import handle_client_message

        reply = await handle_client_message(principal=self.principal, agent_id=self.agent_id, payload=payload)
        if reply is not None:
            await self.send_json(reply)

    async def agent_event(self, message):
        for event in message.get("events") or [message["event"]]:
            await self.send_json(event)

    async def send_json(self, data: dict):
        await self.send(text_data=json.dumps(data, default=str))


def _principal_for(user, agent_id: str):
    from core.accounts import principal_from_user
    from core.models import Agent

    if user is None or not user.is_authenticated:
        return None
    principal = principal_from_user(user)
    if not Agent.objects.filter(owner=principal.org, id=agent_id).exists():
        return None
    return principal
