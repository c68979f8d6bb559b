"""REST endpoints for tools: library, attach/detach."""

from ninja import Router

from core.api import owner
from core.presenters import agent_state, tool_out
from core.selectors import agent_get
from tools import selectors, services

router = Router(tags=["tools"])


@router.get("/tools/", response=list[dict])
def tools_list(request, name: str | None = None, limit: int = 500):
    return [tool_out(t) for t in selectors.tools_list(owner=owner(request), name=name, limit=limit)]


@router.get("/tools/{tool_id}", response=dict)
def tool_retrieve(request, tool_id: str):
    return tool_out(selectors.tool_get(owner=owner(request), tool_id=tool_id))


@router.get("/agents/{agent_id}/tools", response=list[dict], tags=["agents"])
def agent_tools(request, agent_id: str):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    return [tool_out(t) for t in selectors.agent_tools(agent=agent)]


@router.patch("/agents/{agent_id}/tools/attach/{tool_id}", response=dict, tags=["agents"])
def agent_tool_attach(request, agent_id: str, tool_id: str):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    services.tool_attach(agent=agent, tool=selectors.tool_get(owner=owner(request), tool_id=tool_id))
    return agent_state(agent)


@router.patch("/agents/{agent_id}/tools/detach/{tool_id}", response=dict, tags=["agents"])
def agent_tool_detach(request, agent_id: str, tool_id: str):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    services.tool_detach(agent=agent, tool=selectors.tool_get(owner=owner(request), tool_id=tool_id))
    return agent_state(agent)
