#!/usr/bin/env python
"""Fine-tune BERT for named-entity recognition (CoNLL-2003) and score it with conlleval.

    python scripts/run_ner.py --config recipes/minilm/ner.yaml
    python scripts/run_ner.py --model_name_or_path MODEL \
        --train_file ../shared/data/conll2003/eng.train \
        --validation_file ../shared/data/conll2003/eng.testa \
        --test_file ../shared/data/conll2003/eng.testb --do_predict --document_context

Writes ``eval_results.json`` (entity P/R/F1 overall and per type, as conlleval),
``dev_predictions.txt`` / ``test_predictions.txt`` (``token gold predicted``) and the model.
``--feature_based`` trains the paper's frozen-encoder BiLSTM tagger instead (Table 7).
"""

from __future__ import annotations

import json
import logging

from modeling.cli import main_guard, parse_args
from recipes.arguments import ModelArguments, TrainingArguments
from recipes.ner import NerDataArguments


def main(argv=None):
    model_args, data_args, train_args = parse_args(
        [ModelArguments, NerDataArguments, TrainingArguments], argv, description=__doc__
    )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    from recipes.ner import run

    summary = run(model_args, data_args, train_args)
    print(json.dumps(summary.get("best_setting", summary), indent=2, default=str))


if __name__ == "__main__":
    main_guard(main)
