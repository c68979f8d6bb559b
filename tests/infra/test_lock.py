"""The lock files (scripts/lock writes them from pyproject.toml): requirements.txt for scripts/serve and the Docker
image, requirements-dev.txt for scripts/test and CI. They must allow what pyproject.toml asks for, agree with each
other, and be what the suite runs on."""

import re
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
RUNTIME, DEV = ROOT / "requirements.txt", ROOT / "requirements-dev.txt"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)\s*(?:;\s*(.+))?$")
RELOCK = "run scripts/lock (it keeps every other pin) and commit both lock files"


def _pins(lock: Path) -> dict[str, Version]:
    """Package -> locked version, for this interpreter and platform (a universal lock may pin by marker)."""
    pins = {}
    for line in lock.read_text().splitlines():
        if (m := PIN.match(line)) and (m.group(3) is None or Marker(m.group(3)).evaluate()):
            pins[canonicalize_name(m.group(1))] = Version(m.group(2))
    return pins


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _unmet(requirements: list[str], pins: dict[str, Version]) -> list[str]:
    unmet = []
    for text in requirements:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate():
            continue
        version = pins.get(canonicalize_name(req.name))
        if version is None or not req.specifier.contains(version, prereleases=True):
            unmet.append(f"{text} (locked: {version or 'missing'})")
    return unmet


def test_the_locks_allow_what_pyproject_asks_for():
    project = _project()
    runtime, dev = project["dependencies"], project["optional-dependencies"]["dev"]
    assert _unmet(runtime, _pins(RUNTIME)) == [], f"requirements.txt is stale: {RELOCK}"
    assert _unmet(runtime + dev, _pins(DEV)) == [], f"requirements-dev.txt is stale: {RELOCK}"


def test_the_runtime_lock_is_the_dev_lock_without_the_dev_tools():
    runtime, dev = _pins(RUNTIME), _pins(DEV)
    assert {name: version for name, version in runtime.items() if dev.get(name) != version} == {}
    assert "pytest" in dev and "pytest" not in runtime and "django" in runtime


def test_the_optional_extra_is_in_no_lock():
    # local-embeddings (torch, sentence-transformers) installs on request: pip install -c requirements.txt -e ".[…]"
    for lock in (RUNTIME, DEV):
        assert "sentence-transformers" not in _pins(lock)


def test_the_suite_runs_on_the_dev_lock():
    """Every locked package is installed at its locked version (scripts/test installs the lock into .venv)."""
    wrong = {}
    for name, version in _pins(DEV).items():
        try:
            installed = Version(metadata.version(name))
        except metadata.PackageNotFoundError:
            installed = None
        if installed != version:
            wrong[name] = f"locked {version}, installed {installed}"
    assert wrong == {}, "the environment is not the lock: scripts/test installs it when the lock changes"


def test_every_install_goes_through_a_lock():
    venv = (ROOT / "scripts" / "_venv.sh").read_text()
    assert 'lock="requirements${extras:+-$extras}.txt"' in venv and 'pip install -q -r "$lock"' in venv
    assert "pip install -q --no-deps -e ." in venv
    assert "source scripts/_venv.sh dev" in (ROOT / "scripts" / "test").read_text()
    assert "source scripts/_venv.sh\n" in (ROOT / "scripts" / "serve").read_text()
    docker = (ROOT / "Dockerfile").read_text()
    assert (
        "pip install --no-cache-dir -r requirements.txt" in docker
        and "pip install --no-cache-dir --no-deps ." in docker
    )
