"""What the file tools do for an agent, returning the text Letta's tools return: open_files (line windows, least
recently used closed past the limit), grep_files (regex with context lines, paged by 20) and semantic_search_files
(vectors fused with full text, or full text alone when the folder has no embedding model); and the `<directories>`
section of the agent's context. Reads, plus the open/accessed marks on the agent's file views."""

import re
from bisect import bisect_right
from html import escape

from django.db import connections

from core.errors import Invalid
from core.models import Agent
from core.regex import MAX_PATTERN, PatternError, pattern_compile
from memory.embedders.base import EmbeddingError
from memory.embedders.selection import embedder_for_handle
from memory.files import services
from memory.files.lines import cut, window
from memory.files.selectors import (
    NumberedText,
    agent_file_states,
    agent_folders,
    file_limits,
    file_lines,
    file_numbered,
)
from memory.files.vectors import files_nearest
from memory.models import FileStatus, FolderFile, Passage
from memory.search.fulltext import ranked_ids
from memory.search.fusion import reciprocal_rank_fusion
from memory.search.vectors import pg_nearest, pg_nearest_rows

GREP_PAGE = 20
GREP_MAX_MATCHES = 1000
SEMANTIC_MAX = 50


def _attached(agent: Agent) -> dict:
    return {services.context_name(s): s for s in agent_file_states(agent=agent, content=False)}


def open_files(*, agent: Agent, file_requests: list[dict], close_all_others: bool = False) -> str:
    """Open the requested files (`offset` 0-based, `length` lines) and say what was opened and closed."""
    limit = file_limits(agent).max_files_open
    if not file_requests:
        raise Invalid("No file requests provided")
    if len(file_requests) > limit:
        raise Invalid(f"Cannot open {len(file_requests)} files: exceeds configured maximum limit of {limit} files")
    attached = _attached(agent)
    plans = []
    for req in file_requests:
        name, offset, length = req.get("file_name"), req.get("offset"), req.get("length")
        if offset is not None and offset < 0:
            raise Invalid("Offset must be non-negative")
        if length is not None and length < 1:
            raise Invalid("Length must be at least 1")
        if name not in attached:
            raise Invalid(
                f"{name} not attached - did you get the filename correct? Currently you have the following files "
                f"attached: {sorted(attached)}"
            )
        start = offset + 1 if offset is not None else None
        end = (start or 1) + length - 1 if length is not None else None
        plans.append((name, attached[name], start, end))
    keep = tuple(s.file_id for _, s, _, _ in plans)
    others = services.files_close_all(agent=agent, keep=keep) if close_all_others else []
    evicted: list[str] = []
    described = []
    for name, state, start, end in plans:
        evicted += services.file_open(agent=agent, file_id=state.file_id, start=start, end=end, keep=keep)
        described.append(f"{name} (lines {start or 1}-{end})" if end else name)
    head = (
        f"* Opened {described[0]}"
        if len(described) == 1
        else f"* Opened {len(described)} files: " + ", ".join(described)
    )
    if others:
        head += f"\nNote: Closed {len(others)} file(s) due to close_all_others=True: {', '.join(others)}"
    if evicted:
        head += (
            f"\nNote: Closed {len(evicted)} least recently used file(s) due to open file limit: {', '.join(evicted)}"
        )
    return head


def _include(include: str | None):
    if not include:
        return None
    if include.startswith("*.") and re.fullmatch(r"\*\.\w+", include):
        include = ".*" + re.escape(include[1:]) + "$"
    try:
        return pattern_compile(include, ignore_case=True)
    except PatternError as exc:
        raise Invalid(f"Invalid include pattern: {exc}") from None


def grep_files(
    *, agent: Agent, pattern: str, include: str | None = None, context_lines: int = 1, offset: int = 0
) -> str:
    """Regex search (case-insensitive, by RE2: linear in the text) over the numbered lines of the agent's files, 20
    matches a page."""
    if not pattern or len(pattern) > MAX_PATTERN:
        raise Invalid(f"Pattern must be 1-{MAX_PATTERN} characters")
    try:
        regex = pattern_compile(pattern, ignore_case=True, multiline=True, utf8=True)
    except PatternError as exc:
        raise Invalid(f"Invalid regex pattern '{pattern}': {exc}") from None
    attached = _attached(agent)
    if not attached:
        return "No files are currently attached to search"
    wanted = _include(include)
    context_lines = max(0, min(int(context_lines or 0), 20))
    matches, per_file = [], {}
    for name, state in sorted(attached.items()):
        if wanted and not wanted.search(name):
            continue
        numbered = file_numbered(state.file)
        lines = numbered.lines
        for i in _matching_lines(regex, numbered):
            line = lines[i]
            per_file[name] = per_file.get(name, 0) + 1
            around = lines[max(0, i - context_lines) : i + context_lines + 1]
            block = [f"{'>' if x.number == line.number else ' '} {x.number}: {x.text}" for x in around]
            matches.append((name, line.number, block, state.file_id))
            if len(matches) >= GREP_MAX_MATCHES:
                break
    if not matches:
        return f"No matches found for pattern: '{pattern}'" + (f" in files matching '{include}'" if include else "")
    services.files_touch(agent=agent, file_ids={m[3] for m in matches})
    offset = max(0, int(offset or 0))
    shown = matches[offset : offset + GREP_PAGE]
    total = f"{len(matches)}+" if len(matches) >= GREP_MAX_MATCHES else str(len(matches))
    out = [
        f"Found {total} total matches across {len(per_file)} files (showing matches {offset + 1}-{offset + len(shown)} of {total})",
        "=" * 80,
        "\nFiles with matches:",
        *(f"  - {name}: {n} matches" for name, n in per_file.items()),
        "",
    ]
    for name, number, block, _ in shown:
        out += [f"\n=== {name}:{number} ===", *block]
    nxt = offset + len(shown)
    out += [
        "",
        f'To see more matches, call: grep_files(pattern="{pattern}", offset={nxt})'
        if nxt < len(matches)
        else "No more matches to show.",
    ]
    return "\n".join(out)


def _matching_lines(regex, numbered: NumberedText):
    """Indexes of the lines the regex matches, each checked on its own line as Letta does, found by searching the
    joined text (one scan in C, the GIL released, to each next candidate line instead of a Python call per line)."""
    lines, text, starts = numbered.lines, numbered.utf8, numbered.starts

    def line_bytes(i: int) -> bytes:
        return text[starts[i] : starts[i + 1] - 1] if i + 1 < len(starts) else text[starts[i] :]

    if b"\\A" in regex.pattern or b"\\z" in regex.pattern:  # anchors that mean each line's ends: line by line
        yield from (i for i in range(len(lines)) if regex.search(line_bytes(i)))
        return
    pos = 0
    while pos < len(text) and (found := regex.search(text, pos)):
        i = bisect_right(starts, found.start()) - 1
        if regex.search(line_bytes(i)):
            yield i
        if i + 1 >= len(starts):
            return
        pos = starts[i + 1]


# What a hit shows: its text under its folder's and file's names.
_HIT_FIELDS = ("id", "text", "file_id", "folder_id", "file__file_name", "folder__name")


def _hits(qs):
    return qs.select_related("file", "folder").only(*_HIT_FIELDS)


def _vector_ids(qs, handle: str, owner, query: str, limit: int, folder_ids: list[str]) -> list[str]:
    embedder = embedder_for_handle(owner=owner, handle=handle)
    if embedder is None:
        return []
    vector = embedder.embed_one(query)
    if connections[qs.db].vendor == "postgresql":
        return [pid for pid, _ in pg_nearest(queryset=qs.filter(embedding_model=handle), vector=vector, limit=limit)]
    return files_nearest(folder_ids=folder_ids, handle=handle, vector=vector, limit=limit)


def _nearest_hits(qs, handle: str, owner, query: str, limit: int, folder_ids: list[str]) -> list[Passage]:
    """The chunks nearest the query by one model's vectors, nearest first (on PostgreSQL ranked and read in one
    query); raises EmbeddingError."""
    embedder = embedder_for_handle(owner=owner, handle=handle)
    if embedder is None:
        return []
    vector = embedder.embed_one(query)
    if connections[qs.db].vendor == "postgresql":
        return pg_nearest_rows(queryset=_hits(qs.filter(embedding_model=handle)), vector=vector, limit=limit)
    ids = files_nearest(folder_ids=folder_ids, handle=handle, vector=vector, limit=limit)
    rows = _hits(Passage.objects).in_bulk(ids)
    return [rows[pid] for pid in ids if pid in rows]


def passages_for_query(*, agent: Agent, query: str, limit: int = 5) -> list[Passage]:
    """The chunks of the agent's attached files nearest the query, as Letta searches them: by vector with the files'
    embedding models (the rankings of several models fused), by full text for files embedded with none or when the
    embedding call fails. Full text is not fused with vectors: ranking every chunk a common word matches costs
    tens of milliseconds at 10,000 chunks (bench/files.py), more than the whole search may take. The chunks are read
    with what a hit shows (text, file and folder names); another field is read when first touched."""
    # Chunks exist only for processed files: their folders and models, in one query.
    processed = set(
        FolderFile.objects.filter(folder__agentfolder__agent=agent, status=FileStatus.COMPLETED).values_list(
            "id", "folder_id", "embedding_model"
        )
    )
    folder_ids = sorted({folder_id for _, folder_id, _ in processed})
    handles = {handle for _, _, handle in processed}
    # Of those files only: one still processing has written some of its chunks already.
    qs = Passage.objects.filter(folder_id__in=folder_ids, file_id__in=sorted(f for f, _, _ in processed))
    if len(handles) == 1 and "" not in handles:  # the usual case: one model's ranking is the answer
        try:
            return _nearest_hits(qs, next(iter(handles)), agent.owner, query, limit, folder_ids)
        except EmbeddingError:
            handles = set()  # full text still answers
    rankings = {}
    for handle in sorted(handles - {""}):
        try:
            rankings[handle] = _vector_ids(qs, handle, agent.owner, query, limit * 2, folder_ids)
        except EmbeddingError:
            continue  # full text still answers
    if "" in handles or not rankings:
        text_qs = qs if not rankings else qs.filter(embedding_model="")
        rankings["full_text"] = ranked_ids(queryset=text_qs, query=query, limit=limit * 2)
    fused = [pid for pid, _, _ in reciprocal_rank_fusion(rankings)][:limit]
    rows = _hits(Passage.objects).in_bulk(fused)
    return [rows[pid] for pid in fused if pid in rows]


def semantic_search_files(*, agent: Agent, query: str, limit: int = 5) -> str:
    """Letta's semantic_search_files answer: the best chunks, each under its file's name."""
    limit = max(1, min(int(limit or 5), SEMANTIC_MAX))
    hits = passages_for_query(agent=agent, query=query, limit=limit)
    if not hits:
        return f"No semantic matches found for query: '{query}'"
    services.files_touch(agent=agent, file_ids={p.file_id for p in hits})
    summary = f"Found {len(hits)} semantic matches in {len({p.file_id for p in hits})} files for query: '{query}'"
    out = [summary, "=" * len(summary)]
    for i, p in enumerate(hits, start=1):
        lines = p.text.splitlines()
        out.append(f"\n=== {p.folder.name}/{p.file.file_name} (passage #{i}) ===")
        out += [f"  {line}" for line in lines[:20]]
        if len(lines) > 20:
            out.append(f"  ... [truncated {len(lines) - 20} more lines]")
    return "\n".join(out)


def directories_section(agent: Agent) -> str:
    """The `<directories>` text Letta renders after the memory blocks ("" when the agent has no folder)."""
    folders = list(agent_folders(agent=agent))
    if not folders:
        return ""
    limits = file_limits(agent)
    states = list(agent_file_states(agent=agent).order_by("created_at", "id"))
    out = [
        "<directories>",
        "<file_limits>",
        f"- current_files_open={sum(s.is_open for s in states)}",
        f"- max_files_open={limits.max_files_open}",
        "</file_limits>",
    ]
    for folder in folders:
        out.append(f'<directory name="{escape(folder.name)}">')
        if folder.description:
            out.append(f"<description>{escape(folder.description)}</description>")
        if folder.instructions:
            out.append(f"<instructions>{escape(folder.instructions)}</instructions>")
        for s in (s for s in states if s.folder_id == folder.id):
            value = (
                cut(
                    window(file_lines(s.file), start=s.start_line, end=s.end_line),
                    limits.per_file_view_window_char_limit,
                )
                if s.is_open
                else ""
            )
            out += [
                f'<file status="{"open" if s.is_open else "closed"}" name="{escape(services.context_name(s))}">',
                "<metadata>",
                "- read_only=true",
                f"- chars_current={len(value)}",
                f"- chars_limit={limits.per_file_view_window_char_limit}",
                "</metadata>",
            ]
            if s.is_open:
                out += ["<value>", value, "</value>"]
            out.append("</file>")
        out.append("</directory>")
    out.append("</directories>")
    return "\n".join(out)
