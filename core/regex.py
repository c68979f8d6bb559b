"""Regular expressions that users, models and agent files supply, matched by RE2 in time linear in the text.

Python's `re` backtracks: `(a+)+$` over 28 a's and a "!" takes 20 s and holds the GIL, so every other request of the
process waits. RE2 (`google-re2`) never backtracks and releases the GIL while it scans. What it cannot do in linear
time it refuses to compile (backreferences, lookaround, atomic groups, possessive quantifiers): a PatternError says
which, in words a user or a model can act on. A pattern's length and RE2's memory for it are bounded. Python's own
`re` is for the project's fixed patterns only (tests/infra/test_untrusted_regex.py checks).

Differences from `re` that a pattern may meet: `\\d`, `\\w`, `\\s` and `\\b` are ASCII; `$` without multiline
matches only at the very end; `\\Z` is read as `\\z` (its meaning in Python).
"""

import re2

MAX_PATTERN = 1000  # characters, as Letta's grep_files bounds a pattern (MAX_REGEX_COMPLEXITY)
MAX_MEM = 8 << 20  # bytes RE2 may spend on one pattern's program and match cache; compiling past it fails

# RE2's words for what it refuses, and ours: the feature and why it is not there.
_UNSUPPORTED = (
    ("invalid perl operator: (?=", "lookahead (?=…) is not supported"),
    ("invalid perl operator: (?!", "negative lookahead (?!…) is not supported"),
    ("invalid perl operator: (?<=", "lookbehind (?<=…) is not supported"),
    ("invalid perl operator: (?<!", "negative lookbehind (?<!…) is not supported"),
    ("invalid perl operator: (?>", "atomic groups (?>…) are not supported"),
    ("invalid perl operator: (?#", "comments (?#…) are not supported"),
    ("invalid perl operator: (?P", "named backreferences (?P=…) are not supported"),
    ("pattern too large", f"the pattern needs more than the {MAX_MEM >> 20} MiB of matching memory allowed"),
)
_WHY = "patterns are matched by RE2, in time linear in the text"


class PatternError(ValueError):
    """A pattern refused: too long, not valid, or a feature RE2 cannot match in linear time; str() says which."""


def pattern_compile(
    pattern: str, *, ignore_case: bool = False, multiline: bool = False, dot_all: bool = False, utf8: bool = False
):
    """The pattern compiled by RE2 (search/match/finditer as `re`'s); with `utf8` it matches UTF-8 bytes and its
    offsets are byte offsets (a long text encoded once, instead of again at each call). Raises PatternError."""
    if len(pattern) > MAX_PATTERN:
        raise PatternError(f"the pattern is {len(pattern)} characters; at most {MAX_PATTERN} are accepted")
    flags = "".join(f for f, on in (("m", multiline), ("s", dot_all)) if on)
    source = (f"(?{flags})" if flags else "") + _python_anchors(pattern)
    options = re2.Options()
    options.max_mem = MAX_MEM
    options.case_sensitive = not ignore_case
    options.log_errors = False  # a refused pattern is the caller's answer, not a line on the server's console
    try:
        compiled = re2.compile(source.encode("utf-8", "replace") if utf8 else source, options)
    except re2.error as exc:
        raise PatternError(_reason(pattern, exc)) from None
    # re2's module cache keeps the last 128 patterns compiled, each up to MAX_MEM: a caller keeps what it uses.
    re2.purge()
    return compiled


def pattern_search(pattern: str, text: str, *, dot_all: bool = False) -> bool:
    """Whether the pattern matches anywhere in the text. Raises PatternError."""
    return pattern_compile(pattern, dot_all=dot_all).search(text) is not None


def _python_anchors(pattern: str) -> str:
    r"""`\Z` (the end of the text in Python) written as RE2 spells it, `\z`; escaped backslashes left alone."""
    if "\\Z" not in pattern:
        return pattern
    out, i = [], 0
    while i < len(pattern):
        two = pattern[i : i + 2]
        out.append("\\z" if two == "\\Z" else two if two.startswith("\\") else pattern[i])
        i += 2 if two.startswith("\\") else 1
    return "".join(out)


def _reason(pattern: str, exc: re2.error) -> str:
    said = exc.args[0] if exc.args else ""
    said = said.decode("utf-8", "replace") if isinstance(said, bytes) else str(said)
    if said.startswith("invalid escape sequence: \\") and said[-1:].isdigit():
        return f"backreferences ({said.rsplit(' ', 1)[-1]}) are not supported ({_WHY})"
    if said.startswith("bad repetition operator: ") and said.endswith("+"):
        return f"possessive quantifiers ({said.rsplit(' ', 1)[-1]}) are not supported ({_WHY})"
    if said.startswith("invalid repetition size"):
        return f"{said}: a repetition counts at most 1000, nested repetitions too"
    for start, why in _UNSUPPORTED:
        if said.startswith(start):
            return f"{why} ({_WHY})"
    return said or "not a valid pattern"
