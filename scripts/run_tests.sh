#!/usr/bin/env bash
# Set up .venv (scripts/setup_env.sh) and run the whole test suite offline.
# Extra arguments go to pytest, e.g. `bash scripts/run_tests.sh -k squad`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 WANDB_MODE=offline TOKENIZERS_PARALLELISM=false
exec .venv/bin/python -m pytest -q "$@"
