"""The local sandbox as a server process would use it: in this process, or in a child process running as an
ordinary (non-root) user, the way the Docker image runs. Both return real `SandboxResult`s."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import tempfile

from tools.sandbox.base import SandboxLimits, SandboxRequest, SandboxResult
from tools.sandbox.local import LocalSandbox, find_interpreter

ORDINARY_UID = 51999  # outside the sandbox's own uid range; no passwd entry needed
TOOLS_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Runs in the child: only the sandbox package, the egress guard and the standard library, like a server's sandbox
# code path (without Django, the child's egress allowances come in its config: `egress_allow`).
CHILD = """
import json, logging, sys
sys.path.insert(0, sys.argv[1])
from tools.sandbox.base import SandboxLimits, SandboxRequest
from tools.sandbox.local import LocalSandbox, log_isolation_status
doc = json.load(sys.stdin)
backend = LocalSandbox(**doc["config"])
if doc.get("log_status"):
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(levelname)s %(message)s")
    log_isolation_status(backend)
req = doc["request"]
req["limits"] = SandboxLimits(**req["limits"])
json.dump(backend.run(SandboxRequest(**req)).to_dict(), sys.stdout)
"""


class InProcess:
    """The sandbox called from this process (root in CI: bwrap then runs as a throwaway uid)."""

    label = "server as root" if os.geteuid() == 0 else "server as an ordinary user"

    def __init__(self, **config):
        self.backend = LocalSandbox(**config)

    def run(self, request: SandboxRequest) -> SandboxResult:
        return self.backend.run(request)


class AsOrdinaryUser:
    """The sandbox called from a child process whose uid is `ORDINARY_UID` (setpriv, no capabilities)."""

    label = "server as an ordinary user"

    def __init__(self, *, wrap: list[str] | None = None, **config):
        self.config, self.wrap = config, wrap or []
        self.root = tempfile.mkdtemp(prefix="sandbox-server-")
        os.chmod(self.root, 0o755)
        # A copy the ordinary user can read wherever the checkout lives (CI's may sit under a 0700 /root).
        shutil.copytree(
            os.path.join(TOOLS_DIR, "tools", "sandbox"),
            os.path.join(self.root, "tools", "sandbox"),
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        open(os.path.join(self.root, "tools", "__init__.py"), "w").close()
        # The egress guard the sandbox's proxy uses (standard library only until it reads settings).
        os.mkdir(os.path.join(self.root, "core"))
        open(os.path.join(self.root, "core", "__init__.py"), "w").close()
        for name in ("egress.py", "egress_rules.py"):
            shutil.copy(os.path.join(TOOLS_DIR, "core", name), os.path.join(self.root, "core", name))
        for dirpath, _dirnames, filenames in os.walk(self.root):
            os.chmod(dirpath, 0o755)
            for name in filenames:
                os.chmod(os.path.join(dirpath, name), 0o644)
        self.python = find_interpreter(world_accessible=True)
        work = os.path.join(self.root, "work")  # its own, like a server user's /tmp: root's dirs there are not its
        os.mkdir(work, 0o700)
        os.chown(work, ORDINARY_UID, ORDINARY_UID)
        self.config.setdefault("work_root", work)
        self.config.setdefault("egress_allow", [])  # the child has no Django settings to read them from

    def command(self) -> list[str]:
        return [
            "setpriv",
            f"--reuid={ORDINARY_UID}",
            f"--regid={ORDINARY_UID}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--",
            *self.wrap,
            self.python,
            "-I",
            "-c",
            CHILD,
            self.root,
        ]

    def run(self, request: SandboxRequest, *, log_status: bool = False) -> SandboxResult:
        self.last_stderr = ""
        doc = {"config": self.config, "request": dataclasses.asdict(request), "log_status": log_status}
        proc = subprocess.run(
            self.command(), input=json.dumps(doc), capture_output=True, text=True, timeout=120, cwd="/"
        )
        self.last_stderr = proc.stderr
        if proc.returncode != 0:
            raise RuntimeError(f"sandbox server exited {proc.returncode}: {proc.stderr[-2000:]}")
        return SandboxResult(**json.loads(proc.stdout))

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def servers() -> list[str]:
    """Which server identities this machine can exercise (an ordinary user needs us to be root to become one)."""
    return ["in-process", "ordinary-user"] if os.geteuid() == 0 else ["in-process"]


def make_server(kind: str, **config):
    return InProcess(**config) if kind == "in-process" else AsOrdinaryUser(**config)


__all__ = ["AsOrdinaryUser", "InProcess", "SandboxLimits", "make_server", "servers"]
