"""Schemas of the built-in tools, as data, with Letta-compatible names and parameters.

`thinking` and `request_heartbeat` are not written here: context.compile_context adds them per agent
(thinking only for models without native reasoning; heartbeat only on non-terminal tools).
"""

from __future__ import annotations

from typing import Any

from core.engine.types import ToolKind, ToolSpec

TERMINAL_TOOLS: frozenset[str] = frozenset({"send_message"})
MEMORY_EDIT_TOOLS: tuple[str, ...] = (
    "core_memory_append",
    "core_memory_replace",
    "memory_replace",
    "memory_insert",
    "memory_rethink",
)


def _schema(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "parameters": {"type": "object", "properties": properties, "required": required},
    }


_STR = {"type": "string"}
_LABEL = {"type": "string", "description": "Label of the memory block to edit, e.g. 'human' or 'persona'."}

BASE_TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "send_message": _schema(
        "send_message",
        "Sends a message to the human user. Calling it ends your turn and gives control back to the user.",
        {"message": {**_STR, "description": "Message contents. All unicode (including emojis) are supported."}},
        ["message"],
    ),
    "core_memory_append": _schema(
        "core_memory_append",
        "Append to the contents of a core memory block. The block's character limit still applies.",
        {
            "label": _LABEL,
            "content": {**_STR, "description": "Content to append. All unicode (including emojis) are supported."},
        },
        ["label", "content"],
    ),
    "core_memory_replace": _schema(
        "core_memory_replace",
        "Replace the contents of a core memory block. To delete memories, use an empty string for new_content.",
        {
            "label": _LABEL,
            "old_content": {**_STR, "description": "String to replace. Must be an exact match."},
            "new_content": {**_STR, "description": "Content to write to the memory."},
        },
        ["label", "old_content", "new_content"],
    ),
    "memory_replace": _schema(
        "memory_replace",
        "Replace one exact occurrence of old_string with new_string in a memory block. old_string must appear "
        "exactly once; include surrounding text to make it unique. Do not include line numbers.",
        {
            "label": _LABEL,
            "old_string": {**_STR, "description": "The text to replace; must match exactly once."},
            "new_string": {**_STR, "description": "The text to put in its place (empty string deletes)."},
        },
        ["label", "old_string", "new_string"],
    ),
    "memory_insert": _schema(
        "memory_insert",
        "Insert text into a memory block at a given line.",
        {
            "label": _LABEL,
            "new_string": {**_STR, "description": "The text to insert."},
            "insert_line": {
                "type": "integer",
                "description": "Line number after which to insert (0 = at the beginning, -1 = at the end).",
            },
        },
        ["label", "new_string"],
    ),
    "archival_memory_insert": _schema(
        "archival_memory_insert",
        "Add to archival memory: long-term storage for facts and details too large or too numerous for core "
        "memory. Phrase the content so it can be found later by semantic search.",
        {
            "content": {**_STR, "description": "Content to write to the memory."},
            "tags": {"type": "array", "items": _STR, "description": "Optional tags for filtering later."},
        },
        ["content"],
    ),
    "archival_memory_search": _schema(
        "archival_memory_search",
        "Search archival memory using semantic (embedding-based) search, with optional tag and date filters.",
        {
            "query": {**_STR, "description": "String to search for."},
            "tags": {"type": "array", "items": _STR, "description": "Only return memories with these tags."},
            "tag_match_mode": {"type": "string", "enum": ["any", "all"], "description": "Match any or all tags."},
            "top_k": {"type": "integer", "description": "Maximum number of results (default 10)."},
            "start_datetime": {**_STR, "description": "ISO 8601 lower bound on the memory's timestamp."},
            "end_datetime": {**_STR, "description": "ISO 8601 upper bound on the memory's timestamp."},
        },
        ["query"],
    ),
    "conversation_search": _schema(
        "conversation_search",
        "Search prior conversation history (recall memory), including messages no longer in your context window.",
        {
            "query": {**_STR, "description": "String to search for."},
            "roles": {
                "type": "array",
                "items": {"type": "string", "enum": ["assistant", "user", "tool"]},
                "description": "Only return messages with these roles.",
            },
            "limit": {"type": "integer", "description": "Maximum number of results (default 10)."},
            "start_date": {**_STR, "description": "ISO 8601 date or datetime lower bound."},
            "end_date": {**_STR, "description": "ISO 8601 date or datetime upper bound."},
        },
        ["query"],
    ),
}

MULTI_AGENT_TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "send_message_to_agent_async": _schema(
        "send_message_to_agent_async",
        "Send a one-way message to another agent. You will not receive a reply from this call.",
        {
            "message": {**_STR, "description": "The message to send."},
            "other_agent_id": {**_STR, "description": "The id of the receiving agent."},
        },
        ["message", "other_agent_id"],
    ),
    "send_message_to_agent_and_wait_for_reply": _schema(
        "send_message_to_agent_and_wait_for_reply",
        "Send a message to another agent and wait for its reply, which is returned as this tool's result.",
        {
            "message": {**_STR, "description": "The message to send."},
            "other_agent_id": {**_STR, "description": "The id of the receiving agent."},
        },
        ["message", "other_agent_id"],
    ),
    "send_message_to_agents_matching_tags": _schema(
        "send_message_to_agents_matching_tags",
        "Send a message to every agent whose tags match, and collect their replies.",
        {
            "message": {**_STR, "description": "The message to send."},
            "match_all": {"type": "array", "items": _STR, "description": "Agents must have all of these tags."},
            "match_some": {
                "type": "array",
                "items": _STR,
                "description": "Agents must have at least one of these tags.",
            },
        },
        ["message", "match_all", "match_some"],
    ),
}

# Letta's `letta_sleeptime_core` tools (letta/functions/function_sets/base.py, BASE_SLEEPTIME_TOOLS in
# letta/constants.py): installed with the others, attached only when named.
SLEEPTIME_TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "memory_rethink": _schema(
        "memory_rethink",
        "The memory_rethink command allows you to completely rewrite the contents of a memory block. Use this tool to"
        " make large sweeping changes (e.g. when you want to condense or reorganize the memory blocks), do NOT use"
        " this tool to make small precise edits (e.g. add or remove a line, replace a specific string, etc).",
        {
            "label": {**_STR, "description": "The memory block to be rewritten, identified by its label."},
            "new_memory": {
                **_STR,
                "description": "The new memory contents with information integrated from existing memory blocks and"
                " the conversation context.",
            },
        },
        ["label", "new_memory"],
    ),
    "memory_finish_edits": _schema(
        "memory_finish_edits",
        "Call the memory_finish_edits command when you are finished making edits (integrating all new information)"
        " into the memory blocks. This function is called when the agent is done rethinking the memory.",
        {},
        [],
    ),
}

_DOMAINS = {"type": "array", "items": _STR}

# Letta's `letta_builtin` web tools (tools/web_tools.py runs them). Parameters as Letta generates them from its
# docstrings, so clients that name these tools get the schema they expect; never attached unless named.
WEB_TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "web_search": _schema(
        "web_search",
        "Search the web and retrieve relevant content.\n\n"
        "Examples:\n"
        '    web_search("Tesla Q1 2025 earnings report", num_results=5, category="financial report")\n'
        '    web_search("Latest research in large language models", category="research paper", '
        'include_domains=["arxiv.org", "paperswithcode.com"])\n'
        '    web_search("Letta API documentation core_memory_append", num_results=3)',
        {
            "query": {**_STR, "description": "The search query to find relevant web content."},
            "num_results": {"type": "integer", "description": "Number of results to return (1-100). Defaults to 10."},
            "category": {
                "type": "string",
                "enum": [
                    "company",
                    "research paper",
                    "news",
                    "pdf",
                    "github",
                    "tweet",
                    "personal site",
                    "linkedin profile",
                    "financial report",
                ],
                "description": "Focus search on specific content types. Defaults to None.",
            },
            "include_text": {
                "type": "boolean",
                "description": "Whether to retrieve full page content. Defaults to False (only returns summary and "
                "highlights, since the full text usually will overflow the context window).",
            },
            "include_domains": {
                **_DOMAINS,
                "description": "List of domains to include in search results. Defaults to None.",
            },
            "exclude_domains": {
                **_DOMAINS,
                "description": "List of domains to exclude from search results. Defaults to None.",
            },
            "start_published_date": {
                **_STR,
                "description": "Only return content published after this date (ISO format). Defaults to None.",
            },
            "end_published_date": {
                **_STR,
                "description": "Only return content published before this date (ISO format). Defaults to None.",
            },
            "user_location": {
                **_STR,
                "description": 'Two-letter country code for localized results (e.g., "US"). Defaults to None.',
            },
        },
        ["query"],
    ),
    "fetch_webpage": _schema(
        "fetch_webpage",
        "Fetch a webpage and convert it to markdown/text format.",
        {"url": {**_STR, "description": "The URL of the webpage to fetch and convert"}},
        ["url"],
    ),
}

_INT = {"type": "integer"}

# The file tools (Letta's letta_files_core): an agent gets them when a folder is attached to it, and loses them when
# its last folder is detached. They read the folders' files; what they open shows in the `<directories>` section.
FILE_TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "open_files": _schema(
        "open_files",
        "Open one or more files and load their contents into the files section of your core memory, whole or a range"
        " of lines. The least recently used open files are closed past the open-file limit.",
        {
            "file_requests": {
                "type": "array",
                "description": "The files to open, each by name and with an optional range of lines.",
                "items": {
                    "type": "object",
                    "properties": {
                        "file_name": {
                            **_STR,
                            "description": "The file's name as the files section shows it (folder/file).",
                        },
                        "offset": {
                            **_INT,
                            "description": "The first line to show, counted from 0. Default: the start.",
                        },
                        "length": {**_INT, "description": "How many lines to show from offset. Default: to the end."},
                    },
                    "required": ["file_name"],
                },
            },
            "close_all_others": {
                "type": "boolean",
                "description": "Close every other open file first. Default: false.",
            },
        },
        ["file_requests"],
    ),
    "grep_files": _schema(
        "grep_files",
        "Search the attached files' lines for a keyword or regular expression (case-insensitive), with context lines"
        " around each match; 20 matches a call, the next ones with offset.",
        {
            "pattern": {**_STR, "description": "The keyword or regular expression to look for."},
            "include": {**_STR, "description": "Only files whose names match this regex or glob (e.g. *.md)."},
            "context_lines": {**_INT, "description": "Lines to show before and after each match. Default: 1."},
            "offset": {**_INT, "description": "Matches to skip, to see the next page. Default: 0."},
        },
        ["pattern"],
    ),
    "semantic_search_files": _schema(
        "semantic_search_files",
        "Search the attached files by meaning rather than exact words: the passages nearest the query, each under"
        " its file's name.",
        {
            "query": {**_STR, "description": "What to look for, in words."},
            "limit": {**_INT, "description": "How many passages to return (at most 50). Default: 5."},
        },
        ["query"],
    ),
}

BASE_TOOL_NAMES: tuple[str, ...] = tuple(BASE_TOOL_SCHEMAS)
FILE_TOOL_NAMES: tuple[str, ...] = tuple(FILE_TOOL_SCHEMAS)
MULTI_AGENT_TOOL_NAMES: tuple[str, ...] = tuple(MULTI_AGENT_TOOL_SCHEMAS)
WEB_TOOL_NAMES: tuple[str, ...] = tuple(WEB_TOOL_SCHEMAS)
SLEEPTIME_TOOL_NAMES: tuple[str, ...] = tuple(SLEEPTIME_TOOL_SCHEMAS)


def _spec(schema: dict[str, Any], kind: ToolKind) -> ToolSpec:
    return ToolSpec(name=schema["name"], description=schema["description"], json_schema=schema, kind=kind)


def base_tool_specs(*, include_multi_agent: bool = False) -> list[ToolSpec]:
    """ToolSpecs of the built-in tools (and the multi-agent ones if asked)."""
    specs = [_spec(s, "base") for s in BASE_TOOL_SCHEMAS.values()]
    if include_multi_agent:
        specs += [_spec(s, "multi_agent") for s in MULTI_AGENT_TOOL_SCHEMAS.values()]
    return specs


def is_builtin(name: str) -> bool:
    """Whether a tool name belongs to the built-in (in-process) set."""
    return (
        name in BASE_TOOL_SCHEMAS
        or name in MULTI_AGENT_TOOL_SCHEMAS
        or name in WEB_TOOL_SCHEMAS
        or name in FILE_TOOL_SCHEMAS
        or name in SLEEPTIME_TOOL_SCHEMAS
    )
