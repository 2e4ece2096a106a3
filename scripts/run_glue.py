#!/usr/bin/env python
"""Fine-tune BERT on a GLUE task; write dev metrics, dev predictions and leaderboard files.

    python scripts/run_glue.py --model_name_or_path PATH --task_name rte \
        --data_dir ../shared/data/glue/RTE --output_dir outputs/glue/rte \
        --config recipes/minilm/glue.yaml

Also runs under ``accelerate launch``. ``--learning_rate_grid``/``--seeds`` run the paper's
protocol (pick on dev; best, median and std over restarts). See ``recipes/glue.py``.
"""

from __future__ import annotations

import json
import logging
import os

from modeling.cli import main_guard, parse_args
from recipes.arguments import ModelArguments, TrainingArguments
from recipes.glue import GlueDataArguments


def main(argv=None) -> dict:
    model_args, data_args, train_args = parse_args(
        [ModelArguments, GlueDataArguments, TrainingArguments],
        argv,
        description=__doc__.split("\n\n")[0],
    )
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level="INFO")
    from recipes.glue import run

    outcome = run(model_args, data_args, train_args)
    metrics = {k: v for k, v in outcome["metrics"].items() if not isinstance(v, str)}
    print(json.dumps(metrics, indent=2))
    return outcome


if __name__ == "__main__":
    main_guard(main)
