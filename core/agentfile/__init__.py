"""Agent files (.af): read Letta v2 and legacy v1 files, import them atomically, export v2, preview, templates.

Public entry points:
    parse_agent_file(raw) -> ParsedFile                      (pure; AgentFileError = 422 naming the path)
    preview(parsed, ...) -> dict                             (pure; what an import would create)
    agentfile_preview(owner=, parsed=, options=) -> dict     (preview with the owner's tools/models looked up)
    agentfile_import(owner=, parsed=, options=) -> ImportResult   (one transaction)
    agentfile_export(agent=, include_archival=, scrub_messages=, include_history=) -> dict   (a Letta v2 file)
    templates_list() / template_load(name)
"""

from core.agentfile.exporter import agentfile_export
from core.agentfile.importer import ImportOptions, ImportResult, agentfile_import, agentfile_preview
from core.agentfile.model import AgentFileError, ParsedFile
from core.agentfile.parse import parse_agent_file
from core.agentfile.preview import preview
from core.agentfile.templates import template_load, templates_list

__all__ = [
    "AgentFileError", "ImportOptions", "ImportResult", "ParsedFile", "agentfile_export", "agentfile_import",
    "agentfile_preview", "parse_agent_file", "preview", "template_load", "templates_list",
]
