"""Helpers shared by the IDE views: who is asking, and the agent they may see."""

from django.http import Http404

from core import accounts, selectors
from core.errors import NotFound


def org(request):
    return accounts.principal_from_user(request.user).org


def agent_or_404(request, agent_id: str):
    try:
        return selectors.agent_get(owner=org(request), agent_id=agent_id)
    except NotFound as exc:
        raise Http404(str(exc)) from exc
