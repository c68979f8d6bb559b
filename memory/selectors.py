"""Reads of blocks and their history, filtered by owner."""

from django.db.models import QuerySet

from core.errors import NotFound
from core.models import Agent, Organization
from memory.models import Block, BlockHistory


def block_get(*, owner: Organization, block_id: str) -> Block:
    block = Block.objects.filter(owner=owner, id=block_id).first()
    if block is None:
        raise NotFound(f"Block '{block_id}' not found")
    return block


def blocks_list(*, owner: Organization, label: str | None = None, limit: int = 200) -> QuerySet[Block]:
    qs = Block.objects.filter(owner=owner).order_by("label", "created_at")
    if label:
        qs = qs.filter(label=label)
    return qs[:limit]


def agent_blocks(*, agent: Agent) -> list[Block]:
    """The agent's blocks in their display order."""
    return list(Block.objects.filter(agentblock__agent=agent).order_by("agentblock__position", "agentblock__id"))


def agent_block_by_label(*, agent: Agent, label: str) -> Block:
    block = Block.objects.filter(agentblock__agent=agent, label=label).first()
    if block is None:
        raise NotFound(f"Agent '{agent.id}' has no block labelled '{label}'")
    return block


def block_agents(*, block: Block) -> list[Agent]:
    return list(Agent.objects.filter(agentblock__block=block).order_by("name"))


def block_history(*, block: Block, limit: int = 100) -> list[BlockHistory]:
    return list(BlockHistory.objects.filter(block=block).select_related("actor_user")[:limit])
