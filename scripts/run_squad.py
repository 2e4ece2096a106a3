#!/usr/bin/env python
"""Fine-tune BERT on SQuAD v1.1 / v2.0 with transformers.Trainer; official predictions and metrics.

    python scripts/run_squad.py --config recipes/minilm/squad.yaml \
        --model_name_or_path PATH --train_file ../shared/data/squad/train-v1.1.json \
        --validation_file ../shared/data/squad/dev-v1.1.json --output_dir outputs/squad/v1

    # v2.0: --version_2_with_negative; FILE[a:b] keeps articles a..b-1 of a file
    python scripts/run_squad.py ... --version_2_with_negative \
        --train_file ../shared/data/squad/dev-v2.0.json[0:17] \
        --validation_file ../shared/data/squad/dev-v2.0.json[17:35]

    # several processes: accelerate launch --config_file accelerate_configs/cpu.yaml \
    #     scripts/run_squad.py ...

Every transformers.TrainingArguments flag works (--bf16, --eval_strategy, --save_strategy steps
--save_steps N, --resume_from_checkpoint [true|DIR], --deepspeed, ...). Writes the model and
tokenizer, predictions.json, nbest_predictions.json, null_odds.json (v2.0), train_results.json,
eval_results.json (eval_-prefixed, percent), all_results.json, trainer_state.json and README.md
into output_dir; for v2.0 the tuned null threshold tau (best_f1_thresh) is saved in the model
config. See recipes/squad/.
"""

from __future__ import annotations

import json
import logging
import os

from modeling.cli import main_guard


def main(argv=None) -> dict:
    from recipes.squad.data import SquadArguments
    from recipes.trainer_setup import ModelArguments, parse_args

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    model_args, data_args, training_args = parse_args([ModelArguments, SquadArguments], argv)
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level="INFO")
    from recipes.squad.run import run

    metrics = run(model_args, data_args, training_args)
    if training_args.should_save:
        print(json.dumps(metrics, indent=2, default=str))
    return metrics


if __name__ == "__main__":
    main_guard(main)
