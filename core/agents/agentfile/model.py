"""The normalized form of an agent file (v1 or v2), its limits, and the error that names a bad path.

Both formats parse into the same `ParsedFile`; the importer, the exporter's round trip and the IDE
preview only ever see this structure. File-local ids (`block-0`, `message-5`, ...) survive as `key`s and
are replaced by fresh ids on import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from core.errors import Invalid

# Generous for real agents (the largest published file we know is ~230 KB), small enough that a hostile
# upload cannot exhaust memory or the database.
MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 64
MAX_STRING = 1_000_000  # also the largest block limit memory.services allows
MAX_AGENTS = 50
MAX_BLOCKS = 500
MAX_TOOLS = 500
MAX_MESSAGES = 50_000  # per agent
MAX_TOOL_RULES = 200
MAX_TAGS = 100
MAX_PASSAGES = 10_000
MAX_SECRETS = 100
MAX_NAME = 200
MAX_SYSTEM = 200_000
MAX_SOURCE = 200_000
MAX_CONTEXT_WINDOW = 10_000_000

# Our own extension inside a v2 agent's free-form `metadata` (Letta's schema accepts any dict there):
# archival passages, which Letta's format has no place for.
ARCHIVAL_METADATA_KEY = "agents_ide_archival_passages"
# ... and the agent's version history (core.agents.versions.history_export), when exported with it.
HISTORY_METADATA_KEY = "agents_ide_version_history"
MAX_VERSIONS = 10_000
MAX_SOURCES = 100
MAX_FOLDER_FILES = 1_000
# A folder file's parsed text (`files[i].content`) may be longer than MAX_STRING: as long as the whole file allows.
MAX_FOLDER_FILE_TEXT = MAX_FILE_BYTES


class AgentFileError(Invalid):
    """A file that cannot be imported; `path` (e.g. `agents[0].block_ids[2]`) says where (HTTP 422)."""

    def __init__(self, path: str, problem: str):
        message = f"{path}: {problem}" if path else problem
        super().__init__(f"Invalid agent file: {message}", detail={"path": path, "problem": problem})
        self.path = path
        self.problem = problem


@dataclass(frozen=True, kw_only=True)
class ParsedBlock:
    key: str
    label: str
    value: str
    limit: int
    description: str = ""
    read_only: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class ParsedTool:
    """A tool of the file. `builtin` tools map to our built-in rows by name; the file's copy is ignored."""

    key: str
    name: str
    builtin: bool
    letta_type: str = "custom"
    description: str = ""
    source_code: str = ""
    json_schema: dict[str, Any] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    return_char_limit: int = 50000
    pip_requirements: tuple[dict[str, Any], ...] = ()
    default_requires_approval: bool | None = None
    mcp_server: str = ""  # external_mcp tools: the server's name (core.agents.agentfile.mcp_servers)


@dataclass(frozen=True, kw_only=True)
class ParsedMessage:
    """One message in our shape (roles system|user|assistant|tool; tool calls as {id, name, arguments})."""

    key: str
    role: str
    text: str = ""
    reasoning: str = ""
    reasoning_source: str = ""
    tool_calls: tuple[dict[str, str], ...] = ()
    tool_call_id: str = ""
    name: str = ""
    tool_return: dict[str, Any] = field(default_factory=dict)
    kind: str = ""
    created_at: str = ""  # the file's ISO timestamp, kept on import ("" = the import time)
    otid: str = ""  # the client's offline id (Letta's `otid`), kept through export and import
    thinking_blocks: tuple[dict[str, Any], ...] = ()  # signed thinking, sent back to the provider unchanged

    @property
    def content(self) -> list[dict[str, str]]:
        return [{"type": "text", "text": self.text}] if self.text else []


@dataclass(frozen=True, kw_only=True)
class ParsedPassage:
    text: str
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class ParsedSource:
    """A folder of the file (Letta's `sources`)."""

    key: str
    name: str
    description: str = ""
    instructions: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    embedding: str = ""
    embedding_chunk_size: int | None = None


@dataclass(frozen=True, kw_only=True)
class ParsedFolderFile:
    """A file of a folder with its parsed text (Letta's `files`); imported files are ingested again from it."""

    key: str
    source_key: str
    file_name: str  # without the folder's "<name>/" prefix Letta stores
    file_type: str = ""
    content: str = ""


@dataclass(frozen=True, kw_only=True)
class ParsedFileView:
    """An agent's view of a file (Letta's `files_agents`): open or closed, and the lines it shows."""

    file_key: str
    is_open: bool = False
    start_line: int | None = None
    end_line: int | None = None


@dataclass(frozen=True, kw_only=True)
class ParsedAgent:
    key: str
    name: str
    system: str
    model: str
    description: str = ""
    agent_type: str = "memgpt_v2_agent"
    model_settings: dict[str, Any] = field(default_factory=dict)
    context_window: int | None = None
    embedding: str = ""
    embedding_config: dict[str, Any] = field(default_factory=dict)
    tool_rules: tuple[dict[str, Any], ...] = ()
    tags: tuple[str, ...] = ()
    secrets: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    block_keys: tuple[str, ...] = ()
    tool_keys: tuple[str, ...] = ()
    # File order (becomes `seq` order); the window lists keys in context order, the system message first.
    messages: tuple[ParsedMessage, ...] = ()
    in_context: tuple[str, ...] = ()
    passages: tuple[ParsedPassage, ...] = ()
    history: tuple[dict[str, Any], ...] = ()  # versions, oldest first (core.agents.versions.history_import checks each)
    source_keys: tuple[str, ...] = ()  # folders attached (source_ids, folder_ids and the sources of its file views)
    file_views: tuple[ParsedFileView, ...] = ()


@dataclass(frozen=True, kw_only=True)
class ParsedFile:
    version: str  # "v1" | "v2"
    agents: tuple[ParsedAgent, ...]
    blocks: dict[str, ParsedBlock]
    tools: dict[str, ParsedTool]
    warnings: tuple[str, ...] = ()
    mcp_servers: tuple[dict[str, Any], ...] = ()  # core.agents.agentfile.mcp_servers.mcp_servers_parse
    sources: dict[str, ParsedSource] = field(default_factory=dict)
    files: dict[str, ParsedFolderFile] = field(default_factory=dict)
