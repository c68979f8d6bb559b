# Sourced by scripts/serve and scripts/test: a virtualenv in .venv with the project installed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
extras=${1:-}
stamp=".venv/.installed${extras:+-$extras}"
if [ ! -x .venv/bin/python ]; then
  echo "Creating virtualenv in .venv ..."
  "$PY" -m venv .venv
fi
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "Installing dependencies ..."
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -e ".${extras:+[$extras]}"
  touch "$stamp"
fi
export LITELLM_LOCAL_MODEL_COST_MAP=True HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
if [ -f .env ]; then set -a; . ./.env; set +a; fi
