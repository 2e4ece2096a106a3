"""GLUE on the shared Trainer runner: features, dev metrics and predictions, leaderboard files.

Features are ``[CLS] A [SEP] (B [SEP])`` truncated longest-first to ``max_seq_length`` (the
reference ``_truncate_seq_pair``), padded per batch. Dev metrics come from ``Trainer.predict``
(gathered over processes, each example once) and are written beside ``eval_predictions.tsv``;
test sets become the leaderboard files in ``submission/`` and ``submission.zip``.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from modeling.cli import UsageError

from ..runner import Arguments, Task
from .data import GlueDataArguments, load_split
from .metrics import compute_metrics
from .submission import decode_predictions, write_predictions, zip_submission
from .tasks import GlueTask, get_task

logger = logging.getLogger(__name__)

_SPLITS = {"train": "train", "eval": "dev", "predict": "test"}


def label_ids(task: GlueTask) -> dict[str, int]:
    return {name: i for i, name in enumerate(task.labels or ())}


def examples_to_records(task: GlueTask, examples) -> list[dict[str, Any]]:
    """Examples -> rows of a ``datasets.Dataset`` (label as an id, a float, or None)."""
    ids = label_ids(task)
    return [
        {
            "index": e.index,
            "text_a": e.text_a,
            "text_b": e.text_b,
            "label": None
            if e.label is None
            else float(e.label)
            if task.is_regression
            else ids[e.label],
        }
        for e in examples
    ]


def tokenize_batch(batch: dict[str, list], tokenizer, max_seq_length: int = 128) -> dict:
    """A batch of records -> ``input_ids``, ``token_type_ids``, ``attention_mask`` (unpadded)
    and ``labels`` where the records have them."""
    texts_b = batch["text_b"] if any(t is not None for t in batch["text_b"]) else None
    encoded = tokenizer(
        batch["text_a"],
        texts_b,
        truncation="longest_first" if texts_b else True,
        max_length=max_seq_length,
        return_token_type_ids=True,
    )
    out = {k: encoded[k] for k in ("input_ids", "token_type_ids", "attention_mask")}
    if all(label is not None for label in batch["label"]):
        out["labels"] = batch["label"]
    return out


class GlueRecipe(Task):
    """The GLUE tasks (and AX, predicted by an MNLI model)."""

    name = "glue"
    description = "Fine-tune BERT on a GLUE task with transformers.Trainer."
    data_args_class = GlueDataArguments
    model_class = "BertForSequenceClassification"
    output_files = ("eval_predictions*.tsv", "submission", "submission.zip")

    def __init__(self):
        self.glue: GlueTask | None = None

    def check(self, args: Arguments) -> None:
        self.glue = get_task(args.data.task_name)
        self.metric_for_grid = f"eval_{self.glue.main_metric}" if self.glue.metrics else ""
        training = args.training
        if self.glue.name == "ax" and (training.do_train or training.do_eval):
            raise UsageError(
                "task ax has no training or dev data: predict it with a fine-tuned MNLI model "
                "(--do_train false --do_eval false --do_predict) or run mnli with --do_predict"
            )

    # ---------------------------------------------------------------------------- data

    def load_raw(self, data_args, split: str, args: Arguments) -> dict[str, list[dict]]:
        sets = load_split(self.glue, data_args, _SPLITS[split])
        return {s.name: examples_to_records(self.glue, examples) for s, examples in sets}

    def featurise(self, batch, tokenizer, data_args, split):
        return tokenize_batch(batch, tokenizer, data_args.max_seq_length)

    def model_kwargs(self, data_args) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"num_labels": self.glue.num_labels}
        if self.glue.labels:
            kwargs["id2label"] = dict(enumerate(self.glue.labels))
            kwargs["label2id"] = label_ids(self.glue)
        return kwargs

    # ---------------------------------------------------------------------------- metrics

    def compute_metrics(self, eval_pred) -> dict[str, float]:
        import numpy as np

        logits = eval_pred.predictions
        logits = logits[0] if isinstance(logits, tuple) else logits
        if self.glue.is_regression:
            preds = np.asarray(logits).reshape(len(logits), -1)[:, 0]
        else:
            preds = np.asarray(logits).argmax(-1)
        return compute_metrics(self.glue, preds, eval_pred.label_ids)

    def loss(self, logits, labels) -> float:
        """The model's loss over the whole set (cross-entropy, or squared error for STS-B)."""
        import numpy as np

        logits = np.asarray(logits, dtype=np.float64)
        if self.glue.is_regression:
            return float(np.mean((logits.reshape(len(logits)) - np.asarray(labels)) ** 2))
        shifted = logits - logits.max(-1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
        return float(-np.mean(log_probs[np.arange(len(labels)), np.asarray(labels, dtype=int)]))

    def evaluate(self, trainer, name, raw, features, args) -> dict[str, float]:
        """Dev metrics (``eval_*``; MNLI's mismatched set ``eval_*_mm``), logged to the
        trackers, and ``eval_predictions.tsv`` (index, predicted label)."""
        output = trainer.predict(features, metric_key_prefix="eval")
        metrics = dict(output.metrics, eval_samples=len(output.predictions))
        # Trainer's eval_loss averages per-batch means, and on several processes the last
        # batch's mean includes the copies that pad it: recompute it per example, exactly
        metrics["eval_loss"] = self.loss(output.predictions, output.label_ids)
        suffix = "_mm" if name.endswith("mismatched") else ""
        metrics = {f"{k}{suffix}": v for k, v in metrics.items()}
        trainer.log(metrics)
        if trainer.is_world_process_zero():
            preds = decode_predictions(self.glue, output.predictions, trainer.model.config.id2label)
            file = f"eval_predictions{'_mismatched' if suffix else ''}.tsv"
            write_predictions(Path(args.training.output_dir) / file, list(raw["index"]), preds)
        return metrics

    # ---------------------------------------------------------------------------- test sets

    def submission_dir(self, args: Arguments) -> Path:
        """Where the leaderboard files go: ``--submission_dir``, except inside a grid cell (the
        chosen cell's files are copied there afterwards), else ``output_dir/submission``."""
        if args.data.submission_dir and not args.run.is_grid:
            return Path(args.data.submission_dir)
        return Path(args.training.output_dir) / "submission"

    def predict(self, trainer, name, raw, features, args) -> dict[str, float]:
        output = trainer.predict(features, metric_key_prefix="predict")
        if trainer.is_world_process_zero():
            eval_set = next(s for s in self.glue.test if s.name == name)
            preds = decode_predictions(self.glue, output.predictions, trainer.model.config.id2label)
            folder = self.submission_dir(args)
            folder.mkdir(parents=True, exist_ok=True)
            write_predictions(folder / eval_set.submission, list(raw["index"]), preds)
        return {f"predict_samples_{name}": len(output.predictions)}

    def finish(self, args: Arguments, metrics: dict) -> None:
        if args.training.do_predict:
            archive = zip_submission(self.submission_dir(args))
            logger.info("leaderboard files zipped to %s", archive)

    def after_grid(self, args: Arguments, chosen_dir: Path) -> None:
        """The chosen cell's leaderboard files into ``--submission_dir`` (zipped)."""
        if args.training.do_predict and args.data.submission_dir:
            target = Path(args.data.submission_dir)
            target.mkdir(parents=True, exist_ok=True)
            for path in sorted((chosen_dir / "submission").glob("*.tsv")):
                shutil.copyfile(path, target / path.name)
            zip_submission(target)

    def card(self, args: Arguments) -> dict[str, str]:
        source = args.data.data_dir or args.data.dataset_name or args.data.train_file
        limit = args.run.max_train_samples
        return {
            "task": "text-classification",
            "dataset": "glue",
            "dataset_name": f"GLUE {self.glue.folder}",
            "dataset_config": self.glue.name,
            "data": f"GLUE {self.glue.folder} from `{source}`"
            + (f", the first {limit} training examples" if limit else "")
            + f"; dev metrics on its {', '.join(s.name for s in self.glue.dev)} set(s).",
        }
