"""Cached virtualenvs for local tool runs that need pip packages: one per (interpreter, requirement set).

A venv is built once under a lock, marked ready, and then shared read-only by every run that needs
the same requirements (sandboxed runs execute as other users, so the tree is made world-readable and
only the server can write it).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Sequence

from tools.sandbox.base import SandboxError

ALLOW_PIP_HINT = "set SANDBOX_LOCAL_ALLOW_PIP=1"
Installer = Callable[[str, Sequence[str]], None]


def pip_installer(venv_python: str, requirements: Sequence[str], timeout_s: float = 600) -> None:
    """Install `requirements` into the venv of `venv_python` with the server's pip (network: PyPI)."""
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "--python",
        venv_python,
        "install",
        "--no-input",
        "--disable-pip-version-check",
        "--quiet",
        *requirements,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        raise SandboxError(f"pip install {' '.join(requirements)} failed:\n{proc.stderr[-4000:]}")


def requirements_key(interpreter: str, requirements: Sequence[str]) -> str:
    """Stable identity of a venv: the interpreter and the normalised, sorted requirement set."""
    normalised = sorted({r.strip().lower().replace(" ", "") for r in requirements})
    blob = json.dumps([os.path.realpath(interpreter), normalised])
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def venv_python(venv_dir: str) -> str:
    return os.path.join(venv_dir, "bin", "python")


def ensure_venv(
    *,
    interpreter: str,
    requirements: Sequence[str],
    cache_dir: str,
    allow_install: bool,
    installer: Installer | None = None,
) -> str:
    """Return the python of the cached venv for `requirements`, building it (pip) only if allowed."""
    _check_cache_dir(cache_dir)
    key = requirements_key(interpreter, requirements)
    venv_dir = os.path.join(cache_dir, key)
    ready = os.path.join(venv_dir, ".ready")
    if os.path.exists(ready):
        return venv_python(venv_dir)
    if not allow_install:
        raise SandboxError(
            f"tool requires packages {', '.join(requirements)}; local installs are disabled ({ALLOW_PIP_HINT})"
        )
    with open(os.path.join(cache_dir, f"{key}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker may be building the same set
        if os.path.exists(ready):
            return venv_python(venv_dir)
        shutil.rmtree(venv_dir, ignore_errors=True)  # a half-built leftover from a crash
        try:
            subprocess.run(
                [interpreter, "-m", "venv", "--without-pip", venv_dir], check=True, capture_output=True, timeout=120
            )
            (installer or pip_installer)(venv_python(venv_dir), list(requirements))
            _make_world_readable(venv_dir)
        except subprocess.SubprocessError as exc:
            shutil.rmtree(venv_dir, ignore_errors=True)
            raise SandboxError(f"could not create a virtualenv with {interpreter}: {exc}") from exc
        except BaseException:
            shutil.rmtree(venv_dir, ignore_errors=True)
            raise
        with open(ready, "w") as f:
            f.write("\n".join(requirements))
    return venv_python(venv_dir)


def _check_cache_dir(cache_dir: str) -> None:
    """Create the cache, or refuse one that others could write: a planted venv would run in other tools."""
    os.makedirs(cache_dir, exist_ok=True)
    st = os.lstat(cache_dir)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise SandboxError(f"venv cache {cache_dir} must be a directory owned by the server user")
    os.chmod(cache_dir, 0o755)  # sandbox users may read it; only the server may write


def _make_world_readable(root: str) -> None:
    for dirpath, _dirnames, filenames in os.walk(root):
        os.chmod(dirpath, 0o755)
        for name in filenames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode | 0o444)
