"""REST endpoints of the core app: agents, models, API tokens. Thin: parse, call a service, present."""

from dataclasses import asdict
from typing import Literal

from django.conf import settings
from ninja import Field, Query, Router, Schema
from pydantic import BaseModel

from core import selectors
from core.agents import presenters, services
from core.agents.context import agent_context, agent_with_counts
from core.agents.identities import identities_attach, identities_get
from core.agents.services import BlockInput
from core.api.common import PageQuery, owner
from core.api.schemas import (
    AgentCreateIn,
    AgentStateOut,
    AgentUpdateIn,
    CompactionSettingsIn,
    DeletedOut,
    EmbeddingModelOut,
    ErrorOut,
    ModelOut,
)
from core.errors import Invalid, NotConfigured, NotFound
from core.providers import model_resolve, models_list, providers_list
from core.runs import waits
from core.runs.overflow import agent_compact, compaction_settings_set
from core.runs.sleeptime import sleeptime_configure

router = Router(tags=["agents"])


def _llm_config(body) -> dict:
    """The request's llm_config as a dict of the fields it set (validated by LlmConfigIn)."""
    return body.llm_config.dict(exclude_none=True) if body.llm_config else {}


def _model_settings(body, agent_type: str, base: dict | None = None) -> dict:
    """The agent's model settings from the request; put_inner_thoughts stays off unless asked (Letta's default)."""
    ms = dict(base or {})
    cfg = _llm_config(body)
    for key, src in (("temperature", body.temperature), ("max_tokens", body.max_tokens)):
        if src is not None:
            ms[key] = src
        elif cfg.get(key) is not None:
            ms[key] = cfg[key]
    if "put_inner_thoughts_in_kwargs" in cfg:
        ms["put_inner_thoughts"] = bool(cfg["put_inner_thoughts_in_kwargs"])
    if cfg.get("enable_reasoner") is not None:  # native reasoning (Anthropic: extended thinking)
        ms["enable_reasoner"] = ms["native_reasoning"] = bool(cfg["enable_reasoner"])
    if isinstance(cfg.get("max_reasoning_tokens"), int) and cfg["max_reasoning_tokens"] > 0:
        ms["max_reasoning_tokens"] = min(cfg["max_reasoning_tokens"], 128_000)
    if body.reasoning is not None:
        _apply_reasoning(ms, body.reasoning, agent_type)
    return ms


def _apply_reasoning(ms: dict, reasoning: bool, agent_type: str) -> None:
    """Letta's LLMConfig.apply_reasoning_setting_to_config: a letta_v1_agent never reasons in a `thinking` argument;
    the MemGPT types reason in it when asked, unless the model reasons on its own."""
    if agent_type == "letta_v1_agent" or not reasoning:
        ms["put_inner_thoughts"] = False
        ms["enable_reasoner"] = ms["native_reasoning"] = reasoning
    else:
        ms["enable_reasoner"] = True
        ms["put_inner_thoughts"] = not ms.get("native_reasoning", False)


def _model_handle(body) -> str | None:
    if body.model:
        return body.model
    cfg = _llm_config(body)
    if cfg.get("handle"):
        return cfg["handle"]
    if cfg.get("model"):
        return f"{cfg.get('model_endpoint_type') or 'openai'}/{cfg['model']}"
    return None


def _model_check(owner, handle: str | None) -> None:
    """A model no configured provider serves is refused, naming the field (Letta refuses a handle it does not know:
    HandleNotFoundError); with no provider configured yet any handle is kept, and a send says how to add one."""
    if not handle or not providers_list(owner=owner):
        return
    try:
        model_resolve(owner=owner, handle=handle)
    except NotConfigured as exc:
        raise Invalid(exc.message, detail=[{"loc": ["body", "model"], "msg": exc.message}]) from None


def _embedding_handle(body) -> str:
    """The `embedding` handle, else the one Letta's `embedding_config` names (its handle, or type/model)."""
    if body.embedding:
        return body.embedding
    cfg = body.embedding_config or {}
    if isinstance(cfg.get("handle"), str) and cfg["handle"]:
        return cfg["handle"][:200]
    if isinstance(cfg.get("embedding_model"), str) and cfg["embedding_model"]:
        return f"{cfg.get('embedding_endpoint_type') or 'openai'}/{cfg['embedding_model']}"[:200]
    return ""


def _text(content) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type", "text") == "text")


@router.post("/agents/", response={201: AgentStateOut})
def agent_create(request, body: AgentCreateIn):
    blocks = [
        BlockInput(
            label=b.label,
            value=b.value,
            limit=b.limit,
            description=b.description or "",
            read_only=b.read_only,
            metadata=b.metadata or {},
        )
        for b in body.memory_blocks
    ]
    identities = identities_get(owner=owner(request), identity_ids=body.identity_ids or [])  # 404 before creating
    window = body.context_window_limit or _llm_config(body).get("context_window")
    org = owner(request)
    model = _model_handle(body)
    _model_check(org, model)
    initial = [{"role": m.role, "text": _text(m.content)} for m in body.initial_message_sequence or []]
    agent = services.agent_create(
        owner=org,
        name=body.name or services.agent_name_generate(owner=org),
        model=model,
        system=body.system,
        description=body.description or "",
        memory_blocks=blocks,
        block_ids=body.block_ids,
        tools=body.tools,
        tool_ids=body.tool_ids,
        include_base_tools=body.include_base_tools,
        include_multi_agent_tools=body.include_multi_agent_tools,
        tool_rules=body.tool_rules,
        context_window_limit=window,
        tags=body.tags,
        metadata=body.metadata,
        secrets=body.secrets or body.tool_exec_environment_variables,
        embedding=_embedding_handle(body),
        model_settings=_model_settings(body, body.agent_type or "letta_v1_agent"),
        max_steps=body.max_steps or 50,
        overflow_strategy=body.overflow_strategy or "summarize",
        agent_type=body.agent_type or "letta_v1_agent",
        initial_messages=initial,
        embedding_config=body.embedding_config,
    )
    if body.compaction_settings is not None:  # Letta: a settings object without a model uses the agent's own
        compaction = body.compaction_settings.dict()
        compaction_settings_set(agent=agent, settings={**compaction, "model": compaction["model"] or agent.model})
    if body.enable_sleeptime:
        sleeptime_configure(agent=agent, enabled=True)
    if body.identity_ids:
        identities_attach(agent=agent, identities=identities)
    return 201, presenters.agent_state(agent)


class AgentListQuery(PageQuery):
    """Letta's filters; project_id, template_id, base_template_id, created_by_id, include and include_relationships
    are accepted and ignored (nothing here models them)."""

    name: str | None = None
    identity_id: str | None = Field(None, description="Only the agents that serve this identity.")
    identifier_keys: list[str] | None = Field(None, description="Agents serving an identity with one of these keys.")
    tags: list[str] | None = None
    match_all_tags: bool = False
    query_text: str | None = None
    last_stop_reason: str | None = None
    limit: int = 50
    ascending: bool | None = Field(None, description="Deprecated by Letta in favour of order.")
    order_by: Literal["created_at", "updated_at", "last_run_completion"] | None = None
    sort_by: str | None = Field(None, description="Deprecated by Letta in favour of order_by.")


@router.get("/agents/", response=list[AgentStateOut])
def agents_list(request, q: Query[AgentListQuery]):
    ascending = q.order == "asc" if q.ascending is None else q.ascending
    agents = selectors.agents_list(
        owner=owner(request),
        name=q.name,
        tags=q.tags,
        match_all_tags=q.match_all_tags,
        query_text=q.query_text,
        last_stop_reason=q.last_stop_reason,
        identity_id=q.identity_id,
        identifier_keys=q.identifier_keys,
        before=q.before,
        after=q.after,
        limit=q.limit,
        ascending=ascending,
        order_by=q.order_by or q.sort_by or "created_at",
    )
    return presenters.agents_state(agents)


@router.get("/agents/{agent_id}", response=AgentStateOut)
def agent_retrieve(request, agent_id: str, include: list[str] = Query(None)):  # noqa: B008 - ninja's query marker
    """The agent; with `include=agent.pending_approval`, the approval request its own thread waits on (or null)."""
    agent = selectors.agent_get(owner=owner(request), agent_id=agent_id)
    state = presenters.agent_state(agent)
    if include and "agent.pending_approval" in include:
        state["pending_approval"] = waits.pending_request(agent_id=agent.id, agent_type=agent.agent_type)
    return state


@router.patch("/agents/{agent_id}", response=AgentStateOut)
def agent_modify(request, agent_id: str, body: AgentUpdateIn):
    agent = selectors.agent_get(owner=owner(request), agent_id=agent_id)
    changes = body.dict(exclude_unset=True)
    if "model" not in changes and _model_handle(body):
        changes["model"] = _model_handle(body)
    window = _llm_config(body).get("context_window")
    if window and "context_window_limit" not in changes:
        changes["context_window_limit"] = window
    if body.tool_exec_environment_variables is not None and body.secrets is None:
        changes["secrets"] = body.tool_exec_environment_variables
    changes.pop("reasoning", None)
    if body.temperature is not None or body.max_tokens is not None or body.llm_config or body.reasoning is not None:
        changes["model_settings"] = _model_settings(body, agent.agent_type, agent.model_settings)
    if changes.pop("message_ids", None) is not None:
        raise Invalid("message_ids cannot be set directly; use reset-messages")
    sleeptime = changes.pop("enable_sleeptime", None)
    compaction = changes.pop("compaction_settings", False)
    agent = services.agent_update(agent=agent, changes=changes)
    if compaction is not False:  # the whole object as sent, defaults included (null clears it)
        whole = body.compaction_settings.dict() if body.compaction_settings else None
        compaction_settings_set(agent=agent, settings=whole)
    if sleeptime is not None and (sleeptime or hasattr(agent, "sleeptime")):
        sleeptime_configure(agent=agent, enabled=sleeptime)
    return presenters.agent_state(agent)


@router.delete("/agents/{agent_id}", response={200: DeletedOut})
def agent_delete(request, agent_id: str):
    services.agent_delete(agent=selectors.agent_get(owner=owner(request), agent_id=agent_id))
    return 200, {"deleted": agent_id}


class CompactIn(Schema):
    compaction_settings: CompactionSettingsIn | None = None


class CompactionOut(BaseModel):
    summary: str | None
    num_messages_before: int
    num_messages_after: int


@router.post("/agents/{agent_id}/summarize", response={200: CompactionOut, 502: ErrorOut})
def agent_summarize(request, agent_id: str, body: CompactIn | None = None):
    """Compact the agent's in-context messages now: the oldest (per its compaction settings, with the fields sent
    here laid over them) become one summary message. 400 when nothing can be compacted, 409 while it runs."""
    agent = selectors.agent_get(owner=owner(request), agent_id=agent_id)
    overrides = body.compaction_settings.dict(exclude_unset=True) if body and body.compaction_settings else None
    return asdict(agent_compact(agent=agent, overrides=overrides))


@router.post("/agents/{agent_id}/recompile", response=str)
def agent_recompile(request, agent_id: str, update_timestamp: bool = False, dry_run: bool = False):
    """The agent's system prompt as its next call sends it (compiled from its prompt, memory blocks and memory
    statistics). It is compiled afresh at every step, so there is nothing to store: `dry_run` changes nothing."""
    agent = agent_with_counts(owner=owner(request), agent_id=agent_id)
    if not agent.message_ids:
        raise NotFound(f"No system message found for agent '{agent_id}'")
    return agent_context(agent=agent).request["messages"][0]["content"]


# Models listed by an OpenAI-compatible server that are not for chat (embeddings, speech, images, moderation).
_NOT_CHAT = ("embed", "whisper", "tts", "dall-e", "moderation", "transcribe", "gpt-image", "davinci", "babbage")


@router.get("/models/", response=list[ModelOut], tags=["models"])
def models(request):
    """The chat models the caller can run; embedding models are `GET /v1/models/embedding`."""
    chat = [m for m in models_list(owner=owner(request)) if not any(w in m["model"].lower() for w in _NOT_CHAT)]
    return [m for m in chat if m["handle"] != settings.EMBEDDING_MODEL]


@router.get("/models/embedding", response=list[EmbeddingModelOut], tags=["models"])
def embedding_models(request):
    handle = settings.EMBEDDING_MODEL
    return [{"handle": handle, "embedding_model": handle.partition("/")[2] or handle}] if handle else []
