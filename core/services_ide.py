"""Agent writes the IDE offers beyond create/update/delete: templates, duplicate, reset the conversation."""

from django.db import transaction

from core.models import Agent, Organization
from core.services import BlockInput, agent_create

# Built-in starting points until the agent-file templates land (core/agentfile/); key -> (label, blocks).
BUILTIN_TEMPLATES = {
    "memgpt_chat": ("MemGPT chat agent (persona + human)", [
        BlockInput(label="persona", value="I am a friendly, curious assistant. I remember what people tell me "
                                          "and keep my notes in memory up to date.", limit=5000),
        BlockInput(label="human", value="Nothing is known about the human yet.", limit=5000),
    ]),
    "blank": ("Blank agent (no memory blocks)", []),
}


def agent_templates() -> list[tuple[str, str]]:
    """(key, label) of the templates offered on the create form: the shipped agent files, else the built-ins."""
    try:  # the shipped agent files are the templates; built-ins only if that app is missing
        from core.agentfile.templates import templates_list

        shipped = [(f"af:{t['name']}", t["title"]) for t in templates_list()]
    except ImportError:
        shipped = []
    return shipped or [(k, v[0]) for k, v in BUILTIN_TEMPLATES.items()]


def agent_create_from_template(*, owner: Organization, template: str, name: str, model: str) -> Agent:
    """Create an agent from a template key (a shipped agent file or a built-in); writes the agent and its blocks."""
    if template.startswith("af:"):
        from core.agentfile.importer import ImportOptions, agentfile_import
        from core.agentfile.templates import template_load

        result = agentfile_import(owner=owner, parsed=template_load(template[3:]), options=ImportOptions(name=name, model=model))
        return Agent.objects.get(id=result.agent_ids[0])
    _, blocks = BUILTIN_TEMPLATES.get(template, BUILTIN_TEMPLATES["blank"])
    return agent_create(owner=owner, name=name, model=model, memory_blocks=[BlockInput(**vars(b)) for b in blocks])


@transaction.atomic
def agent_duplicate(*, agent: Agent, name: str | None = None) -> Agent:
    """Copy an agent's settings, tools, rules, tags and (unshared copies of) its blocks; no messages."""
    from core.selectors import agent_tags
    from memory.selectors import agent_blocks
    from tools.selectors import agent_tools

    blocks = [BlockInput(label=b.label, value=b.value, limit=b.limit, description=b.description,
                         read_only=b.read_only, metadata=dict(b.metadata or {})) for b in agent_blocks(agent=agent)]
    return agent_create(
        owner=agent.owner, name=name or f"{agent.name} (copy)", model=agent.model, system=agent.system,
        description=agent.description, memory_blocks=blocks, tool_ids=[t.id for t in agent_tools(agent=agent)],
        include_base_tools=False, tool_rules=list(agent.tool_rules or []), context_window_limit=agent.context_window_limit,
        tags=agent_tags(agent), metadata=dict(agent.metadata or {}), secrets=dict(agent.secrets or {}),
        embedding=agent.embedding, model_settings=dict(agent.model_settings or {}), max_steps=agent.max_steps,
        overflow_strategy=agent.overflow_strategy, agent_type=agent.agent_type,
    )
