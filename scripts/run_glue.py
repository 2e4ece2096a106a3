#!/usr/bin/env python
"""Fine-tune BERT on a GLUE task with transformers.Trainer, as transformers' run_glue.py.

    python scripts/run_glue.py --model_name_or_path PATH --task_name rte \
        --data_dir ../shared/data/glue/RTE --do_train --do_eval --output_dir outputs/glue/rte \
        --config recipes/minilm/glue.yaml

Every flag of the installed ``transformers.TrainingArguments`` works (``--bf16``,
``--eval_strategy``, ``--save_steps``, ``--resume_from_checkpoint``, ``--push_to_hub`` ...);
also runs under ``accelerate launch``. ``--learning_rate_grid``/``--seeds`` run the paper's
protocol. See ``recipes/glue/`` and ``recipes/runner.py``.
"""

from __future__ import annotations

import json
import os

from modeling.cli import main_guard


def main(argv=None) -> dict:
    from recipes.glue import GlueRecipe
    from recipes.runner import run

    outcome = run(GlueRecipe(), argv)
    if "best_setting" not in outcome and os.environ.get("RANK", "0") == "0":
        print(json.dumps({k: v for k, v in outcome.items() if k.startswith("eval_")}, indent=2))
    return outcome


if __name__ == "__main__":
    main_guard(main)
