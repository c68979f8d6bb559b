"""Numbered lines to overlapping chunks for embedding and search, each knowing its first and last line and page."""

from dataclasses import dataclass

from memory.files.lines import Line

CHARS_PER_TOKEN = 4  # the folder's chunk size is in tokens, as in Letta; about four characters of English each
OVERLAP_TOKENS = 50  # Letta's overlap


@dataclass(frozen=True)
class Chunk:
    text: str
    start_line: int
    end_line: int
    start_page: int
    end_page: int


def chunk_lines(lines: list[Line], *, chunk_tokens: int = 300, overlap_tokens: int = OVERLAP_TOKENS) -> list[Chunk]:
    """Whole lines gathered up to about `chunk_tokens`; each chunk repeats the last lines of the one before (about
    `overlap_tokens`) so a sentence cut at a boundary is whole in one of them. A line longer than a chunk is split
    into pieces that all cite that line."""
    size = max(50, chunk_tokens) * CHARS_PER_TOKEN
    overlap = min(max(0, overlap_tokens) * CHARS_PER_TOKEN, size // 2)
    pieces = [piece for line in lines for piece in _split(line, size)]
    chunks: list[Chunk] = []
    i = 0
    while i < len(pieces):
        j, length = i, 0
        while j < len(pieces) and (j == i or length + len(pieces[j].text) + 1 <= size):
            length += len(pieces[j].text) + 1
            j += 1
        chunks.append(_chunk(pieces[i:j]))
        if j >= len(pieces):
            break
        back, kept = j, 0
        while back - 1 > i and kept + len(pieces[back - 1].text) + 1 <= overlap:
            back -= 1
            kept += len(pieces[back].text) + 1
        i = back
    return chunks


def _split(line: Line, size: int) -> list[Line]:
    if len(line.text) <= size:
        return [line]
    return [
        Line(number=line.number, page=line.page, text=line.text[k : k + size]) for k in range(0, len(line.text), size)
    ]


def _chunk(pieces: list[Line]) -> Chunk:
    return Chunk(
        text="\n".join(p.text for p in pieces),
        start_line=pieces[0].number,
        end_line=pieces[-1].number,
        start_page=pieces[0].page,
        end_page=pieces[-1].page,
    )
