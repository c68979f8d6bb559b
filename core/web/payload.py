"""The inspector's reading view of a request payload: one part per section, message and tool definition, each
with its text and token count, and the per-part text diff between two payloads (pure: no database)."""

import difflib
import json
from dataclasses import dataclass, field

from core.engine import tokens
from core.engine.context import SYSTEM_SECTIONS

SECTION_LABELS = {
    "system": "System prompt",
    "tool_rules": "Tool rules",
    "core_memory": "Core memory",
    "files": "Files",
    "memory_metadata": "External memory summary",
    "summary": "Summary",
    "messages": "Messages",
    "tools": "Tool definitions",
}
SECTION_COLORS = {
    "system": "system",
    "tool_rules": "rules",
    "core_memory": "core",
    "files": "files",
    "memory_metadata": "external",
    "summary": "summary",
    "messages": "messages",
    "tools": "tools",
}
DIFF_LINES = 400  # a diff longer than this is cut, with a note: the raw payloads are one click away


@dataclass
class Part:
    """One readable piece of a payload."""

    key: str  # stable across steps: a section name, "message:<n>" or "tool:<name>"
    label: str
    color: str
    tokens: int
    text: str
    group: str  # "section" | "message" | "tool" | "block"
    note: str = ""
    children: list["Part"] = field(default_factory=list)


@dataclass
class PartDiff:
    label: str
    color: str
    tokens_before: int
    tokens_after: int
    lines: list[tuple[str, str]] = field(default_factory=list)  # (" ", "+", "-", "@"), text
    truncated: bool = False

    @property
    def delta(self) -> int:
        return self.tokens_after - self.tokens_before


def message_text(message: dict) -> str:
    """A chat message as readable text: its content, then each tool call with pretty arguments."""
    content = message.get("content")
    if isinstance(content, list):
        content = "\n".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    lines = [content] if content else []
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        try:
            args = json.dumps(json.loads(fn.get("arguments") or "{}"), indent=2, ensure_ascii=False)
        except (TypeError, ValueError):
            args = str(fn.get("arguments"))
        lines.append(f"→ {fn.get('name')}({args})")
    return "\n".join(lines)


def _message_label(message: dict) -> str:
    role = message.get("role", "?")
    if role == "tool":
        return f"tool return · {message.get('name') or message.get('tool_call_id') or ''}".rstrip(" ·")
    if role == "assistant" and message.get("tool_calls"):
        return "assistant → " + ", ".join((c.get("function") or {}).get("name", "?") for c in message["tool_calls"])
    return role


def _tool_parts(model: str, request: dict) -> list[Part]:
    out = []
    for tool in request.get("tools") or []:
        fn = tool.get("function") or {}
        out.append(
            Part(
                key=f"tool:{fn.get('name')}",
                label=f"tool · {fn.get('name')}",
                color="tools",
                tokens=tokens.count_tool(model, tool),
                text=json.dumps(fn, indent=2, ensure_ascii=False),
                group="tool",
            )
        )
    return out


def _message_parts(model: str, messages: list[dict], start: int) -> list[Part]:
    return [
        Part(
            key=f"message:{start + i}",
            label=_message_label(m),
            color="messages",
            tokens=tokens.count_message(model, m),
            text=message_text(m),
            group="message",
        )
        for i, m in enumerate(messages)
    ]


def _block_parts(model: str, blocks) -> list[Part]:
    """One part per memory block: its value and the value's own tokens (the section adds the block's framing)."""
    return [
        Part(
            key=f"block:{b.label}",
            label=f"block · {b.label}",
            color="core",
            tokens=tokens.count_text(model, b.value),
            text=b.value,
            group="block",
            note=f"{len(b.value)} / {b.limit} chars{' · read-only' if b.read_only else ''}",
        )
        for b in blocks
    ]


def payload_parts(*, model: str, request: dict, sections: list[dict], blocks=()) -> list[Part]:
    """The parts of a request, given its sections ({name, tokens, text?}: text when the compiler's is at hand) and,
    for the core memory part, the blocks it holds (objects with label, value, limit, read_only).

    Without section texts (a stored step keeps only token counts) the system message is one part, with the
    token counts of the sections it is made of.
    """
    by_name = {s["name"]: s for s in sections}
    messages = list(request.get("messages") or [])
    parts: list[Part] = []
    if all("text" in by_name.get(n, {}) for n in SYSTEM_SECTIONS):
        parts += [
            Part(
                key=n,
                label=SECTION_LABELS[n],
                color=SECTION_COLORS[n],
                tokens=by_name[n]["tokens"],
                text=by_name[n]["text"],
                group="section",
                children=_block_parts(model, blocks) if n == "core_memory" else [],
            )
            for n in SYSTEM_SECTIONS
            if by_name[n]["text"]
        ]
    elif messages:
        counts = ", ".join(
            f"{SECTION_LABELS[n].lower()} {by_name[n]['tokens']}" for n in SYSTEM_SECTIONS if n in by_name
        )
        parts.append(
            Part(
                key="system_message",
                label="System message",
                color="system",
                tokens=sum(by_name.get(n, {}).get("tokens", 0) for n in SYSTEM_SECTIONS)
                or tokens.count_message(model, messages[0]),
                text=message_text(messages[0]),
                group="section",
                note=counts,
            )
        )
    body = messages[1:]
    has_summary = by_name.get("summary", {}).get("tokens", 0) > 0 and body
    if has_summary:
        parts.append(
            Part(
                key="summary",
                label=SECTION_LABELS["summary"],
                color="summary",
                tokens=by_name["summary"]["tokens"],
                text=message_text(body[0]),
                group="section",
            )
        )
        body = body[1:]
    parts += _message_parts(model, body, 0)
    return parts + _tool_parts(model, request)


def _diff_lines(before: str, after: str) -> tuple[list[tuple[str, str]], bool]:
    lines: list[tuple[str, str]] = []
    for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=2):
        if line.startswith(("---", "+++")):
            continue
        lines.append(("@", line) if line.startswith("@@") else (line[:1] or " ", line[1:]))
    return lines[:DIFF_LINES], len(lines) > DIFF_LINES


def _grouped(parts: list[Part]) -> dict[str, tuple[str, str, int, str]]:
    """Key → (label, color, tokens, text), with all messages as one part and all tools as one part."""
    out = {p.key: (p.label, p.color, p.tokens, p.text) for p in parts if p.group == "section"}
    for group, label, color in (("message", "Messages", "messages"), ("tool", "Tool definitions", "tools")):
        members = [p for p in parts if p.group == group]
        text = (
            "\n".join(f"[{p.label}]\n{p.text}\n" for p in members)
            if group == "message"
            else "\n".join(f"{p.label} ({p.tokens} tokens)" for p in members)
        )
        out[group] = (f"{label} ({len(members)})", color, sum(p.tokens for p in members), text)
    return out


def payload_diff(before: list[Part], after: list[Part]) -> list[PartDiff]:
    """What changed from one payload to the next, per section (messages and tools each as one section)."""
    a, b = _grouped(before), _grouped(after)
    if "system_message" in a and "system_message" not in b or "system_message" in b and "system_message" not in a:
        a, b = _merge_system(a), _merge_system(b)
    out = []
    for key in dict.fromkeys([*b, *a]):
        la, ca, ta, xa = a.get(key, ("", "", 0, ""))
        lb, cb, tb, xb = b.get(key, (la, ca, 0, ""))
        if xa == xb and ta == tb:
            continue
        lines, cut = _diff_lines(xa, xb)
        out.append(
            PartDiff(label=lb or la, color=cb or ca, tokens_before=ta, tokens_after=tb, lines=lines, truncated=cut)
        )
    return out


def _merge_system(grouped: dict) -> dict:
    """Both sides as one system message, when only one side has the system sections apart."""
    names = [n for n in (*SYSTEM_SECTIONS, "system_message") if n in grouped]
    merged = ("System message", "system", sum(grouped[n][2] for n in names), "\n\n".join(grouped[n][3] for n in names))
    return {"system_message": merged, **{k: v for k, v in grouped.items() if k not in names}}
