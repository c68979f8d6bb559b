"""Agent files (.af): read Letta v2 and legacy v1 files, import them atomically, export v2, preview, templates.

Public entry points:
    parse_agent_file(raw) -> ParsedFile                      (pure; AgentFileError = 422 naming the path)
    preview(parsed, ...) -> dict                             (pure; what an import would create)
    agentfile_preview(owner=, parsed=, options=) -> dict     (preview with the owner's tools/models looked up)
    agentfile_import(owner=, parsed=, options=) -> ImportResult   (one transaction)
    agentfile_export(agent=, include_archival=, scrub_messages=, include_history=) -> dict   (a Letta v2 file)
    legacy_from_v2(data) -> dict                             (that file in Letta's legacy v1 shape)
    templates_list() / template_load(name)
"""

from core.agents.agentfile.exporter import agentfile_export, legacy_from_v2
from core.agents.agentfile.importer import ImportOptions, ImportResult, agentfile_import, agentfile_preview
from core.agents.agentfile.model import AgentFileError, ParsedFile
from core.agents.agentfile.parse import parse_agent_file
from core.agents.agentfile.preview import preview
from core.agents.agentfile.templates import template_load, templates_list

__all__ = [
    "AgentFileError",
    "ImportOptions",
    "ImportResult",
    "ParsedFile",
    "agentfile_export",
    "agentfile_import",
    "agentfile_preview",
    "legacy_from_v2",
    "parse_agent_file",
    "preview",
    "template_load",
    "templates_list",
]
