"""Helpers shared by the IDE views: who is asking, and the agent they may see."""

from django.http import Http404

from core import accounts, selectors
from core.errors import NotFound
from core.models import Agent


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
