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
