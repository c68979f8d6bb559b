"""The IDE's "create from template" choices: the agent files in core/agent_templates/ (add a file, add a template)."""

from __future__ import annotations

import json
from pathlib import Path

from core.agents.agentfile.model import ParsedFile
from core.agents.agentfile.parse import parse_agent_file
from core.errors import NotFound

TEMPLATES_DIR = Path(__file__).resolve().parents[2] / "agent_templates"


def templates_list() -> list[dict[str, str]]:
    """Every shipped template: {name (file stem), title, description}, sorted by name."""
    out = []
    for path in sorted(TEMPLATES_DIR.glob("*.af")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        agent = (doc.get("agents") or [{}])[0]
        title = (doc.get("metadata") or {}).get("title") or agent.get("name") or path.stem  # a team names itself
        out.append({"name": path.stem, "title": title, "description": agent.get("description") or ""})
    return out


def template_load(name: str) -> ParsedFile:
    """The parsed template called `name` (a file stem from templates_list), or NotFound."""

    if name not in {t["name"] for t in templates_list()}:  # never build a path from user input
        raise NotFound(f"Template '{name}' not found")
    return parse_agent_file((TEMPLATES_DIR / f"{name}.af").read_bytes())
