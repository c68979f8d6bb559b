"""grep_files finds each line a case-insensitive regex matches on that line, exactly as a line-by-line search does,
whatever route it takes (one pass over the joined text, lowercased when the pattern allows); a processed file's
lines are numbered once and kept."""

import re

import pytest

from memory.files import selectors, services
from memory.files.ingest import file_ingest
from memory.files.tools import _lowered, _matching_lines, grep_files
from memory.models import FolderFile
from tests.factories import make_agent

pytestmark = pytest.mark.django_db

TEXT = "\n".join(
    [
        "Chapter One: the FERRY leaves at dawn",
        "  w12 and W12 and w123 are different words",
        "",
        "Ångström units; the Kelvin sign \u212a; straße",
        "A_b underscore; tabs\tand [brackets] (parens) x41",
        "line ending with w12",
        "w12 at the start",
        "café CAFÉ Café",
    ]
)
PATTERNS = [
    "ferry",
    "FERRY",
    r"\bw12\b",
    r"^w12",
    r"w12$",
    r"^\s*w12",
    "k",
    "ÅNGSTRÖM",
    "café",
    r"[A-Z]_b",
    r"\x41_",
    r"(?P<word>w12)\s+and",
    r"\[brackets\]",
    r"\Achapter",
    r"dawn\s+w12",
    "STRASSE|straße",
    r"w1\d",
]


@pytest.fixture
def file(account):
    folder = services.folder_create(owner=account.org, name="notes")
    uploaded, _ = services.file_upload(
        folder=folder, file_name="mixed.txt", content_type="text/plain", data=TEXT.encode()
    )
    assert file_ingest(file_id=uploaded.id) == "completed"
    return FolderFile.objects.get(pk=uploaded.pk)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_every_route_finds_the_lines_a_line_by_line_search_finds(file, pattern):
    regex = re.compile(pattern, re.IGNORECASE | re.MULTILINE)
    numbered = selectors.file_numbered(file)
    expected = [i for i, line in enumerate(numbered.lines) if regex.search(line.text)]
    assert list(_matching_lines(regex, numbered, _lowered(pattern))) == expected
    assert list(_matching_lines(regex, numbered, None)) == expected


def test_the_lowered_route_is_taken_only_when_it_is_safe():
    assert _lowered(r"\bW12\b").pattern == r"\bw12\b"
    assert _lowered("Chapter [A-Z]").pattern == "chapter [a-z]"
    for unsafe in (r"\x41", r"(a)\1", r"\N{LATIN SMALL LETTER A}", "café", "(?P<Word>a)"):
        assert _lowered(unsafe) is None


def test_lines_of_a_processed_file_are_numbered_once(file, account, django_assert_num_queries):
    agent = make_agent(account.org, name="reader", include_base_tools=False)
    services.folder_attach(agent=agent, folder=file.folder)
    assert "=== notes/mixed.txt:2 ===" in grep_files(agent=agent, pattern=r"\bw12\b")
    first = selectors.file_numbered(FolderFile.objects.get(pk=file.pk))
    cached = FolderFile.objects.defer("content").get(pk=file.pk)
    with django_assert_num_queries(0):  # its text, deferred, is not read again: the lines come from the cache
        assert selectors.file_numbered(cached) is first
