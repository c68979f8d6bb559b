"""Memory in the IDE: an agent's blocks (edit, create, attach, detach), archival and recall search, the blocks page."""

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_POST
from django_htmx.http import trigger_client_event

from core.errors import DomainError
from core.web.common import agent_or_404, org, owned_or_404
from memory import selectors, services
from memory.models import Block
from memory.presenters import block_cards


def _block_or_404(request, block_id: str):
    return owned_or_404(request, Block, block_id)


def _agent_blocks_ctx(request, agent, **extra) -> dict:
    return {
        "agent": agent,
        "blocks": block_cards(selectors.agent_blocks(agent=agent)),
        "other_blocks": selectors.blocks_attachable(owner=org(request), agent=agent),
        **extra,
    }


@login_required
def agent_blocks(request, agent_id: str):
    agent = agent_or_404(request, agent_id)
    return TemplateResponse(request, "memory/_agent_blocks.html", _agent_blocks_ctx(request, agent))


@login_required
@require_POST
def block_save(request, agent_id: str, block_id: str):
    """Save one block from the workspace; limit errors come back inline on the card."""
    agent = agent_or_404(request, agent_id)
    block = _block_or_404(request, block_id)
    error = ""
    try:
        limit = int(request.POST.get("limit") or block.limit)
        block = services.block_update(
            block=block, changes={"value": request.POST.get("value", ""), "limit": limit}, actor_user=request.user
        )
    except ValueError:
        error = "The limit must be a whole number."
    except DomainError as exc:
        error = str(exc)
    if error:
        block.value, block.limit = request.POST.get("value", ""), request.POST.get("limit") or block.limit
    else:
        block_cards([block])
    response = TemplateResponse(
        request, "memory/_block_card.html", {"agent": agent, "b": block, "error": error, "saved": not error}
    )
    return response if error else trigger_client_event(response, "block-saved")


@login_required
def block_card(request, agent_id: str, block_id: str):
    """One block's card as it is now, with its last change; `?live=1`: the change just arrived (it flashes, the diff
    is open)."""
    agent = agent_or_404(request, agent_id)
    block = block_cards([_block_or_404(request, block_id)])[0]
    return TemplateResponse(
        request, "memory/_block_card.html", {"agent": agent, "b": block, "live": request.GET.get("live") == "1"}
    )


@login_required
@require_POST
def block_new(request, agent_id: str):
    agent = agent_or_404(request, agent_id)
    error = ""
    try:
        limit = int(request.POST.get("limit") or 5000)
        block = services.block_create(
            owner=agent.owner,
            label=request.POST.get("label", ""),
            value=request.POST.get("value", ""),
            limit=limit,
            description=request.POST.get("description", ""),
        )
        services.block_attach(agent=agent, block=block)
    except ValueError:
        error = "The limit must be a whole number."
    except DomainError as exc:
        error = str(exc)
    response = TemplateResponse(
        request, "memory/_agent_blocks.html", _agent_blocks_ctx(request, agent, new_error=error, new_data=request.POST)
    )
    return response if error else trigger_client_event(response, "block-saved")


@login_required
@require_POST
def block_attach_toggle(request, agent_id: str, action: str):
    agent = agent_or_404(request, agent_id)
    error = ""
    try:
        if action == "attach":
            services.block_attach_by_id(agent=agent, block_id=request.POST.get("block_id", ""))
        else:
            services.block_detach(agent=agent, block_id=request.POST.get("block_id", ""))
    except DomainError as exc:
        error = str(exc)
    response = TemplateResponse(
        request, "memory/_agent_blocks.html", _agent_blocks_ctx(request, agent, attach_error=error)
    )
    return response if error else trigger_client_event(response, "block-saved")


@login_required
def archival(request, agent_id: str):
    """Browse (newest first) or search the agent's archival memory, naming the search mode in use."""
    agent = agent_or_404(request, agent_id)
    q = (request.GET.get("q") or "").strip()
    error = ""
    try:
        passages = (
            selectors.passages_search(agent=agent, query=q, top_k=20)
            if q
            else selectors.passages_list(agent=agent, limit=50, ascending=False)
        )
    except DomainError as exc:
        passages, error = [], str(exc)
    return TemplateResponse(
        request,
        "memory/_archival.html",
        {
            "agent": agent,
            "q": q,
            "passages": passages,
            "error": error,
            "mode": selectors.archival_search_mode(agent),
            "count": selectors.passages_count(agent=agent),
            "rq": request.GET.get("rq", ""),
        },
    )


@login_required
@require_POST
def archival_insert(request, agent_id: str):
    agent = agent_or_404(request, agent_id)
    tags = [t.strip() for t in request.POST.get("tags", "").split(",") if t.strip()]
    try:
        services.passage_insert(agent=agent, text=request.POST.get("text", ""), tags=tags, source="user")
    except DomainError as exc:
        return TemplateResponse(
            request,
            "memory/_archival.html",
            {
                "agent": agent,
                "passages": selectors.passages_list(agent=agent, limit=50, ascending=False),
                "insert_error": str(exc),
                "mode": selectors.archival_search_mode(agent),
                "count": selectors.passages_count(agent=agent),
            },
        )
    request.method = "GET"
    return trigger_client_event(archival(request, agent_id), "context-changed")


@login_required
@require_POST
def archival_delete(request, agent_id: str, passage_id: str):
    agent = agent_or_404(request, agent_id)
    try:
        services.passage_delete(agent=agent, passage_id=passage_id)
    except DomainError as exc:
        raise Http404(str(exc)) from exc
    request.method = "GET"
    return trigger_client_event(archival(request, agent_id), "context-changed")


@login_required
def recall(request, agent_id: str):
    agent = agent_or_404(request, agent_id)
    q = request.GET.get("rq", "")
    role = request.GET.get("role") or None
    try:
        rows, error = selectors.messages_search(agent=agent, query=q, roles=[role] if role else None, limit=20), ""
    except DomainError as exc:
        rows, error = [], str(exc)
    return TemplateResponse(request, "memory/_recall.html", {"agent": agent, "rows": rows, "rq": q, "error": error})


@login_required
def blocks_page(request):
    blocks = list(selectors.blocks_list(owner=org(request), limit=500).prefetch_related("agents"))
    return TemplateResponse(request, "memory/blocks.html", {"blocks": blocks, "nav": "blocks"})


@login_required
def block_detail(request, block_id: str):
    block = _block_or_404(request, block_id)
    error, saved = "", False
    if request.method == "POST":
        try:
            limit = int(request.POST.get("limit") or block.limit)
            block = services.block_update(
                block=block,
                changes={
                    "value": request.POST.get("value", ""),
                    "limit": limit,
                    "description": request.POST.get("description", block.description),
                },
                actor_user=request.user,
            )
            saved = True
        except ValueError:
            error = "The limit must be a whole number."
        except DomainError as exc:
            error = str(exc)
    history = [(h, selectors.block_history_diff(h)) for h in selectors.block_history(block=block)]
    return TemplateResponse(
        request,
        "memory/block_detail.html",
        {
            "blk": block,
            "agents": selectors.block_agents(block=block),
            "history": history,
            "error": error,
            "saved": saved,
            "nav": "blocks",
            "draft": request.POST.get("value") if error else None,
        },
        status=400 if error else 200,
    )


@login_required
@require_POST
def block_restore(request, block_id: str, version: int):
    block = _block_or_404(request, block_id)
    try:
        services.block_restore(block=block, version=version, actor_user=request.user)
    except DomainError as exc:
        raise Http404(str(exc)) from exc
    return redirect("block_detail", block_id=block.id)
