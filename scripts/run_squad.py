#!/usr/bin/env python
"""Fine-tune BERT on SQuAD v1.1 / v2.0 with transformers.Trainer; official predictions and metrics.

    python scripts/run_squad.py --config recipes/minilm/squad.yaml \
        --model_name_or_path PATH --train_file ../shared/data/squad/train-v1.1.json \
        --validation_file ../shared/data/squad/dev-v1.1.json --output_dir outputs/squad/v1

    # v2.0: --version_2_with_negative; FILE[a:b] keeps articles a..b-1 of a file
    python scripts/run_squad.py ... --version_2_with_negative \
        --train_file ../shared/data/squad/dev-v2.0.json[0:17] \
        --validation_file ../shared/data/squad/dev-v2.0.json[17:35]

    # several processes
    accelerate launch --config_file accelerate_configs/cpu.yaml scripts/run_squad.py ...

Every flag of the installed transformers.TrainingArguments works (--bf16, --eval_strategy,
--save_strategy steps --save_steps N, --resume_from_checkpoint [true|DIR], --deepspeed,
--push_to_hub ...); --learning_rate_grid/--seeds run the paper's protocol. Writes the model and
tokenizer, predictions.json, nbest_predictions.json, null_odds.json (v2.0), train_results.json,
eval_results.json (eval_-prefixed, percent), all_results.json, trainer_state.json and README.md
into output_dir; for v2.0 the tuned null threshold tau (best_f1_thresh) is saved in the model
config. See recipes/squad/ and recipes/runner.py.
"""

from __future__ import annotations

import json
import os

from modeling.cli import main_guard


def main(argv=None) -> dict:
    from recipes.runner import run
    from recipes.squad.recipe import SquadRecipe

    outcome = run(SquadRecipe(), argv)
    if "best_setting" not in outcome and os.environ.get("RANK", "0") == "0":
        print(json.dumps({k: v for k, v in outcome.items() if k.startswith("eval_")}, indent=2))
    return outcome


if __name__ == "__main__":
    main_guard(main)
