"""Typed, path-naming accessors for untrusted JSON, and the field sets Letta's formats define.

Every accessor raises AgentFileError with the JSON path of the offending value, so an import error
reads like `agents[0].tools[3].name: must be a string`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from core.agents.agentfile.model import (
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_FOLDER_FILE_TEXT,
    MAX_STRING,
    AgentFileError,
)
from core.text import text_problem

# Fields Letta writes (union over the versions that wrote the published files); anything else is refused,
# as Letta's own schema (extra="forbid") would.
V2_TOP = frozenset({"agents", "groups", "blocks", "files", "sources", "tools", "mcp_servers", "metadata", "created_at"})
V2_AGENT = frozenset(
    {
        "name",
        "memory_blocks",
        "tools",
        "tool_ids",
        "source_ids",
        "folder_ids",
        "block_ids",
        "tool_rules",
        "tags",
        "system",
        "agent_type",
        "initial_message_sequence",
        "include_base_tools",
        "include_multi_agent_tools",
        "include_base_tool_rules",
        "include_default_source",
        "description",
        "metadata",
        "llm_config",
        "embedding_config",
        "model",
        "embedding",
        "model_settings",
        "compaction_settings",
        "context_window_limit",
        "embedding_chunk_size",
        "max_tokens",
        "max_reasoning_tokens",
        "enable_reasoner",
        "reasoning",
        "from_template",
        "template",
        "project",
        "tool_exec_environment_variables",
        "secrets",
        "memory_variables",
        "project_id",
        "template_id",
        "base_template_id",
        "identity_ids",
        "message_buffer_autoclear",
        "enable_sleeptime",
        "response_format",
        "timezone",
        "max_files_open",
        "per_file_view_window_char_limit",
        "hidden",
        "parallel_tool_calls",
        "id",
        "in_context_message_ids",
        "messages",
        "files_agents",
        "group_ids",
    }
)
V1_TOP = frozenset(
    {
        "agent_type",
        "core_memory",
        "created_at",
        "description",
        "embedding_config",
        "llm_config",
        "message_buffer_autoclear",
        "in_context_message_indices",
        "messages",
        "metadata_",
        "multi_agent_group",
        "name",
        "system",
        "tags",
        "tool_exec_environment_variables",
        "tool_rules",
        "tools",
        "updated_at",
        "version",
    }
)
BLOCK = frozenset(
    {
        "id",
        "value",
        "limit",
        "project_id",
        "template_name",
        "is_template",
        "template_id",
        "base_template_id",
        "deployment_id",
        "entity_id",
        "preserve_on_migration",
        "label",
        "read_only",
        "description",
        "metadata",
        "hidden",
        "created_by_id",
        "last_updated_by_id",
        "tags",
        "created_at",
        "updated_at",
        "metadata_",
    }
)
TOOL = frozenset(
    {
        "id",
        "tool_type",
        "description",
        "source_type",
        "name",
        "tags",
        "source_code",
        "json_schema",
        "args_json_schema",
        "return_char_limit",
        "pip_requirements",
        "npm_requirements",
        "default_requires_approval",
        "enable_parallel_execution",
        "created_by_id",
        "last_updated_by_id",
        "metadata_",
        "project_id",
        "created_at",
        "updated_at",
    }
)
MESSAGE = frozenset(
    {
        "type",
        "id",
        "role",
        "content",
        "name",
        "otid",
        "sender_id",
        "batch_item_id",
        "group_id",
        "model",
        "agent_id",
        "tool_calls",
        "tool_call_id",
        "tool_returns",
        "created_at",
        "updated_at",
        "approve",
        "approval_request_id",
        "denial_reason",
        "approvals",
        "step_id",
        "run_id",
    }
)
TOOL_RULE = frozenset(
    {
        "tool_name",
        "type",
        "prompt_template",
        "args",
        "children",
        "child_arg_nodes",
        "child_output_mapping",
        "default_child",
        "require_output_mapping",
        "max_count_limit",
    }
)


def load_json(raw: bytes | str) -> Any:
    """Decode the upload: size-checked, UTF-8, JSON, bounded nesting and string lengths."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8")
    if len(raw) > MAX_FILE_BYTES:
        raise AgentFileError("", f"the file is {len(raw)} bytes; the limit is {MAX_FILE_BYTES} bytes")
    if not raw.strip():
        raise AgentFileError("", "the file is empty")
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise AgentFileError("", "the file is not UTF-8 text (an agent file is JSON)") from None
    except json.JSONDecodeError as exc:
        raise AgentFileError(
            "", f"the file is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
        ) from None
    except RecursionError:
        raise AgentFileError("", f"the JSON is nested deeper than {MAX_DEPTH} levels") from None
    check_bounds(data)
    return data


# The strings allowed past MAX_STRING (up to MAX_FOLDER_FILE_TEXT): a folder file's parsed text.
_LONG_TEXT = re.compile(r"files\[\d+\]\.content")


def check_bounds(data: Any) -> None:
    """Refuse nesting deeper than MAX_DEPTH and strings longer than MAX_STRING, a folder file's text longer than
    MAX_FOLDER_FILE_TEXT (iterative: no recursion)."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise AgentFileError(path, f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, str):
            if len(value) > MAX_STRING:
                limit = MAX_FOLDER_FILE_TEXT if _LONG_TEXT.fullmatch(path) else MAX_STRING
                if len(value) > limit:
                    raise AgentFileError(path, f"a string of {len(value)} characters; the limit is {limit}")
            if problem := text_problem(value):
                raise AgentFileError(path, f"contains {problem}, which cannot be stored")
        elif isinstance(value, dict):
            for k, v in value.items():
                if len(k) > 200:
                    raise AgentFileError(path, "a field name longer than 200 characters")
                if problem := text_problem(k):
                    raise AgentFileError(path, f"a field name contains {problem}")
                stack.append((v, f"{path}.{k}" if path else k, depth + 1))
        elif isinstance(value, list):
            stack.extend((v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value))


def join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def obj(value: Any, path: str, known: frozenset[str] | None = None) -> dict:
    if not isinstance(value, dict):
        raise AgentFileError(path, f"must be an object, not {_kind(value)}")
    if known is not None:
        unknown = sorted(set(value) - known)
        if unknown:
            raise AgentFileError(join(path, unknown[0]), "unknown field (not part of Letta's agent file format)")
    return value


def lst(value: Any, path: str, *, limit: int, optional: bool = True) -> list:
    if value is None and optional:
        return []
    if not isinstance(value, list):
        raise AgentFileError(path, f"must be a list, not {_kind(value)}")
    if len(value) > limit:
        raise AgentFileError(path, f"has {len(value)} entries; the limit is {limit}")
    return value


def string(value: Any, path: str, *, limit: int = MAX_STRING, optional: bool = True, default: str = "") -> str:
    if value is None and optional:
        return default
    if not isinstance(value, str):
        raise AgentFileError(path, f"must be a string, not {_kind(value)}")
    if len(value) > limit:
        raise AgentFileError(path, f"is {len(value)} characters long; the limit is {limit}")
    return value


def integer(value: Any, path: str, *, low: int, high: int, optional: bool = True) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise AgentFileError(path, f"must be an integer, not {_kind(value)}")
    if not low <= value <= high:
        raise AgentFileError(path, f"must be between {low} and {high}, not {value}")
    return value


def number(value: Any, path: str, *, low: float, high: float) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise AgentFileError(path, f"must be a number, not {_kind(value)}")
    if not low <= value <= high:
        raise AgentFileError(path, f"must be between {low} and {high}, not {value}")
    return value


def boolean(value: Any, path: str, *, default: bool = False) -> bool:
    if value is None:
        return default
    if not isinstance(value, bool):
        raise AgentFileError(path, f"must be true or false, not {_kind(value)}")
    return value


def unique_key(value: Any, path: str, seen: set[str]) -> str:
    key = string(value, path, limit=200, optional=False)
    if not key:
        raise AgentFileError(path, "must not be empty")
    if key in seen:
        raise AgentFileError(path, f"duplicate id {key!r}")
    seen.add(key)
    return key


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, int | float) else type(value).__name__
    )
