"""Pure core-memory edits and their typed, agent-readable errors."""

import pytest

from core.engine import memory_ops as ops
from core.engine.types import BlockSpec


def block(value="line one\nline two", limit=100, read_only=False):
    return BlockSpec(id="b", label="human", value=value, limit=limit, read_only=read_only)


def test_append():
    assert ops.core_memory_append(block(), "likes cats") == "line one\nline two\nlikes cats"
    assert ops.core_memory_append(block(value=""), "first") == "first"


def test_core_memory_replace_replaces_all_and_requires_presence():
    assert ops.core_memory_replace(block("a b a"), "a", "c") == "c b c"
    with pytest.raises(ops.TextNotFoundError, match="not found"):
        ops.core_memory_replace(block(), "missing", "x")


def test_memory_replace_needs_exactly_one_match():
    assert ops.memory_replace(block(), "line two", "line 2") == "line one\nline 2"
    with pytest.raises(ops.AmbiguousMatchError, match="occurs 2 times"):
        ops.memory_replace(block("dup\ndup"), "dup", "x")
    with pytest.raises(ops.TextNotFoundError):
        ops.memory_replace(block(), "nope", "x")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (0, "new\nline one\nline two"),
        (1, "line one\nnew\nline two"),
        (-1, "line one\nline two\nnew"),
        (2, "line one\nline two\nnew"),
    ],
)
def test_memory_insert(line, expected):
    assert ops.memory_insert(block(), "new", line) == expected


def test_memory_insert_out_of_range():
    with pytest.raises(ops.InvalidEditError, match="out of range"):
        ops.memory_insert(block(), "new", 7)


def test_over_limit_names_the_limit_and_suggests_archival():
    with pytest.raises(ops.BlockLimitError) as info:
        ops.core_memory_append(block(limit=20), "this pushes it over")
    assert "limit of 20" in str(info.value) and "archival_memory_insert" in str(info.value)
    assert info.value.limit == 20 and info.value.length > 20


def test_read_only_refuses_every_edit():
    ro = block(read_only=True)
    for fn, args in [
        (ops.core_memory_append, ("x",)),
        (ops.core_memory_replace, ("line", "x")),
        (ops.memory_replace, ("line one", "x")),
        (ops.memory_insert, ("x",)),
    ]:
        with pytest.raises(ops.BlockReadOnlyError, match="read-only"):
            fn(ro, *args)


def test_apply_memory_tool_dispatches_and_reports_edit():
    blocks = [block(), BlockSpec(id="p", label="persona", value="I am Sam.")]
    edit = ops.apply_memory_tool("memory_insert", {"label": "persona", "new_string": "I like tea."}, blocks)
    assert edit == ops.BlockEdit(label="persona", old_value="I am Sam.", new_value="I am Sam.\nI like tea.")
    assert "persona" in ops.edit_result_text(edit)
    with pytest.raises(ops.BlockNotFoundError, match="Available blocks: 'human', 'persona'"):
        ops.apply_memory_tool("core_memory_append", {"label": "nobody", "content": "x"}, blocks)
    with pytest.raises(ops.InvalidEditError, match="missing required argument 'content'"):
        ops.apply_memory_tool("core_memory_append", {"label": "human"}, blocks)


def test_memory_rethink_rewrites_the_whole_block_and_refuses_line_numbers():
    assert ops.memory_rethink(block(), "all new") == "all new"
    edit = ops.apply_memory_tool("memory_rethink", {"label": "human", "new_memory": "x\ny"}, [block()])
    assert (edit.old_value, edit.new_value) == ("line one\nline two", "x\ny")
    with pytest.raises(ops.InvalidEditError, match="line number"):
        ops.memory_rethink(block(), "a\nLine 2: b")
    with pytest.raises(ops.BlockLimitError):
        ops.memory_rethink(block(limit=3), "four")
    with pytest.raises(ops.BlockReadOnlyError):
        ops.memory_rethink(block(read_only=True), "x")


def blocks():
    return [
        BlockSpec(id="h", label="human", value="Alice\nLikes tea", limit=100),
        BlockSpec(id="p", label="persona", value="A helper.", limit=100, read_only=True),
    ]


def test_memory_command_edits_creates_renames_and_deletes_as_letta_answers():
    plan = ops.memory_command(
        {"command": "str_replace", "path": "/memories/human", "old_string": "tea", "new_string": "coffee"}, blocks()
    )
    assert [(c.kind, c.label, c.value) for c in plan.changes] == [("update", "human", "Alice\nLikes coffee")]
    assert plan.result == "Alice\nLikes coffee"  # Letta answers the block's new value
    plan = ops.memory_command({"command": "insert", "path": "human", "insert_text": "Bob", "insert_line": 0}, blocks())
    assert plan.changes[0].value == "Bob\nAlice\nLikes tea"
    plan = ops.memory_command(
        {"command": "create", "path": "/memories/projects", "description": "Their projects", "file_text": "IDE"},
        blocks(),
    )
    assert plan.changes == (ops.BlockChange("create", "projects", value="IDE", description="Their projects"),)
    assert plan.result.startswith("Successfully created memory block 'projects'.")
    plan = ops.memory_command(
        {"command": "rename", "old_path": "/memories/human", "new_path": "/memories/user"}, blocks()
    )
    assert plan.changes == (ops.BlockChange("rename", "human", new_label="user"),)
    plan = ops.memory_command({"command": "rename", "path": "/memories/human", "description": "Who"}, blocks())
    assert plan.changes == (ops.BlockChange("describe", "human", description="Who"),)
    assert ops.memory_command({"command": "delete", "path": "/memories/human"}, blocks()).changes[0].kind == "delete"


def test_memory_command_refuses_what_letta_refuses():
    cases = [
        ({"command": "create", "path": "/memories/human", "description": "x"}, "already exists"),
        ({"command": "create", "path": "/memories/x"}, "description is required"),
        ({"command": "str_replace", "path": "human", "old_string": "1→ Alice", "new_string": "x"}, "line number"),
        ({"command": "str_replace", "path": "nobody", "old_string": "a", "new_string": "b"}, "does not exist"),
        ({"command": "insert", "path": "human", "insert_text": "x", "insert_line": 9}, "out of range"),
        ({"command": "delete", "path": "persona"}, "read-only"),
        ({"command": "rename", "old_path": "human", "new_path": "persona"}, "already exists"),
        ({"command": "rename", "path": "human"}, "old_path and new_path are required"),
        ({"command": "view", "path": "human"}, "Unknown command 'view'"),
    ]
    for args, message in cases:
        with pytest.raises(ops.MemoryEditError, match=message):
            ops.memory_command(args, blocks())


def test_memory_apply_patch_single_block_and_extended():
    plan = ops.memory_apply_patch({"label": "human", "patch": "@@\n Alice\n-Likes tea\n+Likes coffee"}, blocks())
    assert plan.changes[0].value == "Alice\nLikes coffee" and plan.result == "Alice\nLikes coffee"
    patch = (
        "*** Add Block: notes\nDescription: Loose notes\n+one\n+two\n"
        "*** Update Block: human\n-Alice\n+Bob\n*** Move to: user\n*** Delete Block: notes"
    )
    plan = ops.memory_apply_patch({"label": "", "patch": patch}, blocks())
    assert [(c.kind, c.label) for c in plan.changes] == [
        ("create", "notes"),
        ("update", "human"),
        ("rename", "human"),
        ("delete", "notes"),
    ]
    assert plan.changes[0].value == "one\ntwo" and plan.changes[0].description == "Loose notes"
    assert plan.changes[1].value == "Bob\nLikes tea" and plan.changes[2].new_label == "user"
    assert plan.result.endswith("- Renamed memory block 'human' to 'user'\n- Deleted memory block 'notes'")
    with pytest.raises(ops.InvalidEditError, match="context not found"):
        ops.memory_apply_patch({"label": "human", "patch": "-Likes milk\n+x"}, blocks())
    with pytest.raises(ops.InvalidEditError, match="line number prefix"):
        ops.memory_apply_patch({"label": "human", "patch": " 1→ Alice\n-Likes tea"}, blocks())
    with pytest.raises(ops.BlockReadOnlyError):
        ops.memory_apply_patch({"label": "", "patch": "*** Update Block: persona\n-A helper.\n+x"}, blocks())


def test_one_block_value_edit_is_an_edit_and_block_changes_are_not():
    edit = ops.apply_memory_tool("rethink_user_memory", {"new_memory": "Alice drinks coffee"}, blocks())
    assert (edit.label, edit.new_value) == ("human", "Alice drinks coffee")
    edit = ops.apply_memory_tool("memory", {"command": "insert", "path": "human", "insert_text": "x"}, blocks())
    assert edit.new_value == "Alice\nLikes tea\nx"
    with pytest.raises(ops.BlockChangesNeeded, match="not available from a step"):
        ops.apply_memory_tool("memory", {"command": "delete", "path": "human"}, blocks())
