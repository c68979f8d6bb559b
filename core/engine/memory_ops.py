"""Pure core-memory edits: each returns the block's new value or raises a typed MemoryEditError.

The error message is what the agent reads back as the failed tool result, so it says how to recover.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
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


class BlockChangesNeeded(InvalidEditError):
    """A `memory`/`memory_apply_patch`/`rethink_user_memory` call that creates, deletes or renames blocks (or edits
    several): not one block's edit; its `memory_plan` holds the changes."""

    def __init__(self):
        super().__init__(
            "Creating, deleting or renaming memory blocks (or editing several in one call) is not available from a"
            " step on this server yet; nothing was changed. Edit one existing block per call."
        )


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


# --- Letta's `memory` and `memory_apply_patch` (letta/services/tool_executor/core_tool_executor.py) ---

# Display line numbers ("12→ text") and the warning banner above numbered blocks may not be written back.
_ARROW_LINE_NUMBER = re.compile(r"^[ \t]*\d+→[ \t]*", re.MULTILINE)
LINE_NUMBER_WARNING = "# NOTE: Line numbers shown below (with arrows like '1→') are to help during editing. Do NOT include line number prefixes in your memory edit tool calls."
NEW_BLOCK_LIMIT = 100_000  # Letta's CORE_MEMORY_BLOCK_CHAR_LIMIT, a new block's limit
_RECOMPILED = "Your system prompt has been recompiled with {what} and is now active in your context."


@dataclass(frozen=True, slots=True)
class BlockChange:
    """One change a `memory`/`memory_apply_patch` call makes: kind "update" (value), "create" (label, value,
    description), "delete", "rename" (to new_label) or "describe" (description)."""

    kind: str
    label: str
    value: str = ""
    new_label: str = ""
    description: str = ""


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    """The changes of one call, in order, and what the agent reads back when they are applied."""

    changes: tuple[BlockChange, ...]
    result: str


def _path_label(path: str, *, flatten: bool = True) -> str:
    # Letta's path → label: "/memories/notes" → "notes"; nested paths flatten to underscores (not for create and
    # str_replace, which Letta leaves nested)
    label = str(path).removeprefix("/memories/").removeprefix("/")
    return label.replace("/", "_") if flatten else label


def _no_line_numbers(field: str, text: str) -> None:
    if _ARROW_LINE_NUMBER.search(text):
        raise InvalidEditError(
            f"{field} contains a line number prefix, which is not allowed. Do not include line numbers when calling "
            "memory tools (line numbers are for display purposes only)."
        )
    if LINE_NUMBER_WARNING in text:
        raise InvalidEditError(
            f"{field} contains a line number warning, which is not allowed. Do not include line number information "
            "when calling memory tools (line numbers are for display purposes only)."
        )


class _Blocks:
    """The agent's blocks as a plan sees them: each change is checked against the blocks as earlier changes of the
    same call left them."""

    def __init__(self, blocks: Sequence[BlockSpec]):
        self.by_label = {b.label: b for b in blocks}
        self.changes: list[BlockChange] = []

    def get(self, label: str) -> BlockSpec:
        if label not in self.by_label:
            raise InvalidEditError(f"Error: Memory block '{label}' does not exist")
        return self.by_label[label]

    def update(self, block: BlockSpec, value: str) -> None:
        _writable(block)
        self.by_label[block.label] = _replace_value(block, _checked(block, value))
        self.changes.append(BlockChange("update", block.label, value=value))

    def create(self, label: str, value: str, description: str) -> None:
        if not label:
            raise InvalidEditError("Error: path is required for create command")
        if label in self.by_label:
            raise InvalidEditError(f"Error: Memory block '{label}' already exists")
        self.by_label[label] = BlockSpec(
            id="", label=label, value=value, limit=NEW_BLOCK_LIMIT, description=description
        )
        self.changes.append(BlockChange("create", label, value=value, description=description))

    def delete(self, label: str) -> None:
        _writable(self.get(label))
        del self.by_label[label]
        self.changes.append(BlockChange("delete", label))

    def rename(self, label: str, new_label: str) -> None:
        block = self.get(label)
        _writable(block)
        if not new_label:
            raise InvalidEditError("Error: new_path must name the block's new label")
        if new_label in self.by_label:
            raise InvalidEditError(f"Error: Memory block '{new_label}' already exists")
        del self.by_label[label]
        self.by_label[new_label] = _relabel(block, new_label)
        self.changes.append(BlockChange("rename", label, new_label=new_label))

    def describe(self, label: str, description: str) -> None:
        _writable(self.get(label))
        self.changes.append(BlockChange("describe", label, description=description))


def _replace_value(block: BlockSpec, value: str) -> BlockSpec:
    return replace(block, value=value)


def _relabel(block: BlockSpec, label: str) -> BlockSpec:
    return replace(block, label=label)


def memory_command(args: dict[str, Any], blocks: Sequence[BlockSpec]) -> MemoryPlan:
    """Letta's `memory` tool: create, str_replace, insert, delete or rename (a path and a description: the
    block's description) one block, with Letta's checks and answers."""
    state = _Blocks(blocks)
    command = args.get("command")
    path, description = args.get("path"), args.get("description")
    if command == "create":
        if path is None:
            raise InvalidEditError("Error: path is required for create command")
        if description is None:
            raise InvalidEditError("Error: description is required for create command")
        label = _path_label(path, flatten=False)
        state.create(label, str(args.get("file_text") or ""), str(description))
        result = f"Successfully created memory block '{label}'. " + _RECOMPILED.format(what="the new memory block")
    elif command == "str_replace":
        for name in ("path", "old_string", "new_string"):
            if args.get(name) is None:
                raise InvalidEditError(f"Error: {name} is required for str_replace command")
        old, new = str(args["old_string"]), str(args["new_string"])
        _no_line_numbers("old_string", old)
        _no_line_numbers("new_string", new)
        block = state.get(_path_label(path, flatten=False))
        _writable(block)
        value = memory_replace(_replace_value(block, block.value.expandtabs()), old.expandtabs(), new.expandtabs())
        state.update(block, value)
        result = value
    elif command == "insert":
        if path is None:
            raise InvalidEditError("Error: path is required for insert command")
        if args.get("insert_text") is None:
            raise InvalidEditError("Error: insert_text is required for insert command")
        text = str(args["insert_text"])
        _no_line_numbers("insert_text", text)
        block = state.get(_path_label(path))
        _writable(block)
        line = args.get("insert_line")
        if line is not None and (isinstance(line, bool) or not isinstance(line, int)):
            raise InvalidEditError("insert_line must be an integer")
        value = memory_insert(
            _replace_value(block, block.value.expandtabs()), text.expandtabs(), -1 if line is None else line
        )
        state.update(block, value)
        result = value
    elif command == "delete":
        if path is None:
            raise InvalidEditError("Error: path is required for delete command")
        label = _path_label(path)
        state.delete(label)
        result = (
            f"Successfully deleted memory block '{label}'. Your system prompt has been recompiled without this memory"
            " block and is now active in your context."
        )
    elif command == "rename":
        if path and description:
            label = _path_label(path)
            state.describe(label, str(description))
            result = f"Successfully updated description of memory block '{label}'. " + _RECOMPILED.format(
                what="the updated description"
            )
        elif args.get("old_path") and args.get("new_path"):
            old_label, new_label = _path_label(args["old_path"]), _path_label(args["new_path"])
            state.rename(old_label, new_label)
            result = f"Successfully renamed memory block '{old_label}' to '{new_label}'. " + _RECOMPILED.format(
                what="the renamed memory block"
            )
        else:
            raise InvalidEditError(
                "Error: path and description are required for update_description command, or old_path and "
                "new_path are required for rename command"
            )
    else:
        raise InvalidEditError(
            f"Error: Unknown command '{command}'. Supported commands: create, str_replace, insert, delete, rename"
        )
    return MemoryPlan(tuple(state.changes), result)


def _find_all(hay: list[str], needle: list[str]) -> list[int]:
    n = len(needle)
    return [i for i in range(len(hay) - n + 1) if hay[i : i + n] == needle] if n else []


def apply_unified_patch(value: str, patch: str) -> str:
    """Letta's simplified unified diff: hunks of " "/"-"/"+" lines (split at "@@"), each matching exactly one place
    of the value; a hunk without context lines appends."""
    lines = value.expandtabs().split("\n")
    hunks: list[list[str]] = []
    hunk: list[str] = []
    for ln in patch.expandtabs().splitlines():
        if ln.startswith(("*** ", "---", "+++")):
            continue
        if ln.startswith("@@"):
            if hunk:
                hunks.append(hunk)
                hunk = []
        elif ln.startswith((" ", "-", "+")):
            hunk.append(ln)
        elif ln.strip() == "":
            hunk.append(" ")
    if hunk:
        hunks.append(hunk)
    if not hunks:
        raise InvalidEditError("No applicable hunks found in patch. Ensure lines start with ' ', '-', or '+'.")
    for hunk in hunks:
        expected = [ln[1:] for ln in hunk if ln[0] in " -"]
        replacement = [ln[1:] for ln in hunk if ln[0] in " +"]
        if not expected:
            lines = lines + replacement
            continue
        matches = _find_all(lines, expected)
        if not matches:
            sample = "\n".join(expected[:4])
            raise InvalidEditError(
                "Failed to apply patch: expected hunk context not found in the memory block. Verify the target "
                f"lines exist and try providing more context. Expected start:\n{sample}"
            )
        if len(matches) > 1:
            raise InvalidEditError(
                "Failed to apply patch: hunk context matched multiple places in the memory block. Please add more "
                "unique surrounding context to disambiguate."
            )
        lines = lines[: matches[0]] + replacement + lines[matches[0] + len(expected) :]
    return "\n".join(lines)


_PATCH_HEADERS = ("*** Add Block:", "*** Delete Block:", "*** Update Block:", "*** Move to:")


def memory_apply_patch(args: dict[str, Any], blocks: Sequence[BlockSpec]) -> MemoryPlan:
    """Letta's `memory_apply_patch`: a diff against the block `label`, or (with "*** Add/Delete/Update Block:" and
    "*** Move to:" headers) several blocks created, deleted, patched and renamed in order."""
    patch = str(_arg(args, "patch"))
    if _ARROW_LINE_NUMBER.search(patch):
        raise InvalidEditError(
            "Patch contains a line number prefix, which is not allowed. Do not include line numbers (they are for "
            "display only)."
        )
    if LINE_NUMBER_WARNING in patch:
        raise InvalidEditError(
            "Patch contains the line number warning banner, which is not allowed. Provide only the text to edit."
        )
    patch = patch.expandtabs()
    state = _Blocks(blocks)
    if not any(ln.startswith(_PATCH_HEADERS) for ln in patch.splitlines()):
        block = state.get(str(_arg(args, "label")))
        _writable(block)
        value = apply_unified_patch(block.value, patch)
        state.update(block, value)
        return MemoryPlan(tuple(state.changes), value)
    actions = _patch_actions(patch.splitlines())
    done = []
    for action in actions:
        kind, label = action["kind"], action["label"]
        if kind == "add":
            state.create(label, "\n".join(action["lines"]).rstrip("\n"), action["description"])
            done.append(f"Created memory block '{label}'")
        elif kind == "delete":
            state.delete(label)
            done.append(f"Deleted memory block '{label}'")
        elif kind == "rename":
            state.rename(label, action["new_label"])
            done.append(f"Renamed memory block '{label}' to '{action['new_label']}'")
        else:
            block = state.get(label)
            _writable(block)
            state.update(block, apply_unified_patch(block.value, "\n".join(action["lines"])))
            done.append(f"Updated memory block '{label}'")
    result = (
        "Successfully applied memory patch operations. "
        + _RECOMPILED.format(what="the updated memory contents")
        + "\n\nOperations completed:\n- "
        + "\n- ".join(done)
    )
    return MemoryPlan(tuple(state.changes), result)


def _patch_actions(lines: list[str]) -> list[dict[str, Any]]:
    """The operations of an extended patch, in order (Letta's parser: a Description line may follow an Add header;
    Add's body is its "+" lines; Move to renames the block the last header named)."""
    actions: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    last_label: str | None = None
    i = 0
    while i < len(lines):
        ln = lines[i]
        header = next((h for h in _PATCH_HEADERS if ln.startswith(h)), None)
        if header is None:
            if current is not None:
                if current["kind"] == "add":
                    if ln.startswith("+") or ln.strip() == "":
                        current["lines"].append(ln[1:] if ln.startswith("+") else "")
                else:
                    current["lines"].append(ln)
            i += 1
            continue
        target = ln.split(":", 1)[1].strip()
        if current is not None:
            actions.append(current)
            current = None
        if header == "*** Move to:":
            if not target:
                raise InvalidEditError("*** Move to: must specify a non-empty new label")
            if last_label is None:
                raise InvalidEditError("*** Move to: must follow an Add/Update/Delete header")
            actions.append({"kind": "rename", "label": last_label, "new_label": target})
            last_label = target
            i += 1
            continue
        kind = {"*** Add Block:": "add", "*** Delete Block:": "delete", "*** Update Block:": "update"}[header]
        if not target:
            raise InvalidEditError(f"{header} must specify a non-empty label")
        last_label = target
        i += 1
        if kind == "delete":
            actions.append({"kind": "delete", "label": target})
            continue
        current = {"kind": kind, "label": target, "lines": [], "description": ""}
        if kind == "add" and i < len(lines) and lines[i].startswith("Description:"):
            current["description"] = lines[i].split(":", 1)[1].strip()
            i += 1
    if current is not None:
        actions.append(current)
    if not actions:
        raise InvalidEditError(
            "No operations found. Provide at least one of: *** Add Block, *** Delete Block, *** Update Block."
        )
    return actions


def memory_plan(
    name: str, args: dict[str, Any], blocks: Sequence[BlockSpec], *, target_label: str = "human"
) -> MemoryPlan:
    """The changes of a `memory`, `memory_apply_patch` or `rethink_user_memory` call (Letta's voice sleep-time
    agent rewrites its target block, the conversation agent's `human`, creating it when missing)."""
    if name == "memory":
        return memory_command(args, blocks)
    if name == "memory_apply_patch":
        return memory_apply_patch(args, blocks)
    if name == "rethink_user_memory":
        state = _Blocks(blocks)
        new_memory = str(_arg(args, "new_memory"))
        if target_label in state.by_label:
            state.update(state.get(target_label), new_memory)
        else:
            state.create(target_label, new_memory, "")
        return MemoryPlan(tuple(state.changes), "")
    raise InvalidEditError(f"{name!r} is not a memory tool")


def apply_memory_tool(name: str, args: dict[str, Any], blocks: Sequence[BlockSpec]) -> BlockEdit:
    """Run one core-memory tool call against the blocks; returns the edit or raises MemoryEditError. A `memory`,
    `memory_apply_patch` or `rethink_user_memory` call is an edit here when it changes one existing block's value
    (what creates, deletes or renames blocks is applied from its `memory_plan`)."""
    if name in ("memory", "memory_apply_patch", "rethink_user_memory"):
        plan = memory_plan(name, args, blocks)
        labels = {c.label for c in plan.changes}
        if len(labels) != 1 or any(c.kind != "update" for c in plan.changes):
            raise BlockChangesNeeded()
        block = find_block(blocks, plan.changes[0].label)
        return BlockEdit(label=block.label, old_value=block.value, new_value=plan.changes[-1].value)
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
