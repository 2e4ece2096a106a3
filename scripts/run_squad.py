#!/usr/bin/env python
"""Fine-tune BERT on SQuAD v1.1 / v2.0; write predictions, n-best, null odds and official metrics.

    python scripts/run_squad.py --config recipes/minilm/squad.yaml \
        --model_name_or_path PATH --train_file ../shared/data/squad/train-v1.1.json \
        --validation_file ../shared/data/squad/dev-v1.1.json --output_dir outputs/squad/v1

    # v2.0: --version_2_with_negative; FILE[a:b] keeps articles a..b-1 of a file
    python scripts/run_squad.py ... --version_2_with_negative \
        --train_file ../shared/data/squad/dev-v2.0.json[0:17] \
        --validation_file ../shared/data/squad/dev-v2.0.json[17:35]

Writes predictions.json, nbest_predictions.json, null_odds.json (v2.0), eval_results.json (as the
official evaluation script prints it) and, for v2.0, the same at the tuned null threshold tau
(best_f1_thresh), which is also saved in the model config. See ``recipes/squad.py``.
"""

from __future__ import annotations

import json
import logging
import os

from modeling.cli import main_guard, parse_args
from recipes.arguments import ModelArguments, TrainingArguments
from recipes.squad import SquadArguments


def main(argv=None) -> dict:
    model_args, data_args, train_args = parse_args(
        [ModelArguments, SquadArguments, TrainingArguments],
        argv,
        description=__doc__.split("\n\n")[0],
    )
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level="INFO")
    from recipes.squad import run

    outcome = run(model_args, data_args, train_args)
    print(json.dumps(outcome["metrics"], indent=2, default=str))
    return outcome


if __name__ == "__main__":
    main_guard(main)
