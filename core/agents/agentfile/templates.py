"""The IDE's "create from template": the agent files in core/agent_templates/ (add a file, add a template), and creating
an agent from one."""

from __future__ import annotations

import json
from pathlib import Path

from core.agents.agentfile.importer import ImportOptions, agentfile_import
from core.agents.agentfile.model import ParsedFile
from core.agents.agentfile.parse import parse_agent_file
from core.agents.services import BlockInput, agent_create
from core.errors import NotFound
from core.models import Agent, Organization
from memory import services as memory_services
from memory.models import Block

TEMPLATES_DIR = Path(__file__).resolve().parents[2] / "agent_templates"

# Built-in starting points when no agent file is shipped in core/agent_templates/; key -> (label, blocks).
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


def templates_list() -> list[dict[str, str]]:
    """Every shipped template: {name (file stem), title, description, agent_type, tools, blocks, agents}, by name."""
    out = []
    for path in sorted(TEMPLATES_DIR.glob("*.af")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        agent = (doc.get("agents") or [{}])[0]
        title = (doc.get("metadata") or {}).get("title") or agent.get("name") or path.stem  # a team names itself
        tools = {t.get("id"): t.get("name") for t in doc.get("tools") or []}
        blocks = {b.get("id"): b.get("label") for b in doc.get("blocks") or []}
        out.append(
            {
                "name": path.stem,
                "title": title,
                "description": agent.get("description") or "",
                "agent_type": agent.get("agent_type") or "memgpt_v2_agent",
                "tools": [tools[i] for i in agent.get("tool_ids") or [] if tools.get(i)],
                "blocks": [blocks[i] for i in agent.get("block_ids") or [] if blocks.get(i)],
                "agents": len(doc.get("agents") or []),
            }
        )
    return out


def template_load(name: str) -> ParsedFile:
    """The parsed template called `name` (a file stem from templates_list), or NotFound."""

    if name not in {t["name"] for t in templates_list()}:  # never build a path from user input
        raise NotFound(f"Template '{name}' not found")
    return parse_agent_file((TEMPLATES_DIR / f"{name}.af").read_bytes())


def agent_templates() -> list[tuple[str, str]]:
    """(key, label) of the templates offered on the create form: the shipped agent files, else the built-ins."""
    shipped = [(f"af:{t['name']}", t["title"]) for t in templates_list()]
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
