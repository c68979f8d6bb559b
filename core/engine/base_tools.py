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
    "memory",
    "memory_apply_patch",
    "rethink_user_memory",
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

# The rest of Letta's LETTA_TOOL_SET (letta/constants.py), with the schemas Letta derives from the docstrings of
# letta/functions/function_sets/base.py (`memory`, `memory_apply_patch`: letta_memory_core), builtin.py (`run_code`,
# `run_code_with_tools`: letta_builtin) and voice.py (letta_voice_sleeptime_core): installed with the others,
# attached only when named. The memory tools edit blocks in-process; the code tools run in the tool sandbox.
MEMORY_TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "memory": {
        "name": "memory",
        "description": "Memory management tool with various sub-commands for memory block operations.\n"
        "\n"
        "Examples:\n"
        "        # Replace text in a memory block\n"
        '        memory(agent_state, "str_replace", path="/memories/user_preferences", '
        'old_string="theme: dark", new_string="theme: light")\n'
        "\n"
        "        # Insert text at line 5\n"
        '        memory(agent_state, "insert", path="/memories/notes", insert_line=5, '
        'insert_text="New note here")\n'
        "\n"
        "        # Delete a memory block\n"
        '        memory(agent_state, "delete", path="/memories/old_notes")\n'
        "\n"
        "        # Rename a memory block\n"
        '        memory(agent_state, "rename", old_path="/memories/temp", '
        'new_path="/memories/permanent")\n'
        "\n"
        "        # Update the description of a memory block\n"
        '        memory(agent_state, "rename", path="/memories/temp", description="The '
        "user's temporary notes.\")\n"
        "\n"
        "        # Create a memory block with starting text\n"
        '        memory(agent_state, "create", path="/memories/coding_preferences", '
        '"description": "The user\'s coding preferences.", "file_text": "The user seems to '
        'add type hints to all of their Python code.")\n'
        "\n"
        "        # Create an empty memory block\n"
        '        memory(agent_state, "create", path="/memories/coding_preferences", '
        '"description": "The user\'s coding preferences.")',
        "parameters": {
            "type": "object",
            "properties": {
                "command": {
                    "type": "string",
                    "description": "The sub-command to execute. Supported "
                    "commands:\n"
                    '- "create": Create a new memory block\n'
                    '- "str_replace": Replace text in a '
                    "memory block\n"
                    '- "insert": Insert text at a specific '
                    "line in a memory block\n"
                    '- "delete": Delete a memory block\n'
                    '- "rename": Rename a memory block',
                },
                "path": {"type": "string", "description": "Path to the memory block (for str_replace, insert, delete)"},
                "file_text": {"type": "string", "description": "The value to set in the memory block (for create)"},
                "description": {
                    "type": "string",
                    "description": "The description to set in the memory block (for create, rename)",
                },
                "old_string": {"type": "string", "description": "Old text to replace (for str_replace)"},
                "new_string": {"type": "string", "description": "New text to replace with (for str_replace)"},
                "insert_line": {"type": "integer", "description": "Line number to insert at (for insert)"},
                "insert_text": {"type": "string", "description": "Text to insert (for insert)"},
                "old_path": {"type": "string", "description": "Old path for rename operation"},
                "new_path": {"type": "string", "description": "New path for rename operation"},
            },
            "required": ["command"],
        },
    },
    "memory_apply_patch": {
        "name": "memory_apply_patch",
        "description": "Apply a simplified unified-diff style patch to one or more memory "
        "blocks.\n"
        "\n"
        "Backwards compatible behavior:\n"
        '- If `patch` contains no "***" headers, it applies the patch to the '
        "single memory block\n"
        "  identified by `label`.\n"
        "\n"
        "Extended, codex-style behavior (multi-block):\n"
        "- `*** Add Block: <label>`\n"
        "    - Optional next line: `Description: <text>`\n"
        "    - File contents are given by subsequent lines starting with `+`\n"
        "- `*** Delete Block: <label>`\n"
        "- `*** Update Block: <label>`\n"
        "    - Patch body is the same simplified unified diff format (lines "
        'start with " ", "-", "+")\n'
        '    - Optional "@@" lines can be used to delimit hunks\n'
        "- `*** Move to: <new_label>`\n"
        "    - Renames the most recent block referenced by an Add/Update/Delete "
        "header\n"
        "\n"
        '- Do not include line number prefixes like "12→" anywhere in the '
        "patch. Line numbers are for display only.\n"
        "- Do not include the line-number warning banner. Provide only the text "
        "to edit.\n"
        "- Tabs are normalized to spaces for matching consistency.",
        "parameters": {
            "type": "object",
            "properties": {
                "label": {
                    "type": "string",
                    "description": "The label of the memory block "
                    "to patch. Required for "
                    "single-block mode (when patch "
                    'contains no "***" headers). '
                    'Set to empty string "" when '
                    "using multi-block mode with "
                    '"*** Add Block:", "*** Delete '
                    'Block:", or "*** Update '
                    'Block:" headers.',
                },
                "patch": {
                    "type": "string",
                    "description": "The unified diff-style patch "
                    "to apply. Can be either: (1) a "
                    "simple unified diff for "
                    "single-block mode, or (2) a "
                    'multi-block patch with "***" '
                    "headers for creating, "
                    "deleting, updating, or "
                    "renaming multiple blocks.",
                },
            },
            "required": ["label", "patch"],
        },
    },
}

CODE_TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "run_code": {
        "name": "run_code",
        "description": "Run code in a sandbox. Supports Python, Javascript, Typescript, R, and Java.",
        "parameters": {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "The code to run."},
                "language": {
                    "type": "string",
                    "enum": ("python", "js", "ts", "r", "java"),
                    "description": "The language of the code.",
                },
            },
            "required": ["code", "language"],
        },
    },
    "run_code_with_tools": {
        "name": "run_code_with_tools",
        "description": "Run code with access to the tools of the agent. Only support python. "
        "You can directly invoke the tools of the agent in the code.",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "The python code to run."}},
            "required": ["code"],
        },
    },
}

VOICE_TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "store_memories": {
        "name": "store_memories",
        "description": "Persist dialogue that is about to fall out of the agent’s context window.",
        "parameters": {
            "type": "object",
            "properties": {
                "chunks": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "start_index": {
                                "type": "integer",
                                "description": "Zero-based index of the first evicted line in this chunk.",
                            },
                            "end_index": {
                                "type": "integer",
                                "description": "Zero-based index of the last evicted line (inclusive).",
                            },
                            "context": {
                                "type": "string",
                                "description": "1-3 "
                                "sentence "
                                "paraphrase "
                                "capturing "
                                "key "
                                "facts/details, "
                                "user "
                                "preferences, "
                                "or "
                                "goals "
                                "that "
                                "this "
                                "chunk "
                                "reveals—written "
                                "for "
                                "future "
                                "retrieval.",
                            },
                        },
                        "required": ["start_index", "end_index", "context"],
                    },
                    "description": "Each chunk pinpoints a contiguous "
                    "block of **evicted** lines and "
                    "provides a short, forward-looking "
                    "synopsis (`context`) that will be "
                    "embedded for future semantic "
                    "lookup.",
                }
            },
            "required": ["chunks"],
        },
    },
    "rethink_user_memory": {
        "name": "rethink_user_memory",
        "description": "Rewrite memory block for the main agent, new_memory should contain "
        "all current information from the block that is not outdated or "
        "inconsistent, integrating any new information, resulting in a new "
        "memory block that is organized, readable, and comprehensive.",
        "parameters": {
            "type": "object",
            "properties": {
                "new_memory": {
                    "type": "string",
                    "description": "The new memory with "
                    "information integrated "
                    "from the memory block. "
                    "If there is no new "
                    "information, then this "
                    "should be the same as "
                    "the content in the "
                    "source block.",
                }
            },
            "required": ["new_memory"],
        },
    },
    "finish_rethinking_memory": {
        "name": "finish_rethinking_memory",
        "description": "This function is called when the agent is done rethinking the memory.",
        "parameters": {"type": "object", "properties": {}, "required": []},
    },
    "search_memory": {
        "name": "search_memory",
        "description": "Look in long-term or earlier-conversation memory only when the user asks "
        "about something missing from the visible context. The user’s latest "
        "utterance is sent automatically as the main query.",
        "parameters": {
            "type": "object",
            "properties": {
                "convo_keyword_queries": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Extra keywords "
                    "(e.g., order ID, "
                    "place name). Use "
                    "*null* if not "
                    "appropriate for the "
                    "latest user "
                    "message.",
                },
                "start_minutes_ago": {
                    "type": "integer",
                    "description": "Newer bound of the time "
                    "window for results, "
                    "specified in minutes "
                    "ago. Use *null* if no "
                    "lower time bound is "
                    "needed.",
                },
                "end_minutes_ago": {
                    "type": "integer",
                    "description": "Older bound of the time "
                    "window, in minutes ago. "
                    "Use *null* if no upper "
                    "bound is needed.",
                },
            },
            "required": [],
        },
    },
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
MEMORY_TOOL_NAMES: tuple[str, ...] = tuple(MEMORY_TOOL_SCHEMAS)
CODE_TOOL_NAMES: tuple[str, ...] = tuple(CODE_TOOL_SCHEMAS)
VOICE_TOOL_NAMES: tuple[str, ...] = tuple(VOICE_TOOL_SCHEMAS)

# Letta's tool_type of each built-in stored as a "base" row that Letta does not call letta_core (its
# upsert_base_tools, letta/services/tool_manager.py).
LETTA_TYPE_OF_BASE: dict[str, str] = {
    **dict.fromkeys(WEB_TOOL_NAMES + CODE_TOOL_NAMES, "letta_builtin"),
    **dict.fromkeys(FILE_TOOL_NAMES, "letta_files_core"),
    **dict.fromkeys(SLEEPTIME_TOOL_NAMES, "letta_sleeptime_core"),
    **dict.fromkeys(MEMORY_TOOL_NAMES, "letta_memory_core"),
    **dict.fromkeys(VOICE_TOOL_NAMES, "letta_voice_sleeptime_core"),
}


def _spec(schema: dict[str, Any], kind: ToolKind) -> ToolSpec:
    return ToolSpec(name=schema["name"], description=schema["description"], json_schema=schema, kind=kind)


def base_tool_specs(*, include_multi_agent: bool = False) -> list[ToolSpec]:
    """ToolSpecs of the built-in tools (and the multi-agent ones if asked)."""
    specs = [_spec(s, "base") for s in BASE_TOOL_SCHEMAS.values()]
    if include_multi_agent:
        specs += [_spec(s, "multi_agent") for s in MULTI_AGENT_TOOL_SCHEMAS.values()]
    return specs


def is_installed_builtin(name: str) -> bool:
    """Whether a tool name is one of the built-ins installed for every account: is_builtin's, and the code tools."""
    return is_builtin(name) or name in CODE_TOOL_SCHEMAS


def is_builtin(name: str) -> bool:
    """Whether a tool name belongs to the built-in (in-process) set. The code tools are built in too but run their
    stored source in the tool sandbox, as a custom tool does, so they are not in it."""
    return (
        name in BASE_TOOL_SCHEMAS
        or name in MULTI_AGENT_TOOL_SCHEMAS
        or name in WEB_TOOL_SCHEMAS
        or name in FILE_TOOL_SCHEMAS
        or name in SLEEPTIME_TOOL_SCHEMAS
        or name in MEMORY_TOOL_SCHEMAS
        or name in VOICE_TOOL_SCHEMAS
    )
