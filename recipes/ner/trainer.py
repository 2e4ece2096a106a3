"""``NerTrainer``: ``transformers.Trainer`` whose evaluate/predict score words with conlleval.

``evaluate()`` runs Trainer's own evaluation loop over the windows (split over processes, put
back in order by ``gather_for_metrics``), maps the window logits back to one tag per word
(:func:`recipes.ner.features.decode_predictions`), scores them with conlleval and, on the main
process only, writes ``{prefix}_predictions.txt`` (``token gold predicted``, conlleval's input).
The feature-based tagger is saved with its head files (``tagger_config.json``,
``tagger_head.safetensors``) beside Trainer's full state. Metrics in percent: ``{prefix}_precision``, ``_recall``, ``_f1``, ``_accuracy`` and per type
``{prefix}_{TYPE}_f1`` (and ``_precision``/``_recall``); ``{prefix}_samples`` counts sentences.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from transformers.trainer_utils import speed_metrics

from ..trainer import Trainer
from .features import MODEL_COLUMNS, decode_predictions, write_conll_predictions
from .metrics import conlleval, format_report


class NerTrainer(Trainer):
    """``Trainer`` + word-level NER metrics. ``labels``: tag names by class id;
    ``eval_sentences``: the dev sentences (:class:`recipes.ner.data.Sentence`)."""

    def __init__(self, *args, labels=None, eval_sentences=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.labels, self.eval_sentences = list(labels), eval_sentences
        self.last_predictions = None

    def _save(self, output_dir: str | None = None, state_dict=None):
        super()._save(output_dir, state_dict)
        model = self.accelerator.unwrap_model(self.model)
        if hasattr(model, "lstm"):  # the feature-based tagger: its head and settings too
            model.save_pretrained(output_dir or self.args.output_dir)

    def _predict_words(self, features, sentences, description: str, prefix: str):
        inputs = features.select_columns([c for c in MODEL_COLUMNS if c in features.column_names])
        if description == "Evaluation":
            loader = self.get_eval_dataloader(inputs)
        else:
            loader = self.get_test_dataloader(inputs)
        output = self.evaluation_loop(
            loader, description=description, prediction_loss_only=False, metric_key_prefix=prefix
        )
        logits = output.predictions
        if isinstance(logits, tuple):
            logits = logits[0]
        if len(logits) < len(features):
            raise RuntimeError(f"{len(logits)} logit rows for {len(features)} windows")
        logits = logits[: len(features)]
        predicted = decode_predictions(features, logits, sentences, dict(enumerate(self.labels)))
        return predicted, output

    def evaluate(
        self, eval_dataset=None, ignore_keys=None, metric_key_prefix: str = "eval", **kwargs
    ) -> dict[str, float]:
        features = eval_dataset if eval_dataset is not None else self.eval_dataset
        sentences = kwargs.get("sentences") or self.eval_sentences
        start_time = time.time()
        predicted, output = self._predict_words(
            features, sentences, "Evaluation", metric_key_prefix
        )
        result = conlleval([s.tags for s in sentences], predicted)
        name = {"eval": "dev", "predict": "test"}.get(metric_key_prefix, metric_key_prefix)
        if self.args.should_save:
            Path(self.args.output_dir).mkdir(parents=True, exist_ok=True)
            path = Path(self.args.output_dir) / f"{name}_predictions.txt"
            write_conll_predictions(path, sentences, predicted)
        self.last_predictions = predicted
        metrics = flat_metrics(result, metric_key_prefix)
        if f"{metric_key_prefix}_loss" in output.metrics:
            metrics[f"{metric_key_prefix}_loss"] = output.metrics[f"{metric_key_prefix}_loss"]
        metrics[f"{metric_key_prefix}_samples"] = len(sentences)
        metrics[f"{metric_key_prefix}_windows"] = len(features)
        batches = math.ceil(len(features) / (self.args.eval_batch_size * self.args.world_size))
        metrics.update(speed_metrics(metric_key_prefix, start_time, len(features), batches))
        if self.is_world_process_zero():
            print(f"{name}:\n{format_report(result)}")
        self.log(metrics)
        self.control = self.callback_handler.on_evaluate(
            self.args, self.state, self.control, metrics
        )
        return metrics


def flat_metrics(result: dict, prefix: str) -> dict[str, float]:
    """conlleval's result as flat ``{prefix}_*`` keys (percent)."""
    out = {f"{prefix}_{k}": result[k] for k in ("precision", "recall", "f1", "accuracy")}
    for kind, r in result["per_type"].items():
        out.update({f"{prefix}_{kind}_{k}": r[k] for k in ("precision", "recall", "f1")})
    return out
