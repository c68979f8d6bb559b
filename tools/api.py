"""REST endpoints for tools: library CRUD, schema generation, the workbench (runs), attach/detach."""

from ninja import Query, Router

from core.agents.presenters import agent_state, tool_out
from core.agents.versions import noted
from core.api.common import PageQuery, WholeListQuery, owner
from core.api.schemas import AgentStateOut
from core.errors import DomainError, Invalid, NotFound
from core.pagination import page
from core.runs.tool_exec import agent_builtin_tool_run
from core.selectors import agent_get
from tools import execution, presenters, selectors, services
from tools.mcp_services import mcp_tool_execute
from tools.schemas import (
    AgentToolRunIn,
    GenerateSchemaIn,
    ToolApprovalIn,
    ToolCreateIn,
    ToolDeletedOut,
    ToolExecutionResultOut,
    ToolOut,
    ToolRunIn,
    ToolRunOut,
    ToolRunReturnOut,
    ToolSchemaOut,
    ToolSearchIn,
    ToolSearchResultOut,
    ToolUpdateIn,
)

router = Router(tags=["tools"])


class SearchModeRefused(DomainError):
    """Letta answers 400 to a tool search it cannot run."""

    status = 400


_FIELDS = (
    "description",
    "tags",
    "return_char_limit",
    "pip_requirements",
    "sandbox",
    "env_vars",
    "allow_network",
    "default_requires_approval",
)


def _set_fields(body, names=_FIELDS) -> dict:
    given = body.dict(exclude_unset=True)
    return {k: given[k] for k in names if k in given}


class ToolListQuery(PageQuery):
    limit: int = 50
    name: str | None = None
    names: list[str] | None = None
    tool_ids: list[str] | None = None
    return_only_letta_tools: bool = False
    search: str | None = None
    tool_types: list[str] | None = None
    exclude_tool_types: list[str] | None = None


@router.get("/tools/", response=list[ToolOut])
def tools_list(request, q: Query[ToolListQuery]):
    org = owner(request)
    if q.after is None:
        # As Letta: a first page installs built-ins the owner lacks (a web tool added since the account was made),
        # so `?name=web_search` finds it.
        services.builtin_tools_ensure(owner=org)
    tools = selectors.tools_page(
        owner=org,
        after=q.after,
        before=q.before,
        limit=q.limit,
        ascending=q.order == "asc",
        name=q.name,
        names=q.names,
        ids=q.tool_ids,
        letta_only=q.return_only_letta_tools,
        search=q.search,
        tool_types=q.tool_types,
        exclude_tool_types=q.exclude_tool_types,
    )
    return [tool_out(t) for t in tools]


@router.post("/tools/", response={201: ToolOut})
def tool_create(request, body: ToolCreateIn):
    fields = _set_fields(body)
    fields["sandbox"] = fields.get("sandbox") or ""
    tool = services.tool_create(
        owner=owner(request),
        source_code=body.source_code,
        json_schema=body.schema_,
        args_json_schema=body.args_json_schema,
        **fields,
    )
    return 201, tool_out(tool)


@router.put("/tools/", response=ToolOut)
def tool_upsert(request, body: ToolCreateIn):
    tool = services.tool_upsert(
        owner=owner(request),
        source_code=body.source_code,
        json_schema=body.schema_,
        args_json_schema=body.args_json_schema,
        **_set_fields(body),
    )
    return tool_out(tool)


@router.post("/tools/generate-schema", response=ToolSchemaOut)
def tool_generate_schema(request, body: GenerateSchemaIn):
    return services.tool_schema_resolve(source_code=body.source_code, name=body.name)


@router.post("/tools/run", response=ToolRunReturnOut)
def tool_run(request, body: ToolRunIn):
    org = owner(request)
    agent = agent_get(owner=org, agent_id=body.agent_id) if body.agent_id else None
    run = execution.tool_execute(
        owner=org,
        source_code=body.source_code,
        args=body.args,
        env_vars=body.env_vars,
        agent=agent,
        name=body.name,
        json_schema=body.schema_,
        sandbox=body.sandbox,
        pip_requirements=body.pip_requirements,
        allow_network=body.allow_network,
    )
    return presenters.tool_return_message(run)


@router.post("/tools/add-base-tools", response=list[ToolOut])
def tools_add_base(request):
    """Letta's `upsert_base_tools`: install (or refresh) the built-in tools and return them; idempotent."""
    return [tool_out(t) for t in services.builtin_tools_ensure(owner=owner(request)).values()]


@router.post("/tools/search", response=list[ToolSearchResultOut])
def tools_search(request, body: ToolSearchIn):
    if body.search_mode == "vector":
        raise SearchModeRefused(
            "Tool semantic search requires tool embeddings, which this server does not compute; "
            "use search_mode 'fts' or 'hybrid' (tools matched by the words of the query)."
        )
    found = selectors.tools_search(
        owner=owner(request), query=body.query, tool_types=body.tool_types, tags=body.tags, limit=body.limit
    )
    return [{"tool": tool_out(t), "fts_rank": rank, "combined_score": score} for t, rank, score in found]


@router.get("/tools/{tool_id}", response=ToolOut)
def tool_retrieve(request, tool_id: str):
    return tool_out(selectors.tool_get(owner=owner(request), tool_id=tool_id))


@router.patch("/tools/{tool_id}", response=ToolOut)
def tool_update(request, tool_id: str, body: ToolUpdateIn):
    tool = selectors.tool_get(owner=owner(request), tool_id=tool_id)
    changes = _set_fields(body, ("source_code",) + _FIELDS)
    if body.schema_:
        changes["json_schema"] = body.schema_
    if body.args_json_schema:
        changes["args_json_schema"] = body.args_json_schema
    with noted(body.version_message):
        return tool_out(services.tool_update(tool=tool, changes=changes))


@router.delete("/tools/{tool_id}", response=ToolDeletedOut)
def tool_delete(request, tool_id: str):
    services.tool_delete(tool=selectors.tool_get(owner=owner(request), tool_id=tool_id), builtin_ok=True)
    return {"id": tool_id, "deleted": True}


@router.get("/tools/{tool_id}/runs", response=list[ToolRunOut])
def tool_runs(
    request, tool_id: str, limit: int = Query(50, description="Page size; values outside 1..500 are clamped to it.")
):
    tool = selectors.tool_get(owner=owner(request), tool_id=tool_id)
    return [presenters.tool_run_out(r) for r in selectors.tool_runs(owner=tool.owner, tool_name=tool.name, limit=limit)]


@router.get("/agents/{agent_id}/tools", response=list[ToolOut], tags=["agents"])
def agent_tools(request, agent_id: str, q: Query[WholeListQuery]):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    tools = page(selectors.agent_tools(agent=agent), after=q.after, before=q.before, limit=q.limit, order=q.order)
    return [tool_out(t) for t in tools]


@router.post(
    "/agents/{agent_id}/tools/{tool_name}/run", response=ToolExecutionResultOut, tags=["agents"], exclude_unset=True
)
def agent_tool_run(request, agent_id: str, tool_name: str, body: AgentToolRunIn):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    tool = agent.tools.filter(name=tool_name).first()
    if tool is None:
        raise NotFound(f"Tool '{tool_name}' is not attached to agent '{agent_id}'")
    if tool.tool_type == "external_mcp":
        result = presenters.tool_execution_result(
            mcp_tool_execute(tool=tool, args=body.args, agent=agent, origin="agent")
        )
    elif tool.tool_type != "custom":
        result = agent_builtin_tool_run(agent=agent, name=tool.name, args=body.args)
    else:
        run = execution.tool_execute(
            owner=agent.owner, source_code=tool.source_code, args=body.args, tool=tool, agent=agent, origin="agent"
        )
        result = presenters.tool_execution_result(run)
    return _without_failed_return(result)


def _without_failed_return(result: dict) -> dict:
    """As Letta's run_tool_for_agent (routers/v1/agents.py): a failed run answers no `func_return`; the error is in
    `error_message` (and `error_type`), its traceback in `stderr`."""
    if result["status"] != "error":
        return result
    return {**result, "func_return": None, "error_message": result.get("error_message") or result.get("tool_return")}


@router.patch("/agents/{agent_id}/tools/attach/{tool_id}", response=AgentStateOut, tags=["agents"])
def agent_tool_attach(request, agent_id: str, tool_id: str):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    services.tool_attach(agent=agent, tool=selectors.tool_get(owner=owner(request), tool_id=tool_id))
    return agent_state(agent)


@router.patch("/agents/{agent_id}/tools/detach/{tool_id}", response=AgentStateOut, tags=["agents"])
def agent_tool_detach(request, agent_id: str, tool_id: str):
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    services.tool_detach(agent=agent, tool=selectors.tool_get(owner=owner(request), tool_id=tool_id))
    return agent_state(agent)


@router.patch("/agents/{agent_id}/tools/approval/{tool_name}", response=AgentStateOut, tags=["agents"])
def agent_tool_approval(
    request,
    agent_id: str,
    tool_name: str,
    body: ToolApprovalIn | None = None,
    requires_approval: bool | None = Query(None, deprecated=True, description="Letta's deprecated form of the body."),
):
    """Letta's modify_approval_for_tool: add or remove the agent's requires_approval rule for the tool."""
    agent = agent_get(owner=owner(request), agent_id=agent_id)
    given = (
        None
        if body is None
        else next((v for v in (body.requires_approval, body.body_requires_approval) if v is not None), None)
    )
    required = given if given is not None else requires_approval
    if required is None:
        raise Invalid("requires_approval must be provided either in request body or as query parameter")
    return agent_state(services.agent_tool_approval_set(agent=agent, tool_name=tool_name, requires_approval=required))
