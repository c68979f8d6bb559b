"""grep_files finds each line a case-insensitive regex matches on that line, exactly as a line-by-line search does,
whatever route it takes (one pass over the joined text, or line by line for the text's anchors); it matches by RE2,
so a catastrophic pattern answers at once and a pattern RE2 refuses is a tool error saying why, for the model too;
a processed file's lines are numbered once and kept."""

import json
import re

import pytest

from core.errors import Invalid
from core.regex import pattern_compile
from core.runs.runner import run_agent
from memory.files import selectors, services
from memory.files.ingest import file_ingest
from memory.files.tools import _matching_lines, grep_files
from memory.models import FolderFile
from tests.factories import make_agent
from tests.fake_llm import FakeLLM

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


def _ingested(account, name: str, text: str, folder_name: str = "notes") -> FolderFile:
    folder = services.folder_create(owner=account.org, name=folder_name)
    uploaded, _ = services.file_upload(folder=folder, file_name=name, content_type="text/plain", data=text.encode())
    assert file_ingest(file_id=uploaded.id) == "completed"
    return FolderFile.objects.get(pk=uploaded.pk)


@pytest.fixture
def file(account):
    return _ingested(account, "mixed.txt", TEXT)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_every_route_finds_the_lines_a_line_by_line_search_finds(file, pattern):
    python = re.compile(pattern, re.IGNORECASE | re.MULTILINE)  # these patterns mean the same in Python's re
    numbered = selectors.file_numbered(file)
    expected = [i for i, line in enumerate(numbered.lines) if python.search(line.text)]
    regex = pattern_compile(pattern, ignore_case=True, multiline=True, utf8=True)
    assert list(_matching_lines(regex, numbered)) == expected


def test_a_catastrophic_pattern_answers_with_the_right_lines(account):
    # Python's re needs about 2**n steps for (a+)+$ over n a's and a "!": 20 s at 28, never at 100,000
    text = "\n".join(["aaa", "a" * 100_000 + "!", "b aaaa", "a" * 28 + "!"])
    agent = make_agent(account.org, name="reader", include_base_tools=False)
    services.folder_attach(agent=agent, folder=_ingested(account, "bomb.txt", text).folder)
    out = grep_files(agent=agent, pattern="(a+)+$", context_lines=0)
    assert out.startswith("Found 2 total matches across 1 files")
    assert "=== notes/bomb.txt:1 ===\n> 1: aaa" in out and "=== notes/bomb.txt:3 ===\n> 3: b aaaa" in out
    assert "bomb.txt:2 ===" not in out and "bomb.txt:4 ===" not in out
    bang = grep_files(agent=agent, pattern="^(a|aa)+!", context_lines=0)
    assert bang.startswith("Found 2 total matches") and "bomb.txt:2 ===" in bang and "bomb.txt:4 ===" in bang


def test_a_pattern_re2_refuses_is_an_error_naming_why(account):
    agent = make_agent(account.org, name="reader", include_base_tools=False)
    services.folder_attach(agent=agent, folder=_ingested(account, "words.txt", "hello hello\nworld").folder)
    with pytest.raises(Invalid) as caught:
        grep_files(agent=agent, pattern=r"(\w+) \1")
    assert caught.value.message == (
        r"Invalid regex pattern '(\w+) \1': backreferences (\1) are not supported "
        "(patterns are matched by RE2, in time linear in the text)"
    )
    with pytest.raises(Invalid, match=r"Invalid regex pattern 'hello\(\?=': lookahead"):
        grep_files(agent=agent, pattern="hello(?=")
    with pytest.raises(Invalid, match="lookahead"):
        grep_files(agent=agent, pattern="hello(?= world)")
    with pytest.raises(Invalid, match="Pattern must be 1-1000 characters"):
        grep_files(agent=agent, pattern="a" * 1001)
    with pytest.raises(Invalid, match=r"Invalid include pattern: negative lookbehind"):
        grep_files(agent=agent, pattern="hello", include="(?<!x)txt")


def test_the_model_sees_a_refused_pattern_as_its_tool_error(api, account, fake_llm):
    agent = make_agent(account.org, name="reader", agent_type="letta_v1_agent")
    folder = _ingested(account, "words.txt", "a" * 5000 + "!\nabab").folder
    assert api.patch(f"/v1/agents/{agent.id}/folders/attach/{folder.id}").status_code == 200  # gives the file tools
    fake_llm.script(
        FakeLLM.tool("grep_files", {"pattern": "(ab)\\1"}),
        FakeLLM.tool("grep_files", {"pattern": "(a+)+$"}),
        FakeLLM.text("Done."),
    )
    result = run_agent(agent_id=agent.id, owner=account.org, input_messages=[{"role": "user", "content": "Grep"}])
    assert result.status == "completed", result.error
    answers = [
        json.loads([m["content"] for m in fake_llm.chat_requests[i]["messages"] if m["role"] == "tool"][-1])
        for i in (1, 2)
    ]
    assert answers[0]["status"] == "Failed"
    assert answers[0]["message"].startswith("Invalid regex pattern '(ab)\\1': backreferences (\\1) are not supported")
    assert answers[1]["status"] == "OK" and answers[1]["message"].startswith("No matches found for pattern")


def test_lines_of_a_processed_file_are_numbered_once(file, account, django_assert_num_queries):
    agent = make_agent(account.org, name="reader", include_base_tools=False)
    services.folder_attach(agent=agent, folder=file.folder)
    assert "=== notes/mixed.txt:2 ===" in grep_files(agent=agent, pattern=r"\bw12\b")
    first = selectors.file_numbered(FolderFile.objects.get(pk=file.pk))
    cached = FolderFile.objects.defer("content").get(pk=file.pk)
    with django_assert_num_queries(0):  # its text, deferred, is not read again: the lines come from the cache
        assert selectors.file_numbered(cached) is first
