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
