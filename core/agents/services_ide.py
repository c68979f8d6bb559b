"""Agent writes the IDE offers beyond create/update/delete: templates, duplicate, settings and rules checked against what the owner has."""

from django.db import transaction

from core import providers
from core.agents import services
from core.agents.agentfile.importer import ImportOptions, agentfile_import
from core.agents.agentfile.templates import template_load
from core.agents.services import BlockInput, agent_create
from core.engine.types import tool_rule_from_dict
from core.errors import Invalid, NotConfigured
from core.models import Agent, Organization
from core.selectors import agent_tags
from memory import services as memory_services
from memory.models import Block
from memory.selectors import agent_blocks
from tools.selectors import agent_tools

# Built-in starting points until the agent-file templates land (core/agents/agentfile/); key -> (label, blocks).
BUILTIN_TEMPLATES = {
    "memgpt_chat": (
        "MemGPT chat agent (persona + human)",
        [
            BlockInput(
                label="persona",
                value="I am a friendly, curious assistant. I remember what people tell me "
                "and keep my notes in memory up to date.",
                limit=5000,
            ),
            BlockInput(label="human", value="Nothing is known about the human yet.", limit=5000),
        ],
    ),
    "blank": ("Blank agent (no memory blocks)", []),
}


def agent_templates() -> list[tuple[str, str]]:
    """(key, label) of the templates offered on the create form: the shipped agent files, else the built-ins."""
    try:  # the shipped agent files are the templates; built-ins only if that app is missing
        from core.agents.agentfile.templates import templates_list

        shipped = [(f"af:{t['name']}", t["title"]) for t in templates_list()]
    except ImportError:
        shipped = []
    return shipped or [(k, v[0]) for k, v in BUILTIN_TEMPLATES.items()]


def agent_create_from_template(
    *, owner: Organization, template: str, name: str, model: str, agent_type: str | None = None
) -> Agent:
    """Create an agent from a template key (a shipped agent file or a built-in); writes the agent and its blocks.
    `agent_type` overrides the template's (None: the template's own)."""
    if template.startswith("af:"):
        result = agentfile_import(
            owner=owner,
            parsed=template_load(template[3:]),
            options=ImportOptions(name=name, model=model, agent_type=agent_type or None),
        )
        agents = {a.id: a for a in Agent.objects.filter(id__in=result.agent_ids)}
        team_block_fill(agents=[agents[i] for i in result.agent_ids])
        return agents[result.agent_ids[0]]
    _, blocks = BUILTIN_TEMPLATES.get(template, BUILTIN_TEMPLATES["blank"])
    return agent_create(
        owner=owner,
        name=name,
        model=model,
        memory_blocks=[BlockInput(**vars(b)) for b in blocks],
        agent_type=agent_type or "letta_v1_agent",
    )


def team_block_fill(*, agents: list[Agent]) -> None:
    """A team template's agents share a `team` block: list each member's name and id in it (a block update)."""
    if len(agents) < 2:
        return
    block = Block.objects.filter(agentblock__agent=agents[0], label="team").first()
    if block is None:
        return
    lines = "\n".join(f"- {a.name}: {a.id}" for a in agents)
    memory_services.block_update(block=block, changes={"value": f"{block.value.rstrip()}\n{lines}"})


@transaction.atomic
def agent_duplicate(*, agent: Agent, name: str | None = None) -> Agent:
    """Copy an agent's settings, tools, rules, tags and (unshared copies of) its blocks; no messages."""

    blocks = [
        BlockInput(
            label=b.label,
            value=b.value,
            limit=b.limit,
            description=b.description,
            read_only=b.read_only,
            metadata=dict(b.metadata or {}),
        )
        for b in agent_blocks(agent=agent)
    ]
    return agent_create(
        owner=agent.owner,
        name=name or f"{agent.name} (copy)",
        model=agent.model,
        system=agent.system,
        description=agent.description,
        memory_blocks=blocks,
        tool_ids=[t.id for t in agent_tools(agent=agent)],
        include_base_tools=False,
        tool_rules=list(agent.tool_rules or []),
        context_window_limit=agent.context_window_limit,
        tags=agent_tags(agent),
        metadata=dict(agent.metadata or {}),
        secrets=dict(agent.secrets or {}),
        embedding=agent.embedding,
        model_settings=dict(agent.model_settings or {}),
        max_steps=agent.max_steps,
        overflow_strategy=agent.overflow_strategy,
        agent_type=agent.agent_type,
    )


def model_served_check(*, owner: Organization, handle: str) -> None:
    """Invalid, listing the models that are served, unless a configured provider serves this handle.

    A provider that lists its models (a server's /models, or the names given in Settings) serves only those;
    one without a listing (a hosted API with a key) serves any model under its prefix.
    """
    listed = providers.models_list(owner=owner)
    handles = sorted({m["handle"] for m in listed})
    available = f" Available: {', '.join(handles)}." if handles else " No provider is configured: add one in Settings."
    try:
        resolved = providers.model_resolve(owner=owner, handle=handle)
    except NotConfigured:
        raise Invalid(
            f"No configured provider serves the model '{handle}'.{available}", detail={"available": handles}
        ) from None
    provider = next((p for p in providers.providers_list(owner=owner) if p.name == resolved.provider), None)
    own = [m["handle"] for m in listed if m["provider_name"] == resolved.provider]
    if provider is not None and (provider.models or provider.base_url) and own and handle not in own:
        raise Invalid(
            f"The provider '{provider.name}' does not serve '{handle}'.{available}", detail={"available": handles}
        )


def _rule_tool_names(rule: dict) -> list[str]:
    names = [rule.get("tool_name"), *(rule.get("children") or ())]
    names += list((rule.get("child_output_mapping") or {}).values()) + [rule.get("default_child")]
    return [n for n in names if isinstance(n, str) and n]


def agent_settings_update(*, agent: Agent, changes: dict) -> Agent:
    """Save settings edited in the IDE; a new model must be served by a configured provider (Invalid otherwise)."""
    if changes.get("model") and changes["model"] != agent.model:
        model_served_check(owner=agent.owner, handle=changes["model"])
    return services.agent_update(agent=agent, changes=changes)


def agent_rules_update(*, agent: Agent, rules: list) -> Agent:
    """Save tool rules edited in the IDE; a rule naming a tool the agent does not have is refused (Invalid)."""

    try:
        parsed = [tool_rule_from_dict(dict(r)).to_dict() for r in rules]
    except (ValueError, TypeError, KeyError):
        parsed = []  # agent_update names the malformed rule
    have = {t.name for t in agent_tools(agent=agent)}
    for i, rule in enumerate(parsed):
        missing = [n for n in _rule_tool_names(rule) if n not in have]
        if missing:
            raise Invalid(
                f"Rule {i + 1} names {', '.join(repr(n) for n in dict.fromkeys(missing))}, which this agent "
                f"does not have. Attach the tool first, or use one of: {', '.join(sorted(have)) or 'no tools attached'}."
            )
    return services.agent_update(agent=agent, changes={"tool_rules": rules})
