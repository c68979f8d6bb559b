"""The system parts the README's two commands need and how they get them: bubblewrap (the local tool sandbox) for
`scripts/serve` and `scripts/test`, Chromium (the browser tests) and Node with npm (Letta's clients in tests/clients)
for `scripts/test`. A missing part is installed when that asks nothing — as root, or with sudo that needs no password,
where apt-get or dnf exists, unless AIDE_INSTALL_SYSTEM_DEPS=0 — and otherwise the caller stops with the one command
to type. Standard library only: the scripts run it with the system's Python before the virtualenv exists.

    python3 -m agents_ide.system_parts serve       # what scripts/serve needs
    python3 -m agents_ide.system_parts test ARGS   # what scripts/test needs for a whole run (ARGS: pytest's)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field

# Where the server looks for bwrap (tools/sandbox/bwrap.py): a system path, never the caller's PATH.
BWRAP_SEARCH_PATH = "/usr/bin:/bin:/usr/local/bin:/usr/sbin"
CHROMIUM = "/usr/bin/chromium"  # Debian's; the browser tests drive this file, never a downloaded browser
MANAGERS = ("apt-get", "dnf")


@dataclass(frozen=True)
class Part:
    """One system part: how to tell it is there, what it is for, and its packages per package manager."""

    name: str
    purpose: str
    packages: dict[str, tuple[str, ...]]

    def present(self) -> bool:
        """Whether this machine has it."""
        if self.name == "bubblewrap":
            return shutil.which("bwrap", path=BWRAP_SEARCH_PATH) is not None
        if self.name == "chromium":
            return os.access(CHROMIUM, os.X_OK)
        return shutil.which("node") is not None and shutil.which("npm") is not None


PARTS = {
    "bubblewrap": Part("bubblewrap", "the local tool sandbox", {"apt-get": ("bubblewrap",), "dnf": ("bubblewrap",)}),
    "chromium": Part("chromium", "the browser tests", {"apt-get": ("chromium",), "dnf": ("chromium",)}),
    "node": Part("node", "Letta's Node clients in tests/clients", {"apt-get": ("nodejs", "npm"), "dnf": ("nodejs",)}),
}


@dataclass(frozen=True)
class Machine:
    """What the install decision depends on, read once (`Machine.here()`) so the decision itself is pure."""

    uid: int
    sudo_without_password: bool
    managers: tuple[str, ...]  # the package managers found, in MANAGERS' order
    install_allowed: bool = True  # AIDE_INSTALL_SYSTEM_DEPS=0 turns installing off
    in_ci: bool = False

    @classmethod
    def here(cls) -> Machine:
        """This machine: its user, whether `sudo -n true` succeeds (asked only when not root), its package managers."""
        uid = os.getuid()
        sudo = uid != 0 and shutil.which("sudo") is not None and _succeeds(["sudo", "-n", "true"])
        return cls(
            uid=uid,
            sudo_without_password=sudo,
            managers=tuple(m for m in MANAGERS if shutil.which(m)),
            install_allowed=os.environ.get("AIDE_INSTALL_SYSTEM_DEPS", "").strip().lower()
            not in ("0", "false", "no", "off"),
            in_ci=os.environ.get("CI", "").strip().lower() in ("1", "true", "yes"),
        )


@dataclass(frozen=True)
class Decision:
    """Either the commands that install the missing parts (`install`), or why not and the one command to type."""

    missing: tuple[Part, ...]
    manager: str = ""
    install: tuple[tuple[str, ...], ...] = ()
    refresh: tuple[str, ...] = ()  # run before installing again when the first try fails (stale package lists)
    command: str = ""  # what the person types
    reason: str = ""  # why it was not installed here
    env: dict[str, str] = field(default_factory=dict)


def decide(missing: list[Part], machine: Machine) -> Decision:
    """How to provide `missing` on `machine`: install when that asks nothing, otherwise the command to type. Pure."""
    parts = tuple(missing)
    if not parts:
        return Decision(missing=())
    manager = machine.managers[0] if machine.managers else ""
    packages = [p for part in parts for p in part.packages.get(manager or "apt-get", ())]
    root = machine.uid == 0
    typed = " ".join((["sudo"] if not root else []) + [manager or "apt-get", "install", "-y", *packages])
    if not manager:
        names = ", ".join(part.name for part in parts)
        return Decision(missing=parts, command=typed, reason=f"no apt-get or dnf here: install {names} yourself")
    if not machine.install_allowed:
        return Decision(missing=parts, command=typed, reason="AIDE_INSTALL_SYSTEM_DEPS=0 turns installing off")
    if not root and not machine.sudo_without_password:
        return Decision(missing=parts, command=typed, reason="installing needs root, and sudo asks for a password")
    prefix = () if root else ("sudo", "-n")
    env = {"DEBIAN_FRONTEND": "noninteractive"} if manager == "apt-get" else {}
    if not root:
        prefix = (*prefix, "env", *(f"{k}={v}" for k, v in env.items()))
    install = (*prefix, manager, "install", "-y", "-q", *packages)
    refresh = (*prefix, "apt-get", "update", "-q") if manager == "apt-get" else ()
    if machine.in_ci and refresh:  # a fresh CI machine's package lists may be empty or stale: refresh them first
        return Decision(missing=parts, manager=manager, install=(refresh, install), command=typed, env=env)
    return Decision(missing=parts, manager=manager, install=(install,), refresh=refresh, command=typed, env=env)


def provide(names: list[str], *, machine: Machine | None = None, out=None) -> list[Part]:
    """Install the parts in `names` that are missing when that asks nothing (runs the package manager); return the
    parts still missing afterwards, having printed the command to type for them."""
    out = out or sys.stderr
    missing = [PARTS[name] for name in names if not PARTS[name].present()]
    if not missing:
        return []
    decision = decide(missing, machine or Machine.here())
    if decision.install:
        what = ", ".join(f"{part.name} ({part.purpose})" for part in decision.missing)
        print(f"Installing {what} with {decision.manager} ...", file=out)
        env = {**os.environ, **decision.env}
        for command in decision.install:
            if not _succeeds(command, env=env) and not (decision.refresh and _refreshed_then(command, decision, env)):
                break
    still = [part for part in missing if not part.present()]
    if still:
        names_left = ", ".join(f"{part.name} ({part.purpose})" for part in still)
        why = f" ({decision.reason})" if decision.reason else ""
        print(f"Missing: {names_left}{why}. Install it with:\n\n    {decision.command}\n", file=out)
    return still


def _refreshed_then(command, decision: Decision, env) -> bool:
    return _succeeds(decision.refresh, env=env) and _succeeds(command, env=env, quiet=False)


def _succeeds(command, *, env=None, quiet: bool = True) -> bool:
    try:
        done = subprocess.run(
            list(command), env=env, stdin=subprocess.DEVNULL, capture_output=quiet, timeout=1800, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def needed_for_serve(env: dict[str, str]) -> list[str]:
    """The parts `scripts/serve` needs: bubblewrap, unless tools run elsewhere (E2B) or without namespaces."""
    weak = env.get("SANDBOX_LOCAL_WEAK_ISOLATION", "").strip().lower() in ("1", "true", "yes", "on")
    local = env.get("SANDBOX_DEFAULT", "local").strip().lower() == "local"
    return ["bubblewrap"] if local and not weak else []


def narrows(args: list[str]) -> bool:
    """Whether pytest's `args` choose part of the suite (a path, a node id, -k, -m): the test session then works out
    what its chosen tests need itself (tests/system_needs.py)."""
    for arg in args:
        if arg in ("-k", "-m") or arg.startswith(("-k", "-m")) and not arg.startswith("--"):
            return True
        if not arg.startswith("-") and (arg.startswith("tests") or arg.endswith(".py") or "::" in arg):
            return True
    return False


def main(argv: list[str]) -> int:
    """`serve`: provide what the server needs; `test [pytest args]`: provide everything a whole test run needs."""
    if not argv or argv[0] not in ("serve", "test"):
        print("usage: python3 -m agents_ide.system_parts serve | test [pytest args]", file=sys.stderr)
        return 2
    whole_run = argv[0] == "test" and not narrows(argv[1:])
    names = needed_for_serve(dict(os.environ)) if argv[0] == "serve" else list(PARTS) if whole_run else []
    return 1 if provide(names) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
