"""SQuAD v1.1 / v2.0 on the shared Trainer runner (:mod:`recipes.runner`), as ``run_qa.py``.

Writes into ``output_dir``, beside the runner's files (model, tokenizer, ``train_results.json``,
``eval_results.json``, ``all_results.json``, ``trainer_state.json``, ``README.md``):
``predictions.json``, ``nbest_predictions.json``, ``null_odds.json`` (v2.0) and
``predictions_tuned_tau.json`` (v2.0, at the tuned tau, which is also saved in the model config
as ``null_score_diff_threshold``); ``--do_predict --test_file F``: ``predict_predictions.json``,
``predict_nbest_predictions.json`` (and ``predict_null_odds.json``).
"""

from __future__ import annotations

import logging
from typing import Any

from modeling.cli import UsageError

from ..runner import Arguments, Task
from . import data as squad_data
from .data import SquadArguments
from .features import FEATURES_VERSION, feature_types, prepare_features

logger = logging.getLogger(__name__)


class SquadRecipe(Task):
    name = "squad"
    description = "Fine-tune BERT on SQuAD v1.1 / v2.0 with transformers.Trainer."
    data_args_class = SquadArguments
    model_class = "BertForQuestionAnswering"
    metric_for_grid = "eval_f1"
    feature_version = str(FEATURES_VERSION)
    output_files = (
        "predictions.json",
        "nbest_predictions.json",
        "null_odds.json",
        "predictions_tuned_tau.json",
        "predict_*.json",
    )

    def __init__(self):
        self.eval_examples = self.eval_data = None

    def check(self, args: Arguments) -> None:
        d, t = args.data, args.training
        if t.do_train and not (d.train_file or d.dataset_name):
            raise UsageError("--do_train needs --train_file or --dataset_name")
        if t.do_eval and not (d.validation_file or d.dataset_name):
            raise UsageError("--do_eval needs --validation_file or --dataset_name")
        if t.do_predict and not d.test_file:
            raise UsageError("--do_predict needs --test_file")
        # v2.0: the paper tunes the no-answer threshold on dev; choose on F1 at the tuned tau
        self.metric_for_grid = "eval_best_f1" if d.version_2_with_negative else "eval_f1"

    # ---------------------------------------------------------------------------- data

    def load_raw(self, data_args: SquadArguments, split: str, args: Arguments) -> dict[str, Any]:
        with args.training.main_process_first(desc=f"SQuAD {split} questions"):
            if split == "train":
                rows = _rows(data_args, data_args.train_file, "train", True, args)
                limit = args.run.max_train_samples
                if limit is not None and limit < len(rows):
                    # Google shuffles the training questions with Random(12345): take the head
                    rows = rows.shuffle(seed=data_args.train_sample_seed).select(range(limit))
            elif split == "eval":
                rows = _rows(data_args, [data_args.validation_file], "validation", False, args)
                limit = args.run.max_eval_samples
                if limit is not None and limit < len(rows):
                    rows = rows.select(range(limit))
                self.eval_examples, self.eval_data = rows, squad_data.official_data(rows)
            else:
                rows = _rows(data_args, [data_args.test_file], "test", False, args)
        return {"squad": rows}

    def featurise(self, batch, tokenizer, data_args: SquadArguments, split: str) -> dict:
        return prepare_features(
            batch,
            tokenizer,
            data_args.max_seq_length,
            data_args.doc_stride,
            data_args.max_query_length,
            is_training=split == "train",
        )

    def features(self, data_args, split: str):
        return feature_types(is_training=split == "train")

    # ---------------------------------------------------------------------------- model

    def load_model(self, args: Arguments):
        model = super().load_model(args)
        # what the pipeline needs to answer like the evaluation did
        model.config.version_2_with_negative = args.data.version_2_with_negative
        model.config.squad_window = args.data.window()
        return model

    def trainer_class(self):
        from .trainer import QuestionAnsweringTrainer

        return QuestionAnsweringTrainer

    def trainer_kwargs(self, args: Arguments) -> dict[str, Any]:
        return {
            "eval_examples": self.eval_examples,
            "eval_data": self.eval_data,
            "squad_args": args.data,
        }

    # ---------------------------------------------------------------------------- metrics

    def evaluate(self, trainer, name, raw, features, args: Arguments) -> dict[str, float]:
        metrics = trainer.evaluate(features, eval_examples=raw, eval_data=self.eval_data)
        if "eval_tuned_tau" in metrics and args.training.do_train:
            # the tuned tau travels with the model: the pipeline applies it
            model = trainer.accelerator.unwrap_model(trainer.model)
            model.config.null_score_diff_threshold = metrics["eval_tuned_tau"]
            trainer.save_model()
        return metrics

    def predict(self, trainer, name, raw, features, args: Arguments) -> dict[str, float]:
        preds = trainer.predict(features, raw, metric_key_prefix="predict")
        return {"predict_samples": len(preds.predictions)}

    def card(self, args: Arguments) -> dict[str, str]:
        v2 = args.data.version_2_with_negative
        return {
            "task": "question-answering",
            "dataset": args.data.dataset_name or ("squad_v2" if v2 else "squad"),
        }


def _rows(data_args: SquadArguments, specs: list[str], split: str, is_training: bool, args):
    v2 = data_args.version_2_with_negative
    if specs and specs[0]:
        return squad_data.load_split(specs, is_training, v2, args.model.cache_dir)
    import datasets

    rows = datasets.load_dataset(
        data_args.dataset_name, split=split, cache_dir=args.model.cache_dir
    )
    if "is_impossible" not in rows.column_names:
        rows = rows.map(lambda r: {"is_impossible": not r["answers"]["text"]})
    return rows
