"""Fixtures for memory tests: an agent made through core.agents.services, messages appended like the runtime does."""

import pytest
from django.db.models import Max

from core.models import Message


@pytest.fixture
def agent(account):
    from tests.factories import make_agent

    return make_agent(account.org, name="memory-agent", include_base_tools=False)


@pytest.fixture
def other_agent(account):
    from tests.factories import make_agent

    return make_agent(account.org, name="other-agent", include_base_tools=False)


def add_message(agent, role: str, text: str, *, in_context: bool = True, kind: str = "", created_at=None) -> Message:
    """Append a message as the runtime does (next seq; listed in the window unless evicted)."""
    seq = (Message.objects.filter(agent=agent).aggregate(m=Max("seq"))["m"] or 0) + 1
    row = Message.objects.create(
        owner_id=agent.owner_id,
        agent=agent,
        seq=seq,
        role=role,
        kind=kind,
        content=[{"type": "text", "text": text}],
        text=text,
    )
    if created_at is not None:
        Message.objects.filter(pk=row.pk).update(created_at=created_at)
        row.created_at = created_at
    if in_context:
        agent.message_ids = [*agent.message_ids, row.id]
        agent.save(update_fields=["message_ids"])
    return row
