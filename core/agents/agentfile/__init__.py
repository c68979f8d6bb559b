"""Agent files (.af): read Letta v2 and legacy v1 files, import them atomically, export v2, preview, templates.

Public entry points, by module (this package imports none of them: importing one runs no other):
    parse.parse_agent_file(raw) -> ParsedFile                         (pure; AgentFileError = 422 naming the path)
    preview.preview(parsed, ...) -> dict                              (pure; what an import would create)
    importer.agentfile_preview(owner=, parsed=, options=) -> dict     (preview with the owner's tools/models looked up)
    importer.agentfile_import(owner=, parsed=, options=) -> ImportResult   (one transaction)
    exporter.agentfile_export(agent=, include_archival=, scrub_messages=, include_history=) -> dict   (Letta v2)
    exporter.legacy_from_v2(data) -> dict                             (that file in Letta's legacy v1 shape)
    templates.templates_list() / templates.template_load(name)
"""
