#!/usr/bin/env bash
# Create (or reuse) .venv and install the project into it.
#
# torch is installed first and pinned to the CPU build 2.13.0, so that the package's own
# torch range does not pull a multi-GB CUDA build on CPU machines. A torch that is already in
# the venv is kept (GPU users: install your CUDA build of torch into .venv first).
# Where pip's index serves CUDA builds by default, set TORCH_INDEX_URL, e.g.
#   TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu bash scripts/setup_env.sh
# EXTRAS selects the optional dependencies (default: test,deepspeed).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
EXTRAS=${EXTRAS-test,deepspeed}  # EXTRAS= (empty) installs no extras
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip install --quiet --disable-pip-version-check)
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  "${PIP[@]}" "torch==2.13.0" ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
fi
"${PIP[@]}" -e ".${EXTRAS:+[$EXTRAS]}"
.venv/bin/python -c "import torch, transformers; print(f'torch {torch.__version__}, transformers {transformers.__version__}')"
