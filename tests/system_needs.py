"""Which system parts (agents_ide/system_parts.py) the chosen tests need, provided before any test runs: a run that
needs a part this machine lacks and cannot install without asking stops at once naming it, and a run that chose
tests which do not need it goes on. Nothing is skipped for a missing part; the summary names any test skipped for a
missing service (Redis outside CI)."""

from __future__ import annotations

import io

import pytest

from agents_ide import system_parts

# The tests that need each part, by path. A module may add itself with `pytestmark = pytest.mark.needs("…")`.
BY_PATH = {
    "chromium": ("tests/e2e/",),
    "node": ("tests/clients/",),
    "bubblewrap": (
        "tests/tools/",
        "tests/e2e/",
        "tests/clients/",
        "tests/web/test_tool_workbench.py",
        "tests/web/test_pages.py",
        "tests/web/test_api_schema.py",
        "tests/web/test_agent_templates.py",
        "tests/core/test_runner_rules.py",
        "tests/core/test_approvals.py",
        "tests/core/test_agentfile_fixtures.py",
        "tests/core/test_sdk_compat.py",
        "tests/telemetry/test_traces.py",
    ),
}
MISSING_SERVICE = "missing service: "  # the start of a skip reason the summary collects (tests/helpers.require_redis)


def needs_of(nodeid: str, markers) -> set[str]:
    """The parts the test `nodeid` with `markers` (its `needs` markers' arguments) needs."""
    found = {part for part, paths in BY_PATH.items() if nodeid.startswith(paths)}
    return found | {arg for mark in markers for arg in mark.args}


def needs_of_args(args: list[str]) -> set[str]:
    """What a run chosen by pytest's `args` may need, before collection (an xdist controller never collects): every
    part for the whole suite or a -k/-m choice, the parts of the chosen paths otherwise."""
    paths = [a.split("::")[0].rstrip("/") for a in args if not a.startswith("-") and a.startswith("tests")]
    if not system_parts.narrows(args) or not paths or any(a.startswith(("-k", "-m")) for a in args):
        return set(system_parts.PARTS)
    found = set()
    for part, owned in BY_PATH.items():
        for path in paths:
            if any(o.startswith(path + "/") or o == path or path.startswith(o.rstrip("/")) for o in owned):
                found.add(part)
    return found


def provided_or_exit(names: set[str], config) -> None:
    """Provide `names` (installing when that asks nothing); stop the session at once naming what is still missing."""
    out = io.StringIO()
    missing = system_parts.provide(sorted(names), out=out)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if out.getvalue() and reporter is not None:
        for line in out.getvalue().rstrip().splitlines():
            reporter.write_line(line)
    if missing:
        names_left = ", ".join(part.name for part in missing)
        pytest.exit(
            f"the chosen tests need {names_left}, which is missing here: {out.getvalue().strip()}", returncode=4
        )
    if "node" in names:
        from tests.clients import node_deps

        try:
            node_deps.ensure_installed()
        except node_deps.NodeDepsError as exc:
            pytest.exit(f"the chosen tests need Letta's Node clients: {exc}", returncode=4)


def skipped_for_missing_service(terminalreporter) -> list[str]:
    """The summary's lines for tests skipped because a service was missing, one per reason with its count."""
    reasons: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        if reason.startswith(MISSING_SERVICE):
            reasons[reason] = reasons.get(reason, 0) + 1
    return [f"{count} skipped: {reason}" for reason, count in sorted(reasons.items())]
