"""``QuestionAnsweringTrainer``: ``transformers.Trainer`` whose evaluate/predict post-process.

``evaluate()`` runs the model over the dev windows with Trainer's own evaluation loop (batched,
on every process: ``accelerate`` splits the windows over ranks and ``gather_for_metrics`` puts
them back in order, dropping the copies it padded the last batch with), then turns the window
logits into answers (:func:`recipes.squad.postprocess.postprocess`) and scores them with the
official scripts. Every rank computes the same metrics; only the main process writes
``predictions.json``, ``nbest_predictions.json`` and ``null_odds.json`` into ``output_dir``.
Metrics are in percent, prefixed ``eval_``: v1.1 ``eval_exact_match``/``eval_f1``; v2.0 the
official v2.0 keys (``eval_exact``, ``eval_f1``, ``eval_HasAns_f1``, ..., ``eval_best_f1``,
``eval_best_f1_thresh``) plus ``eval_tuned_tau`` and the scores at it. ``eval_samples`` counts
dev questions, ``eval_windows`` the windows they became.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from transformers.trainer_utils import speed_metrics

from ..trainer import Trainer
from . import postprocess as pp

BOOKKEEPING = ("example_id", "doc_span_index", "offset_mapping", "max_context")


class QuestionAnsweringTrainer(Trainer):
    """``Trainer`` + SQuAD post-processing and metrics in ``evaluate``/``predict``.

    ``eval_examples``: the dev questions (rows of :mod:`recipes.squad.data`); ``eval_dataset``:
    their windows (:func:`recipes.squad.features.featurize`); ``eval_data``: the official
    ``data`` list the metric scripts read; ``squad_args``: n-best settings, v2.0 and tau.
    """

    def __init__(self, *args, eval_examples=None, eval_data=None, squad_args=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.eval_examples, self.eval_data, self.squad_args = eval_examples, eval_data, squad_args
        self.last_predictions: pp.SquadPredictions | None = None
        self.last_results: dict | None = None

    def tau(self) -> float:
        """tau in force: the explicit value, else the model config's, else 0.0."""
        if self.squad_args.null_score_diff_threshold is not None:
            return float(self.squad_args.null_score_diff_threshold)
        config = getattr(self.accelerator.unwrap_model(self.model), "config", None)
        return float(getattr(config, "null_score_diff_threshold", None) or 0.0)

    def _logits(self, features, description: str, metric_key_prefix: str):
        """Run the model over ``features``; (start logits, end logits, loop output)."""
        model_inputs = features.remove_columns(
            [c for c in BOOKKEEPING if c in features.column_names]
        )
        loader = (
            self.get_eval_dataloader(model_inputs)
            if description == "Evaluation"
            else (self.get_test_dataloader(model_inputs))
        )
        output = self.evaluation_loop(
            loader,
            description=description,
            prediction_loss_only=False,
            metric_key_prefix=metric_key_prefix,
        )
        start_logits, end_logits = output.predictions[:2]
        if len(start_logits) < len(features):
            raise RuntimeError(f"{len(start_logits)} logit rows for {len(features)} windows")
        # gather_for_metrics drops the padding copies; keep the guard of transformers' trainer_qa
        n = len(features)
        return start_logits[:n], end_logits[:n], output

    def _answer(self, examples, features, start_logits, end_logits) -> pp.SquadPredictions:
        args = self.squad_args
        return pp.postprocess(
            examples,
            features,
            start_logits,
            end_logits,
            n_best_size=args.n_best_size,
            max_answer_length=args.max_answer_length,
            version_2_with_negative=args.version_2_with_negative,
            null_score_diff_threshold=self.tau(),
        )

    def evaluate(
        self, eval_dataset=None, ignore_keys=None, metric_key_prefix: str = "eval", **kwargs
    ) -> dict[str, float]:
        features = eval_dataset if eval_dataset is not None else self.eval_dataset
        examples = kwargs.get("eval_examples") or self.eval_examples
        data = kwargs.get("eval_data") or self.eval_data
        start_time = time.time()
        start_logits, end_logits, output = self._logits(features, "Evaluation", metric_key_prefix)
        preds = self._answer(examples, features, start_logits, end_logits)
        results = pp.evaluate_predictions(data, preds, self.squad_args.version_2_with_negative)
        if self.args.should_save:
            Path(self.args.output_dir).mkdir(parents=True, exist_ok=True)
            pp.write_prediction_files(self.args.output_dir, preds, results)
        self.last_predictions, self.last_results = preds, results
        metrics = {f"{metric_key_prefix}_{k}": v for k, v in pp.flat_metrics(results).items()}
        metrics[f"{metric_key_prefix}_samples"] = len(examples)
        metrics[f"{metric_key_prefix}_windows"] = len(features)
        total_batch_size = self.args.eval_batch_size * self.args.world_size
        metrics.update(
            speed_metrics(
                metric_key_prefix,
                start_time,
                num_samples=len(features),
                num_steps=math.ceil(len(features) / total_batch_size),
            )
        )
        self.log(metrics)
        self.control = self.callback_handler.on_evaluate(
            self.args, self.state, self.control, metrics
        )
        return metrics

    def predict(self, test_dataset, test_examples, metric_key_prefix: str = "test", **kwargs):
        """Answers for questions without gold answers: a :class:`SquadPredictions`; the main
        process writes ``{prefix}_predictions.json`` and ``{prefix}_nbest_predictions.json``
        (and ``{prefix}_null_odds.json`` for v2.0)."""
        from modeling import atomic

        start_logits, end_logits, _ = self._logits(test_dataset, "Prediction", metric_key_prefix)
        preds = self._answer(test_examples, test_dataset, start_logits, end_logits)
        if self.args.should_save:
            out = Path(self.args.output_dir)
            atomic.write_json(out / f"{metric_key_prefix}_predictions.json", preds.predictions, 4)
            atomic.write_json(out / f"{metric_key_prefix}_nbest_predictions.json", preds.nbest, 4)
            if preds.null_odds:
                atomic.write_json(out / f"{metric_key_prefix}_null_odds.json", preds.null_odds, 4)
        return preds
