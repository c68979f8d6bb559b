"""Helpers shared by the IDE views: who is asking, and the agent they may see (in which of its threads)."""

import copy

from django.http import Http404

from core import accounts, selectors
from core.errors import NotFound
from core.models import Agent, Conversation
from core.runs.persistence import thread_view


def org(request):
    return accounts.principal_from_user(request.user).org


def owned_or_404(request, model_or_queryset, object_id: str):
    """The signed-in owner's row with this id, or Http404 (pages' twin of core.selectors.owned_get)."""
    try:
        return selectors.owned_get(model_or_queryset, owner=org(request), id=object_id)
    except NotFound as exc:
        raise Http404(str(exc)) from exc


def agent_or_404(request, agent_id: str):
    return owned_or_404(request, Agent, agent_id)


def thread_or_404(request, agent: Agent) -> Agent:
    """A copy of the agent as the thread `?conversation=` names sees it (its window and model; no parameter: the
    agent's own thread), for reads: the agent itself is left as it is, so a save never writes a thread's state."""
    conversation_id = request.GET.get("conversation") or None
    if (
        conversation_id is not None
        and not Conversation.objects.filter(pk=conversation_id, agent=agent, deleted=False).exists()
    ):
        raise Http404("no such conversation")
    return thread_view(copy.copy(agent), conversation_id)
