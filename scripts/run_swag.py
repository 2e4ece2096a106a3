#!/usr/bin/env python
"""Fine-tune BERT for SWAG multiple choice with transformers.Trainer, as transformers'
run_swag.py.

    python scripts/run_swag.py --config recipes/bert-base/swag.yaml \
        --model_name_or_path MODEL --train_file train.csv --validation_file val.csv \
        --do_train --do_eval --output_dir outputs/swag
    python scripts/run_swag.py --model_name_or_path MODEL --synthetic_train 600 \
        --synthetic_eval 300 --do_train --do_eval --output_dir outputs/swag-synthetic
        # a generated task, where the SWAG files are absent

Writes the model, ``eval_results.json`` (``eval_accuracy`` in percent),
``dev_predictions.jsonl`` / ``test_predictions.jsonl`` and the model card; every
``transformers.TrainingArguments`` flag works.
"""

from __future__ import annotations

import json
import os

from modeling.cli import main_guard


def main(argv=None) -> dict:
    from recipes.runner import run
    from recipes.swag import SwagRecipe

    outcome = run(SwagRecipe(), argv)
    if os.environ.get("RANK", "0") == "0":
        print(json.dumps(outcome.get("best_setting", outcome), indent=2, default=str))
    return outcome


if __name__ == "__main__":
    main_guard(main)
