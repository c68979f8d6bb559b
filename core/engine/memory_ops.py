"""Pure core-memory edits: each returns the block's new value or raises a typed MemoryEditError.

The error message is what the agent reads back as the failed tool result, so it says how to recover.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.engine.types import BlockSpec


class MemoryEditError(Exception):
    """A block edit that was refused; str(error) is written for the agent."""


class BlockNotFoundError(MemoryEditError):
    def __init__(self, label: str, available: Sequence[str]):
        self.label = label
        names = ", ".join(repr(a) for a in available) or "none"
        super().__init__(f"No memory block labelled {label!r}. Available blocks: {names}.")


class BlockReadOnlyError(MemoryEditError):
    def __init__(self, label: str):
        self.label = label
        super().__init__(f"Memory block {label!r} is read-only; it cannot be edited.")


class BlockLimitError(MemoryEditError):
    def __init__(self, label: str, limit: int, length: int):
        self.label, self.limit, self.length = label, limit, length
        super().__init__(
            f"Edit failed: block {label!r} would be {length} characters, over its limit of {limit} characters. "
            f"Make the block shorter, or move details to archival memory with archival_memory_insert and keep only "
            f"a short summary in the block."
        )


class TextNotFoundError(MemoryEditError):
    def __init__(self, label: str, text: str):
        self.label = label
        super().__init__(f"The text {text!r} was not found in memory block {label!r}; nothing was changed.")


class AmbiguousMatchError(MemoryEditError):
    def __init__(self, label: str, text: str, count: int, lines: Sequence[int]):
        self.label, self.count = label, count
        super().__init__(
            f"The text {text!r} occurs {count} times in memory block {label!r} (lines {list(lines)}); "
            f"include more surrounding text so it matches exactly once."
        )


class InvalidEditError(MemoryEditError):
    pass


def find_block(blocks: Sequence[BlockSpec], label: str) -> BlockSpec:
    """The block with this label, or BlockNotFoundError."""
    for block in blocks:
        if block.label == label:
            return block
    raise BlockNotFoundError(label, [b.label for b in blocks])


def _checked(block: BlockSpec, new_value: str) -> str:
    if len(new_value) > block.limit:
        raise BlockLimitError(block.label, block.limit, len(new_value))
    return new_value


def _writable(block: BlockSpec) -> None:
    if block.read_only:
        raise BlockReadOnlyError(block.label)


def core_memory_append(block: BlockSpec, content: str) -> str:
    """The block's value with `content` appended on a new line."""
    _writable(block)
    value = block.value + "\n" + content if block.value else content
    return _checked(block, value)


def core_memory_replace(block: BlockSpec, old_content: str, new_content: str) -> str:
    """The block's value with every occurrence of `old_content` replaced."""
    _writable(block)
    if not old_content:
        raise InvalidEditError("old_content must not be empty; use core_memory_append to add text.")
    if old_content not in block.value:
        raise TextNotFoundError(block.label, old_content)
    return _checked(block, block.value.replace(old_content, new_content))


def memory_replace(block: BlockSpec, old_string: str, new_string: str) -> str:
    """The block's value with the single occurrence of `old_string` replaced (it must match exactly once)."""
    _writable(block)
    if not old_string:
        raise InvalidEditError("old_string must not be empty; use memory_insert to add text.")
    count = block.value.count(old_string)
    if count == 0:
        raise TextNotFoundError(block.label, old_string)
    if count > 1:
        lines = [i + 1 for i, line in enumerate(block.value.split("\n")) if old_string.split("\n")[0] in line]
        raise AmbiguousMatchError(block.label, old_string, count, lines)
    return _checked(block, block.value.replace(old_string, new_string, 1))


def memory_insert(block: BlockSpec, new_string: str, insert_line: int = -1) -> str:
    """The block's value with `new_string` inserted after line `insert_line` (0 = beginning, -1 = end)."""
    _writable(block)
    lines = block.value.split("\n") if block.value else []
    if insert_line == -1:
        insert_line = len(lines)
    if not 0 <= insert_line <= len(lines):
        raise InvalidEditError(
            f"insert_line {insert_line} is out of range for block {block.label!r}, which has {len(lines)} lines "
            f"(use 0 for the beginning or -1 for the end)."
        )
    new_lines = lines[:insert_line] + new_string.split("\n") + lines[insert_line:]
    return _checked(block, "\n".join(new_lines))


_LINE_NUMBER_PREFIX = re.compile(r"\nLine \d+: ")


def memory_rethink(block: BlockSpec, new_memory: str) -> str:
    """The block's whole value rewritten as `new_memory` (Letta refuses text carrying display line numbers)."""
    _writable(block)
    if _LINE_NUMBER_PREFIX.search(new_memory):
        raise InvalidEditError(
            "new_memory contains a line number prefix, which is not allowed. Do not include line numbers when "
            "calling memory tools (line numbers are for display purposes only)."
        )
    return _checked(block, new_memory)


@dataclass(frozen=True, slots=True)
class BlockEdit:
    """The outcome of a memory tool: which block changed, from what, to what."""

    label: str
    old_value: str
    new_value: str


def _arg(args: dict[str, Any], name: str, default: Any = ...) -> Any:
    if name in args:
        return args[name]
    if default is ...:
        raise InvalidEditError(f"missing required argument {name!r}")
    return default


def apply_memory_tool(name: str, args: dict[str, Any], blocks: Sequence[BlockSpec]) -> BlockEdit:
    """Run one core-memory tool call against the blocks; returns the edit or raises MemoryEditError."""
    block = find_block(blocks, str(_arg(args, "label")))
    if name == "core_memory_append":
        new = core_memory_append(block, str(_arg(args, "content")))
    elif name == "core_memory_replace":
        new = core_memory_replace(block, str(_arg(args, "old_content")), str(_arg(args, "new_content")))
    elif name == "memory_replace":
        new = memory_replace(block, str(_arg(args, "old_string")), str(_arg(args, "new_string")))
    elif name == "memory_insert":
        try:
            line = int(_arg(args, "insert_line", -1))
        except (TypeError, ValueError):
            raise InvalidEditError("insert_line must be an integer") from None
        new = memory_insert(block, str(_arg(args, "new_string")), line)
    elif name == "memory_rethink":
        new = memory_rethink(block, str(_arg(args, "new_memory")))
    else:
        raise InvalidEditError(f"{name!r} is not a core-memory tool")
    return BlockEdit(label=block.label, old_value=block.value, new_value=new)


def edit_result_text(edit: BlockEdit) -> str:
    """What the agent reads back after a successful edit."""
    return f"Memory block {edit.label!r} updated ({len(edit.new_value)} characters)."
