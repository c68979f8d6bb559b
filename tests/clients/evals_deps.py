"""Letta Evals (the `letta-evals` package) for the client tests, in its own virtualenv, tests/clients/.evals-venv,
installed from the committed pins in evals-requirements.txt, once, and only when what is installed is not already
exactly that. It has a virtualenv of its own because its pins (anyio==4.10.0 among them) would move the project's
runtime lock, and it is a client we drive from outside, as Letta Code is."""

import fcntl
import hashlib
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "evals-requirements.txt"
VENV = HERE / ".evals-venv"
STAMP = VENV / ".agents-ide-requirements-sha256"
INSTALL_LOCK = HERE / ".evals-install.lock"
LETTA_EVALS = VENV / "bin" / "letta-evals"


class EvalsDepsError(RuntimeError):
    """The virtualenv or the install failed; the message says which."""


def _sha() -> str:
    return hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()


def ensure_installed(timeout: float = 900) -> Path:
    """Install the pinned letta-evals into tests/clients/.evals-venv unless it is there already; its CLI's path."""
    with open(INSTALL_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if STAMP.exists() and STAMP.read_text().strip() == _sha() and LETTA_EVALS.exists():
            return LETTA_EVALS
        steps = [
            [sys.executable, "-m", "venv", "--clear", str(VENV)],
            # every package is pinned in the file, so nothing unpinned comes in
            [str(VENV / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "-r", str(REQUIREMENTS)],
        ]
        for step in steps:
            try:
                done = subprocess.run(step, capture_output=True, text=True, timeout=timeout)
            except subprocess.TimeoutExpired as exc:
                raise EvalsDepsError(f"`{' '.join(step)}` took over {timeout:g} s") from exc
            if done.returncode != 0:
                raise EvalsDepsError(f"`{' '.join(step)}` failed ({done.returncode}):\n{done.stderr[-3000:]}")
        STAMP.write_text(_sha() + "\n")
        return LETTA_EVALS


if __name__ == "__main__":
    print(f"letta-evals installed: {ensure_installed()}")
