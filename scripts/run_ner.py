#!/usr/bin/env python
"""Fine-tune BERT for named-entity recognition (CoNLL-2003) with transformers.Trainer; conlleval.

    python scripts/run_ner.py --config recipes/minilm/ner.yaml --model_name_or_path MODEL \
        --output_dir outputs/ner
    python scripts/run_ner.py --model_name_or_path MODEL --output_dir outputs/ner \
        --train_file ../shared/data/conll2003/eng.train \
        --validation_file ../shared/data/conll2003/eng.testa \
        --test_file ../shared/data/conll2003/eng.testb --do_train --do_eval --do_predict \
        --document_context

Every transformers.TrainingArguments flag works (--bf16, --eval_strategy, --save_strategy steps
--save_steps N, --resume_from_checkpoint [true|DIR], ...). Writes the model and tokenizer,
eval_results.json / test_results.json (eval_precision, eval_recall, eval_f1, eval_accuracy and
per type, percent, as conlleval), dev_predictions.txt / test_predictions.txt (token gold
predicted), train_results.json, all_results.json, trainer_state.json and README.md into
output_dir. --feature_based trains the paper's frozen-encoder BiLSTM tagger (Table 7).
"""

from __future__ import annotations

import json
import logging
import os

from modeling.cli import main_guard


def main(argv=None) -> dict:
    from recipes.ner.data import NerDataArguments
    from recipes.trainer_setup import ModelArguments, parse_args

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    model_args, data_args, training_args = parse_args([ModelArguments, NerDataArguments], argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    from recipes.ner.run import run

    metrics = run(model_args, data_args, training_args)
    if training_args.should_save:
        print(json.dumps(metrics, indent=2, default=str))
    return metrics


if __name__ == "__main__":
    main_guard(main)
