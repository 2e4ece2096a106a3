#!/usr/bin/env python
"""Pretrain BERT (masked LM + next sentence prediction), one or two phases, on any device set-up.

    accelerate launch [--config_file accelerate_configs/cpu.yaml] scripts/pretrain.py \\
        --config recipes/bert-mini/pretrain.yaml [--max_steps 500 --output_dir outputs/x ...]

Plain ``python scripts/pretrain.py ...`` runs one process. The YAML recipe holds every
hyper-parameter; flags override it; ``--help`` lists them. The loop lives in
``modeling.pretraining``.
"""

from __future__ import annotations

import json
import logging
import os

from modeling.cli import UsageError, main_guard, parse_args
from modeling.pretraining_args import PretrainingArguments


def main(argv=None) -> None:
    (args,) = parse_args([PretrainingArguments], argv, description=__doc__.split("\n\n")[0])
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.basicConfig(
        format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO
    )
    from modeling.corpus import CorpusError
    from modeling.pretraining import pretrain
    from modeling.pretraining_data import PretrainingDataError

    try:
        results = pretrain(args)
    except (PretrainingDataError, CorpusError) as err:
        raise UsageError(str(err)) from None
    if os.environ.get("RANK", "0") == "0":
        print(json.dumps({k: v for k, v in results.items() if k != "param_fingerprints"}, indent=1))


if __name__ == "__main__":
    main_guard(main)
