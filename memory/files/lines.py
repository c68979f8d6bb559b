"""A file's numbered lines: the one numbering that open windows, grep hits and search chunks all cite.

As in Letta's LineChunker, empty lines are dropped and lines are numbered from 1; code keeps its indentation, other
text is stripped. Each line knows its page (PDF pages are separated by form feeds in the parsed text).
"""

from dataclasses import dataclass

from memory.files.parse import PAGE_BREAK

TRUNCATED = "...[TRUNCATED]\n# NOTE: This block is truncated, use functions to view the full content."


@dataclass(frozen=True)
class Line:
    number: int  # 1-based
    page: int  # 1-based
    text: str


def numbered_lines(text: str, *, keep_indent: bool = False) -> list[Line]:
    """The non-empty lines of `text`, numbered, each with its page."""
    out: list[Line] = []
    for page, page_text in enumerate(text.split(PAGE_BREAK), start=1):
        for raw in page_text.splitlines():
            line = raw.rstrip() if keep_indent else raw.strip()
            if line:
                out.append(Line(number=len(out) + 1, page=page, text=line))
    return out


def window(lines: list[Line], *, start: int | None = None, end: int | None = None) -> str:
    """The visible content of an open file: a header saying which lines it shows, then `n: text` per line."""
    total = len(lines)
    if start is None and end is None:
        header = f"[Viewing file start (out of {total} lines)]"
        shown = lines
    else:
        first = start or 1
        shown = lines[first - 1 : end]
        last = f"{end}" if end is not None and end < total else "end"
        header = f"[Viewing lines {first} to {last} (out of {total} lines)]"
    return "\n".join([header, *(f"{line.number}: {line.text}" for line in shown)])


def cut(content: str, limit: int) -> str:
    """Content over the per-file character limit, cut and marked as Letta marks it."""
    return content if len(content) <= limit else content[:limit] + TRUNCATED
