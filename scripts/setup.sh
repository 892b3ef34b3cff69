#!/usr/bin/env bash
# Create .venv and install ragnb into it. Idempotent: re-installs only when pyproject/lock change.
#   bash scripts/setup.sh        # runtime
#   bash scripts/setup.sh dev    # runtime + test tools
set -euo pipefail
cd "$(dirname "$0")/.."
extra=""
[ "${1:-}" = "dev" ] && extra="[dev]"
python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
stamp=".venv/.ragnb-installed${extra}"
want=$(cat pyproject.toml requirements.lock | sha1sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  # The CPU build of torch first: otherwise sentence-transformers pulls a multi-GB CUDA build.
  .venv/bin/python -m pip install -q torch==2.13.0
  .venv/bin/python -m pip install -q -c requirements.lock -e ".${extra}"
  echo "$want" > "$stamp"
fi
# Opening or running a report notebook in JupyterLab adds metadata and outputs the project does not keep: git reads
# ragnb/notebooks/*.ipynb through this filter (.gitattributes), so only real edits show as changes.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git config filter.ragnb-notebook.clean "python3 scripts/clean_notebook.py"
fi
