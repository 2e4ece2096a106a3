"""Window logits -> answers (Google's ``write_predictions``), official metrics, output files.

* prediction keeps, per window, the ``n_best_size`` best start and end positions, spans with
  start <= end inside the passage, at most ``max_answer_length`` tokens, starting at a
  max-context token; v2.0: the null score is the minimum over windows of the [CLS] start + end
  logits, and the answer is "" when ``null_score - best_span_score > tau``
  (``null_score_diff_threshold``);
* ``predictions.json``, ``nbest_predictions.json``, ``null_odds.json`` in Google's formats.

Deliberate differences from Google, all small: answer text is cut from the context by character
offsets instead of ``get_final_text`` re-alignment (same span, no fallback to whole whitespace
words); the n best positions are taken over real tokens only (Google also ranks padding
positions, then discards them).

tau: evaluation computes, from the null odds, the threshold that maximises F1
(``best_f1_thresh`` of the official v2.0 script, computed over the best non-null answers so that
every threshold is scored), reports results at the tau in force (0 unless given) and at the tuned
tau; a trained model saves the tuned tau as ``config.null_score_diff_threshold``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import metrics as squad_metrics

NO_VALID_SPAN_ODDS = 1e6  # null odds when no span is valid at all: always no-answer


@dataclass
class SquadPredictions:
    predictions: dict[str, str]  # at the tau in force (v1.1: the best span)
    nbest: dict[str, list[dict]]
    null_odds: dict[str, float]  # v2.0 only: null score - best non-null span score
    non_null: dict[str, str]  # v2.0: the best non-null answer (the answer at tau = +inf)
    tau: float
    spans: dict[str, tuple[int, int]] = field(default_factory=dict)  # best span's characters


def _softmax(scores: Sequence[float]) -> list[float]:
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    total = sum(exps)
    return [e / total for e in exps]


def _top_indexes(logits: np.ndarray, n: int) -> list[int]:
    # descending, ties in index order (Python's stable sort, as Google's _get_best_indexes)
    return np.argsort(-logits, kind="stable")[:n].tolist()


def postprocess(
    examples,
    features,
    start_logits: Sequence[np.ndarray],
    end_logits: Sequence[np.ndarray],
    n_best_size: int = 20,
    max_answer_length: int = 30,
    version_2_with_negative: bool = False,
    null_score_diff_threshold: float = 0.0,
) -> SquadPredictions:
    """Window logits -> answers, n-best lists and null odds (Google's ``write_predictions``).

    ``examples``: rows with ``id`` and ``context`` (a ``Dataset`` or a list of dicts);
    ``features``: rows with ``example_id``, ``offset_mapping`` and ``max_context``
    (:func:`recipes.squad.features.prepare_features`); logits: one row per feature, possibly
    padded past the feature's length (padding is ignored)."""
    if len(start_logits) != len(features):
        raise ValueError(f"{len(start_logits)} logit rows for {len(features)} windows")
    feat_ids = _column(features, "example_id")
    offsets_col = _column(features, "offset_mapping")
    max_ctx_col = _column(features, "max_context")
    by_example: dict[str, list[int]] = {}
    for f_index, qid in enumerate(feat_ids):
        by_example.setdefault(qid, []).append(f_index)
    ids, contexts = _column(examples, "id"), _column(examples, "context")
    predictions, nbest_all, null_odds, non_null, spans = {}, {}, {}, {}, {}
    for qid, context in zip(ids, contexts):
        prelim = []  # (score, feature, start, end, start_logit, end_logit)
        score_null, null_feature, null_start, null_end = 1e6, None, 0.0, 0.0
        offsets_of = {}
        for f_index in by_example.get(qid, []):
            offsets = np.asarray(offsets_col[f_index], dtype=np.int64).reshape(-1, 2)
            max_ctx = np.asarray(max_ctx_col[f_index], dtype=bool)
            offsets_of[f_index] = offsets
            n = len(offsets)
            starts = np.asarray(start_logits[f_index][:n], dtype=np.float64)
            ends = np.asarray(end_logits[f_index][:n], dtype=np.float64)
            if version_2_with_negative:
                feature_null = float(starts[0]) + float(ends[0])
                if feature_null < score_null:
                    score_null, null_feature = feature_null, f_index
                    null_start, null_end = float(starts[0]), float(ends[0])
            for s in _top_indexes(starts, n_best_size):
                if offsets[s, 0] < 0 or not max_ctx[s]:
                    continue
                for e in _top_indexes(ends, n_best_size):
                    if offsets[e, 0] < 0 or e < s or e - s + 1 > max_answer_length:
                        continue
                    sl, el = float(starts[s]), float(ends[e])
                    prelim.append((sl + el, f_index, s, e, sl, el))
        if version_2_with_negative:
            prelim.append((null_start + null_end, null_feature, 0, 0, null_start, null_end))
        prelim.sort(key=lambda p: p[0], reverse=True)  # stable, as Google's sorted()
        seen, nbest = set(), []
        for _, f_index, s, e, sl, el in prelim:
            if len(nbest) >= n_best_size:
                break
            span = (-1, -1)
            if s > 0:
                offsets = offsets_of[f_index]
                span = (int(offsets[s, 0]), int(offsets[e, 1]))
                text = context[span[0] : span[1]]
                if text in seen:
                    continue
            else:
                text = ""
            seen.add(text)
            nbest.append({"text": text, "start_logit": sl, "end_logit": el, "span": span})
        if version_2_with_negative and "" not in seen:
            nbest.append(
                {"text": "", "start_logit": null_start, "end_logit": null_end, "span": (-1, -1)}
            )
        if not nbest:
            nbest.append({"text": "empty", "start_logit": 0.0, "end_logit": 0.0, "span": (-1, -1)})
        probs = _softmax([n["start_logit"] + n["end_logit"] for n in nbest])
        nbest_json = [
            {
                "text": n["text"],
                "probability": p,
                "start_logit": n["start_logit"],
                "end_logit": n["end_logit"],
            }
            for n, p in zip(nbest, probs)
        ]
        nbest_all[qid] = nbest_json
        best = next((n for n in nbest if n["text"]), None)
        if best is not None:
            spans[qid] = best["span"]
        if not version_2_with_negative:
            predictions[qid] = nbest_json[0]["text"]
            continue
        if best is None:  # no valid span at all (Google would fail here)
            diff, best_text = NO_VALID_SPAN_ODDS, ""
        else:
            diff = score_null - best["start_logit"] - best["end_logit"]
            best_text = best["text"]
        null_odds[qid] = diff
        non_null[qid] = best_text
        predictions[qid] = "" if diff > null_score_diff_threshold else best_text
    return SquadPredictions(
        predictions, nbest_all, null_odds, non_null, null_score_diff_threshold, spans
    )


def _column(rows, name: str) -> list:
    if hasattr(rows, "column_names"):
        return list(rows[name])
    return [r[name] for r in rows]


def apply_threshold(preds: SquadPredictions, tau: float) -> dict[str, str]:
    """v2.0 answers at another tau, from the null odds and the best non-null answers."""
    return {q: "" if preds.null_odds[q] > tau else t for q, t in preds.non_null.items()}


def evaluate_predictions(
    data: list[dict], preds: SquadPredictions, version_2_with_negative: bool
) -> dict[str, Any]:
    """Official metrics. v1.1: ``{"eval": {exact_match, f1}}``. v2.0: ``"eval"`` at the tau in
    force, ``"tau0"`` at tau = 0 and ``"tuned"`` at ``"tuned_tau"`` (:func:`tune_tau`), each the
    dict the official v2.0 script prints (with ``--na-prob-file null_odds.json -t tau`` on the
    best non-null answers: the same exact/f1 as ``predictions.json``, and thresholds scored
    exactly)."""
    if not version_2_with_negative:
        return {"eval": squad_metrics.evaluate_v1(data, preds.predictions)}

    def at(tau: float) -> dict:
        return squad_metrics.evaluate_v2(data, preds.non_null, preds.null_odds, tau)

    out = {"eval": at(preds.tau)}
    out["tau0"] = out["eval"] if preds.tau == 0.0 else at(0.0)
    out["tuned_tau"] = tune_tau(out["eval"], preds.null_odds)
    out["tuned"] = at(out["tuned_tau"])
    return out


def tune_tau(official: dict, null_odds: dict[str, float]) -> float:
    """tau that reproduces ``best_f1``: the official ``best_f1_thresh``, except when answering
    nothing is best. The official search then keeps its initial value 0.0, which would still
    answer every question with null odds <= 0; a tau below every null odds answers none."""
    tau = official["best_f1_thresh"]
    num_no_ans = official.get("NoAns_total", 0)
    answers_nothing = abs(official["best_f1"] - 100.0 * num_no_ans / official["total"]) < 1e-9
    if answers_nothing and tau == 0.0 and min(null_odds.values()) <= 0.0:
        tau = min(null_odds.values()) - 1.0
    return tau


def flat_metrics(results: dict[str, Any]) -> dict[str, float]:
    """One flat dict (keys as the official scripts print them, in percent): v1.1
    ``exact_match``/``f1``; v2.0 ``exact``, ``f1``, ``HasAns_*``, ``NoAns_*``, ``best_*`` at the
    tau in force, plus ``tuned_tau``, ``tuned_exact``/``tuned_f1`` (at the tuned tau) and
    ``tau0_*`` when the tau in force is not 0."""
    out = dict(results["eval"])
    for name in ("tau0", "tuned"):
        if name in results and results[name] is not results["eval"]:
            out.update(
                {f"{name}_{k}": v for k, v in results[name].items() if not k.startswith("best")}
            )
    if "tuned_tau" in results:
        out["tuned_tau"] = results["tuned_tau"]
    return out


def write_prediction_files(
    output_dir: str | Path, preds: SquadPredictions, results: dict[str, Any] | None = None
) -> None:
    """predictions.json, nbest_predictions.json, null_odds.json (v2.0); v2.0 with results also
    ``predictions_tuned_tau.json``. Each file is written atomically."""
    from modeling import atomic

    out = Path(output_dir)
    atomic.write_json(out / "predictions.json", preds.predictions, indent=4)
    atomic.write_json(out / "nbest_predictions.json", preds.nbest, indent=4)
    if preds.null_odds:
        atomic.write_json(out / "null_odds.json", preds.null_odds, indent=4)
    if results and "tuned" in results:
        tuned = apply_threshold(preds, results["tuned_tau"])
        atomic.write_json(out / "predictions_tuned_tau.json", tuned, indent=4)
