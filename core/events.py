"""Realtime events to open IDE tabs (channel groups). Call after the transaction commits."""

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer


def agent_group(agent_id: str) -> str:
    """The channel group every tab showing this agent joins."""
    return f"agent.{agent_id}".replace("-", "_")


def owner_group(owner_id: str) -> str:
    """The group of every tab of an owner (agents list: running indicators)."""
    return f"owner.{owner_id}".replace("-", "_")


def send_event(group: str, event: dict) -> None:
    """Send one event dict to a channel group (the consumer forwards it to the browser as JSON)."""
    layer = get_channel_layer()
    if layer is not None:
        async_to_sync(layer.group_send)(group, {"type": "agent.event", "event": event})


def send_events(group: str, events: list[dict]) -> None:
    """Send several events to a group in one channel-layer message (tabs receive them one by one, in order)."""
    layer = get_channel_layer()
    if layer is not None and events:
        async_to_sync(layer.group_send)(group, {"type": "agent.event", "events": events})


async def asend_event(group: str, event: dict) -> None:
    layer = get_channel_layer()
    if layer is not None:
        await layer.group_send(group, {"type": "agent.event", "event": event})


def broadcast_block_update(block) -> None:
    """Push a block's new value to every tab showing an agent that has the block."""
    from memory.models import AgentBlock

    event = {"message_type": "block_update", "block": {"id": block.id, "label": block.label, "value": block.value,
                                                       "limit": block.limit, "version": block.version,
                                                       "read_only": block.read_only}}
    for agent_id in AgentBlock.objects.filter(block_id=block.id).values_list("agent_id", flat=True):
        send_event(agent_group(agent_id), event)
