"""The README stays a front door, and every relative link in README.md and docs/*.md reaches a file of the repository
(and, with a #fragment, a heading of that file)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 260
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)


def _documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _prose(path: Path) -> str:
    """The file's text without code blocks and code spans, where brackets are not links."""
    return CODE_SPAN.sub("", FENCE.sub("", path.read_text()))


def _anchors(path: Path) -> set[str]:
    """GitHub's ids for the file's headings: lowercased, punctuation dropped, spaces to hyphens, repeats numbered."""
    seen: dict[str, int] = {}
    anchors = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text())):
        slug = re.sub(r"[^\w\- ]", "", CODE_SPAN.sub(lambda m: m[0].strip("`"), heading).lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def _broken_links(doc: Path) -> list[str]:
    broken = []
    for target in LINK.findall(_prose(doc)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto: — not checked here
            continue
        path_part, _, fragment = target.partition("#")
        linked = (doc.parent / path_part if path_part else doc).resolve()
        if ROOT not in linked.parents and linked != ROOT:
            broken.append(f"{target} (outside the repository)")
        elif not linked.exists():
            broken.append(f"{target} (no such file)")
        elif fragment and linked.suffix == ".md" and fragment not in _anchors(linked):
            broken.append(f"{target} (no such heading)")
    return broken


def test_every_relative_link_resolves():
    broken = {doc.relative_to(ROOT).as_posix(): links for doc in _documents() if (links := _broken_links(doc))}
    assert not broken, f"broken links: {broken}"


def test_the_readme_is_a_front_door():
    lines = len((ROOT / "README.md").read_text().splitlines())
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines (at most {README_MAX_LINES}): move details into docs/ and link them"
    )


def test_the_readme_links_every_doc():
    readme = _prose(ROOT / "README.md")
    unlinked = [p.name for p in (ROOT / "docs").glob("*.md") if f"docs/{p.name}" not in readme]
    assert not unlinked, f"docs not linked from README.md: {unlinked}"
