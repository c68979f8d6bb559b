"""Blocks and passages in Letta v1 shapes (REST, agent state and the archival_memory_search tool), and a block's
last change as its card in the workspace shows it (who made it, a compact diff)."""

import difflib
import re

from memory import selectors
from memory.models import Block, BlockHistory, Passage


def block_out(block) -> dict:
    return {
        "id": block.id,
        "label": block.label,
        "value": block.value,
        "limit": block.limit,
        "description": block.description,
        "read_only": block.read_only,
        "metadata": block.metadata or {},
        "version": block.version,
        "created_at": block.created_at,
        "updated_at": block.updated_at,
    }


def passage_out(passage: Passage) -> dict:
    """A Letta `Passage`; vectors are not sent (they are large and only useful to the server)."""
    return {
        "id": passage.id,
        "text": passage.text,
        "tags": passage.tags or [],
        "metadata": passage.metadata or {},
        "source": passage.source,
        "agent_id": passage.agent_id,
        "archive_id": passage.archive_id,
        "file_id": passage.file_id,  # a folder's passage: its file (Letta's Passage.file_id)
        "embedding": None,
        "embedding_config": (
            {
                "handle": passage.embedding_model,
                "embedding_model": passage.embedding_model,
                "embedding_dim": passage.embedding_dim,
            }
            if passage.embedding_model
            else None
        ),
        "created_at": passage.created_at,
        "updated_at": passage.created_at,
        "is_deleted": False,
    }


def passage_search_result(passage: Passage) -> dict:
    """One archival search hit, `{id, timestamp, content, tags}` as Letta's search endpoint and tool return it."""
    return {
        "id": passage.id,
        "timestamp": passage.created_at.isoformat(),
        "content": passage.text,
        "tags": passage.tags or [],
    }


# --- a block's last change, as its card shows it ---

_WORDS = re.compile(r"\s+|\w+|[^\w\s]")
DIFF_CONTEXT = 40  # characters of unchanged text kept on each side of a change
DIFF_SHOWN = 400  # characters of one removed or added run shown before it is cut
_MATCH_LIMIT = 4_000_000  # past this many word pairs, compare by common start and end only (linear)


def _opcodes(a: list[str], b: list[str]) -> list[tuple[str, int, int, int, int]]:
    if len(a) * len(b) <= _MATCH_LIMIT:
        return difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    end = 0
    while end < min(len(a), len(b)) - start and a[-1 - end] == b[-1 - end]:
        end += 1
    ops = [("equal", 0, start, 0, start), ("replace", start, len(a) - end, start, len(b) - end)]
    ops.append(("equal", len(a) - end, len(a), len(b) - end, len(b)))
    return [op for op in ops if op[1] != op[2] or op[3] != op[4]]


def _cut(kind: str, text: str) -> list[tuple[str, str]]:
    if text.isspace():  # a change of spaces or line breaks alone would not show: name them
        return [(kind, text.replace(" ", "␣").replace("\t", "⇥").replace("\n", "↵\n"))]
    if len(text) <= DIFF_SHOWN:
        return [(kind, text)]
    return [(kind, text[:DIFF_SHOWN]), ("gap", f"… {len(text) - DIFF_SHOWN:,} more characters")]


def _same(text: str, *, first: bool, last: bool) -> list[tuple[str, str]]:
    """Unchanged text between changes, cut down to the context either side of them."""
    if first and last:
        return [("same", text)]
    if first:
        return [("gap", "…"), ("same", text[-DIFF_CONTEXT:])] if len(text) > DIFF_CONTEXT else [("same", text)]
    if last:
        return [("same", text[:DIFF_CONTEXT]), ("gap", "…")] if len(text) > DIFF_CONTEXT else [("same", text)]
    if len(text) > 2 * DIFF_CONTEXT:
        return [("same", text[:DIFF_CONTEXT]), ("gap", "…"), ("same", text[-DIFF_CONTEXT:])]
    return [("same", text)]


def text_diff(old: str, new: str) -> tuple[list[tuple[str, str]], int, int]:
    """A compact word diff of two texts: (kind, text) runs, kind "same" | "del" | "ins" | "gap" (an elision), with
    unchanged text cut to a little context around each change; and how many characters went and came."""
    a, b = _WORDS.findall(old), _WORDS.findall(new)
    ops = _opcodes(a, b)
    # a lone space between two changes reads better inside them ("-old words +new words" rather than word by word)
    merged: list[list] = []
    for tag, i1, i2, j1, j2 in ops:
        lone_space = tag == "equal" and i2 - i1 == 1 and a[i1].isspace() and (i2, j2) != (len(a), len(b))
        if merged and merged[-1][0] != "equal" and (tag != "equal" or lone_space):
            merged[-1] = ["replace", merged[-1][1], i2, merged[-1][3], j2]
        else:
            merged.append([tag, i1, i2, j1, j2])
    runs: list[tuple[str, str]] = []
    removed = added = 0
    for n, (tag, i1, i2, j1, j2) in enumerate(merged):
        if tag == "equal":
            runs += _same("".join(a[i1:i2]), first=n == 0, last=n == len(merged) - 1)
            continue
        gone, came = "".join(a[i1:i2]), "".join(b[j1:j2])
        removed, added = removed + len(gone), added + len(came)
        if gone:
            runs += _cut("del", gone)
        if came:
            runs += _cut("ins", came)
    return runs, added, removed


def block_change(entry: BlockHistory) -> dict:
    """What a block's card says about one change: who made it (a person, or an agent's tool call at a step), when,
    the value's diff and any other field that changed."""
    runs, added, removed = text_diff(entry.old_value, entry.new_value)
    return {
        "version": entry.version,
        "actor": entry.actor_type,
        "user": entry.actor_user.username if entry.actor_user else "",
        "agent_id": entry.agent_id,
        "step_id": entry.step_id,
        "step_index": getattr(entry, "step_index", None),
        "tool_call_id": entry.tool_call_id,
        "tool_name": getattr(entry, "tool_name", ""),
        "at": entry.created_at,
        "diff": runs,
        "added": added,
        "removed": removed,
        "fields": [(name, pair[0], pair[1]) for name, pair in (entry.changes or {}).items() if len(pair) == 2],
    }


def block_cards(blocks: list[Block]) -> list[Block]:
    """The blocks with `last_change` set (a `block_change`, or None for a block unchanged since it was made)."""
    entries = selectors.blocks_last_change(blocks=blocks)
    for block in blocks:
        entry = entries.get(block.id)
        block.last_change = block_change(entry) if entry is not None else None
    return blocks
