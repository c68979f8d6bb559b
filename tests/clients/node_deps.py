"""Letta's own Node clients for the client tests, installed with `npm ci` from the committed lockfile into
tests/clients/node_modules, once, and only when what is installed is not already exactly what is locked."""

import fcntl
import hashlib
import json
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOCKFILE = HERE / "package-lock.json"
NODE_MODULES = HERE / "node_modules"
STAMP = NODE_MODULES / ".agents-ide-lock-sha256"  # the lockfile's hash, written after a successful `npm ci`
INSTALL_LOCK = HERE / ".install.lock"  # two test sessions on this machine must not run `npm ci` over each other
LETTA = NODE_MODULES / ".bin" / "letta"

# Install scripts stay off: the clients run from their published JavaScript. Letta Code's own script patches Ink
# for its interactive UI and node-pty's builds a terminal for its Bash tool, neither of which headless runs use.
NPM_CI = ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]


class NodeDepsError(RuntimeError):
    """Node, npm or the install is missing or failed; the message says which and how to fix it."""


def _lock_sha() -> str:
    return hashlib.sha256(LOCKFILE.read_bytes()).hexdigest()


def installed_as_locked() -> bool:
    """Whether node_modules came from this lockfile and every locked package is there at its locked version
    (optional packages for other platforms may be absent)."""
    if not STAMP.exists() or STAMP.read_text().strip() != _lock_sha():
        return False
    for where, locked in json.loads(LOCKFILE.read_text())["packages"].items():
        if not where:
            continue
        manifest = HERE / where / "package.json"
        if not manifest.exists():
            if locked.get("optional"):
                continue
            return False
        if json.loads(manifest.read_text()).get("version") != locked.get("version"):
            return False
    return True


def ensure_installed(timeout: float = 600) -> None:
    """Run `npm ci` in tests/clients unless the locked versions are already installed. Raises NodeDepsError."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            raise NodeDepsError(f"`{tool}` is not on PATH; install Node.js 20+ and npm to run tests/clients")
    with open(INSTALL_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if installed_as_locked():
            return
        try:
            done = subprocess.run(NPM_CI, cwd=HERE, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise NodeDepsError(f"`{' '.join(NPM_CI)}` in {HERE} took over {timeout:g} s") from exc
        if done.returncode != 0:
            raise NodeDepsError(
                f"`{' '.join(NPM_CI)}` in {HERE} failed ({done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
            )
        STAMP.write_text(_lock_sha() + "\n")
        if not installed_as_locked():
            raise NodeDepsError(f"`npm ci` succeeded but {NODE_MODULES} does not match {LOCKFILE.name}")


if __name__ == "__main__":  # .ci/run: `python -m tests.clients.node_deps` installs them before the tests
    ensure_installed()
    print(f"Node clients installed as locked in {NODE_MODULES}")
