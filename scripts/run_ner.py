#!/usr/bin/env python
"""Fine-tune BERT for named-entity recognition (CoNLL-2003) with transformers.Trainer; conlleval.

    python scripts/run_ner.py --config recipes/minilm/ner.yaml --model_name_or_path MODEL \
        --output_dir outputs/ner
    python scripts/run_ner.py --model_name_or_path MODEL --output_dir outputs/ner \
        --train_file ../shared/data/conll2003/eng.train \
        --validation_file ../shared/data/conll2003/eng.testa \
        --test_file ../shared/data/conll2003/eng.testb --do_train --do_eval --do_predict \
        --document_context

Every flag of the installed transformers.TrainingArguments works (--bf16, --eval_strategy,
--save_strategy steps --save_steps N, --resume_from_checkpoint [true|DIR], --push_to_hub ...);
--learning_rate_grid/--seeds run the paper's protocol. Writes the model and tokenizer,
eval_results.json / predict_results.json (eval_precision, eval_recall, eval_f1, eval_accuracy
and per type, percent, as conlleval), dev_predictions.txt / test_predictions.txt (token gold
predicted), train_results.json, all_results.json, trainer_state.json and README.md into
output_dir. --feature_based trains the paper's frozen-encoder BiLSTM tagger (Table 7).
"""

from __future__ import annotations

import json
import os

from modeling.cli import main_guard


def main(argv=None) -> dict:
    from recipes.ner.recipe import NerRecipe
    from recipes.runner import run

    outcome = run(NerRecipe(), argv)
    if "best_setting" not in outcome and os.environ.get("RANK", "0") == "0":
        keys = ("eval_precision", "eval_recall", "eval_f1", "predict_f1", "train_runtime")
        print(json.dumps({k: outcome[k] for k in keys if k in outcome}, indent=2))
    return outcome


if __name__ == "__main__":
    main_guard(main)
