"""Every vendored asset is recorded in static/vendor/README.md with its source and sha256, and matches it."""

import hashlib
import re
from pathlib import Path

VENDOR = Path(__file__).resolve().parents[2] / "static" / "vendor"
ROW = re.compile(
    r"^\| `(?P<file>[^`]+)` \| `(?P<package>[^`@]+@[\d.]+)` \| `[^`]+` \| (?P<licence>[^|]+) \| `(?P<sha>[0-9a-f]{64})` \|$"
)


def _recorded() -> dict[str, dict]:
    rows = {}
    for line in (VENDOR / "README.md").read_text().splitlines():
        if match := ROW.match(line):
            rows[match["file"]] = match.groupdict()
    return rows


def test_every_vendored_file_is_recorded_with_its_hash():
    recorded = _recorded()
    on_disk = {p.relative_to(VENDOR).as_posix() for p in VENDOR.rglob("*") if p.is_file() and p.name != "README.md"}
    assert on_disk, "no vendored files found"
    assert on_disk == set(recorded), (
        f"unrecorded: {sorted(on_disk - set(recorded))}; missing: {sorted(set(recorded) - on_disk)}"
    )
    for name, row in recorded.items():
        assert hashlib.sha256((VENDOR / name).read_bytes()).hexdigest() == row["sha"], (
            f"{name} differs from {row['package']}"
        )
        assert row["licence"].strip(), name


TOKENIZER_DATA = Path(__file__).resolve().parents[2] / "core" / "engine" / "tokenizer_data"
TOKENIZER_ROW = re.compile(
    r"^\| `(?P<file>[^`]+)` \| (?P<source>[^|]+) \| (?P<licence>[^|]+) \| `(?P<sha>[0-9a-f]{64})` \|$"
)


def test_every_tokenizer_file_is_recorded_with_its_source_licence_and_hash():
    import gzip

    recorded = {}
    for line in (TOKENIZER_DATA / "README.md").read_text().splitlines():
        if match := TOKENIZER_ROW.match(line):
            recorded[match["file"]] = match.groupdict()
    on_disk = {p.name for p in TOKENIZER_DATA.iterdir() if p.is_file() and p.name != "README.md"}
    assert on_disk, "no tokenizer files found"
    assert on_disk == set(recorded), (
        f"unrecorded: {sorted(on_disk - set(recorded))}; missing: {sorted(set(recorded) - on_disk)}"
    )
    for name, row in recorded.items():
        data = (TOKENIZER_DATA / name).read_bytes()
        content = gzip.decompress(data) if name.endswith(".gz") else data
        assert hashlib.sha256(content).hexdigest() == row["sha"], f"{name} differs from {row['source'].strip()}"
        assert row["licence"].strip() and row["source"].strip(), name
        if row["licence"].strip().startswith("MIT (`"):
            assert (TOKENIZER_DATA / row["licence"].split("`")[1]).is_file(), f"{name}: its licence file is missing"
