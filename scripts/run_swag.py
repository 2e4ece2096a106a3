#!/usr/bin/env python
"""Fine-tune BERT for SWAG multiple choice and report accuracy.

    python scripts/run_swag.py --config recipes/bert-base/swag.yaml \
        --model_name_or_path MODEL --train_file train.csv --validation_file val.csv
    python scripts/run_swag.py --model_name_or_path MODEL --synthetic_train 600 \
        --synthetic_eval 300   # a generated task, where the SWAG files are absent

Writes ``eval_results.json``, ``dev_predictions.jsonl`` / ``test_predictions.jsonl`` and the
model.
"""

from __future__ import annotations

import json
import logging

from modeling.cli import main_guard, parse_args
from recipes.arguments import ModelArguments, TrainingArguments
from recipes.swag import SwagDataArguments


def main(argv=None):
    model_args, data_args, train_args = parse_args(
        [ModelArguments, SwagDataArguments, TrainingArguments], argv, description=__doc__
    )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    from recipes.swag import run

    summary = run(model_args, data_args, train_args)
    print(json.dumps(summary.get("best_setting", summary), indent=2, default=str))


if __name__ == "__main__":
    main_guard(main)
