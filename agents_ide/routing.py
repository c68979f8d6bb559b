"""Websocket routes."""

from django.urls import path

from core.web.consumers import AgentConsumer

websocket_urlpatterns = [
    path("ws/agents/<str:agent_id>/", AgentConsumer.as_asgi()),
]
