# Sourced by scripts/serve and scripts/test: a virtualenv in .venv with the locked dependencies and the project.
# `source _venv.sh` installs requirements.txt (the runtime lock), `source _venv.sh dev` requirements-dev.txt; the
# project itself goes in editable without dependencies, so nothing unlocked is installed. It installs again when the
# lock or pyproject.toml changes (scripts/lock writes the locks).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
extras=${1:-}
lock="requirements${extras:+-$extras}.txt"
stamp=".venv/.installed${extras:+-$extras}"
if [ ! -x .venv/bin/python ]; then
  echo "Creating virtualenv in .venv ..."
  if ! "$PY" -m venv .venv; then
    rm -rf .venv
    echo "Could not create a virtualenv with $PY: on Debian/Ubuntu install its venv module: sudo apt-get install python3-venv" >&2
    exit 1
  fi
  .venv/bin/python -m pip install -q --upgrade pip
fi
installed=$(cat "$lock" pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$installed" ]; then
  # One install at a time: a server and test runs may share .venv.
  if command -v flock >/dev/null; then exec {install_lock}>.venv/.install.lock && flock "$install_lock"; fi
  if [ "$(cat "$stamp" 2>/dev/null)" != "$installed" ]; then
    echo "Installing dependencies from $lock ..."
    .venv/bin/python -m pip install -q -r "$lock"
    .venv/bin/python -m pip install -q --no-deps -e .
    echo "$installed" >"$stamp"
  fi
  if [ -n "${install_lock:-}" ]; then exec {install_lock}>&-; fi
fi
export LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
if [ -f .env ]; then set -a; . ./.env; set +a; fi
