"""Helpers for the agent-file tests: where Letta's real files live, and reading them back for comparison."""

import json
import os
from pathlib import Path

import pytest


def _shared_dir() -> Path:
    """The workplace's shared folder: $AGENTS_IDE_SHARED_DIR, else ../shared beside the repository, else the
    workplace's own /work/shared (a CI clone may live elsewhere on the same machine)."""
    if env := os.environ.get("AGENTS_IDE_SHARED_DIR"):
        return Path(env)
    beside = Path(__file__).resolve().parents[2].parent / "shared"
    return beside if beside.is_dir() else Path("/work/shared")


# The workplace keeps real Letta files beside the repository, never inside it.
FIXTURES_DIR = _shared_dir() / "fixtures" / "agent-files"
V2_FILES = ("test_basic_agent_with_blocks_tools_messages_v2.af", "test_agent.af")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def fixture_path(name: str) -> Path:
    """The fixture's path; skips when ../shared is absent (a clone elsewhere), fails under CI=true."""
    path = FIXTURES_DIR / name
    if not path.exists():
        message = (
            f"Letta agent-file fixture {path} is missing (../shared/fixtures/agent-files is outside the repository)"
        )
        if IN_CI:
            pytest.fail(message)
        pytest.skip(f"missing service: {message}")
    return path


def fixture_names() -> list[str]:
    """Every .af fixture name; the known ones when the directory is absent (each test then skips or fails)."""
    if FIXTURES_DIR.is_dir():
        return sorted(p.name for p in FIXTURES_DIR.glob("*.af"))
    return sorted(
        {
            *V2_FILES,
            "customer_service.af",
            "deep_research_agent.af",
            "memgpt_agent_with_convo.af",
            "outreach_workflow_agent.af",
        }
    )


def load(name: str) -> dict:
    return json.loads(fixture_path(name).read_text(encoding="utf-8"))


def multipart(content: bytes, name: str = "agent.af", **fields) -> dict:
    from django.core.files.uploadedfile import SimpleUploadedFile

    return {"file": SimpleUploadedFile(name, content, content_type="application/json"), **fields}
