"""The official SQuAD evaluation, v1.1 and v2.0, reimplemented faithfully.

Both official scripts (``evaluate-v1.1.py`` and ``evaluate-v2.0.py`` from the SQuAD site) are
reproduced here, key for key and rule for rule, so that the numbers this project reports are the
numbers the leaderboard scripts print:

* the answer normalisation (lower case, drop punctuation, drop the articles a/an/the, squeeze
  whitespace);
* EM and F1 per question as the maximum over its gold answers;
* v1.1: ``{"exact_match", "f1"}``; a question without a prediction scores 0 and still counts;
* v2.0: gold answers that normalise to nothing are dropped, a question without gold answers has
  the single gold answer ``""``, F1 of two empty answers is 1; a question without a prediction
  is skipped (not counted); ``exact``/``f1``/``total``, the ``HasAns_*``/``NoAns_*`` breakdown, and
  with no-answer scores (``na_probs``, in practice the null odds) ``best_exact``/``best_f1`` and
  their thresholds.

The two scripts differ in small ways on purpose (v1.1 F1 of empty vs empty is 0, v2.0 it is 1);
those differences are kept.
"""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Iterable, Mapping

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower text and remove punctuation, articles and extra whitespace (official order)."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def get_tokens(text: str) -> list[str]:
    return normalize_answer(text).split() if text else []


def _overlap_f1(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    common = collections.Counter(pred_tokens) & collections.Counter(gold_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(pred_tokens)
    recall = num_same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


# -- v2.0 --------------------------------------------------------------------------------------


def compute_exact(a_gold: str, a_pred: str) -> int:
    return int(normalize_answer(a_gold) == normalize_answer(a_pred))


def compute_f1(a_gold: str, a_pred: str) -> float:
    gold_toks, pred_toks = get_tokens(a_gold), get_tokens(a_pred)
    if not gold_toks or not pred_toks:
        # if either is no-answer, F1 is 1 when they agree, 0 otherwise
        return float(gold_toks == pred_toks)
    return _overlap_f1(pred_toks, gold_toks)


def iter_questions(dataset: Iterable[dict]):
    """Every ``qa`` dict of an official ``data`` list, in file order."""
    for article in dataset:
        for paragraph in article["paragraphs"]:
            yield from paragraph["qas"]


def make_qid_to_has_ans(dataset: Iterable[dict]) -> dict[str, bool]:
    return {qa["id"]: bool(qa["answers"]) for qa in iter_questions(dataset)}


def get_raw_scores(dataset, preds: Mapping[str, str]) -> tuple[dict, dict, list[str]]:
    """Per-question EM and F1 (max over gold answers); also the ids that had no prediction."""
    exact, f1, missing = {}, {}, []
    for qa in iter_questions(dataset):
        qid = qa["id"]
        golds = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])] or [""]
        if qid not in preds:
            missing.append(qid)
            continue
        pred = preds[qid]
        exact[qid] = max(compute_exact(g, pred) for g in golds)
        f1[qid] = max(compute_f1(g, pred) for g in golds)
    return exact, f1, missing


def apply_no_ans_threshold(scores, na_probs, qid_to_has_ans, na_prob_thresh: float) -> dict:
    """Questions whose no-answer score exceeds the threshold are scored as answered with ''."""
    return {
        qid: float(not qid_to_has_ans[qid]) if na_probs[qid] > na_prob_thresh else s
        for qid, s in scores.items()
    }


def make_eval_dict(exact_scores, f1_scores, qid_list=None) -> dict:
    if not qid_list:
        total = len(exact_scores)
        exact_sum, f1_sum = sum(exact_scores.values()), sum(f1_scores.values())
    else:
        total = len(qid_list)
        exact_sum = sum(exact_scores[k] for k in qid_list)
        f1_sum = sum(f1_scores[k] for k in qid_list)
    return {"exact": 100.0 * exact_sum / total, "f1": 100.0 * f1_sum / total, "total": total}


def find_best_thresh(preds, scores, na_probs, qid_to_has_ans) -> tuple[float, float]:
    """The no-answer threshold that maximises ``scores`` (official algorithm, ties included).

    Start from "every question answered with ''" (all NoAns right), then walk the questions in
    increasing no-answer score, switching each to its prediction; the threshold is the score of
    the question after which the running total was best. The total is over ``scores``' keys.
    """
    cur_score = best_score = sum(1 for has in qid_to_has_ans.values() if not has)
    best_thresh = 0.0
    for qid in sorted(na_probs, key=lambda k: na_probs[k]):
        if qid not in scores:
            continue
        if qid_to_has_ans[qid]:
            diff = scores[qid]
        else:
            diff = -1 if preds[qid] else 0
        cur_score += diff
        if cur_score > best_score:
            best_score, best_thresh = cur_score, na_probs[qid]
    return 100.0 * best_score / len(scores), best_thresh


def evaluate_v2(
    dataset,
    preds: Mapping[str, str],
    na_probs: Mapping[str, float] | None = None,
    na_prob_thresh: float = 1.0,
) -> dict:
    """What ``evaluate-v2.0.py data.json pred.json [--na-prob-file F] [-t T]`` prints.

    ``dataset`` is the official JSON's ``data`` list. With ``na_probs`` the result also has
    ``best_exact``, ``best_exact_thresh``, ``best_f1``, ``best_f1_thresh``.
    """
    has_na_file = na_probs is not None
    na_probs = dict(na_probs) if has_na_file else {k: 0.0 for k in preds}
    qid_to_has_ans = make_qid_to_has_ans(dataset)
    has_ans = [k for k, v in qid_to_has_ans.items() if v]
    no_ans = [k for k, v in qid_to_has_ans.items() if not v]
    exact_raw, f1_raw, missing = get_raw_scores(dataset, preds)
    if missing:
        # the official script prints "Missing prediction" and then fails on the HasAns/NoAns split
        raise ValueError(
            f"predictions missing for {len(missing)} of {len(qid_to_has_ans)} questions, "
            f"e.g. {missing[0]!r}"
        )
    missing_na = [q for q in exact_raw if q not in na_probs]
    if missing_na:
        raise ValueError(
            f"no-answer scores missing for {len(missing_na)} ids, e.g. {missing_na[0]}"
        )
    exact_t = apply_no_ans_threshold(exact_raw, na_probs, qid_to_has_ans, na_prob_thresh)
    f1_t = apply_no_ans_threshold(f1_raw, na_probs, qid_to_has_ans, na_prob_thresh)
    out = make_eval_dict(exact_t, f1_t)
    for prefix, qids in (("HasAns", has_ans), ("NoAns", no_ans)):
        if qids:
            for key, value in make_eval_dict(exact_t, f1_t, qid_list=qids).items():
                out[f"{prefix}_{key}"] = value
    if has_na_file:
        best_exact, exact_thresh = find_best_thresh(preds, exact_raw, na_probs, qid_to_has_ans)
        best_f1, f1_thresh = find_best_thresh(preds, f1_raw, na_probs, qid_to_has_ans)
        out.update(
            best_exact=best_exact,
            best_exact_thresh=exact_thresh,
            best_f1=best_f1,
            best_f1_thresh=f1_thresh,
        )
    return out


# -- v1.1 --------------------------------------------------------------------------------------


def f1_score_v1(prediction: str, ground_truth: str) -> float:
    return _overlap_f1(normalize_answer(prediction).split(), normalize_answer(ground_truth).split())


def exact_match_score_v1(prediction: str, ground_truth: str) -> bool:
    return normalize_answer(prediction) == normalize_answer(ground_truth)


def evaluate_v1(dataset, predictions: Mapping[str, str]) -> dict:
    """What ``evaluate-v1.1.py data.json pred.json`` prints: ``{"exact_match", "f1"}``.

    Unanswered questions score 0 and count in the total, as in the official script.
    """
    f1 = exact = total = 0.0
    for qa in iter_questions(dataset):
        total += 1
        if qa["id"] not in predictions:
            continue
        golds = [a["text"] for a in qa["answers"]]
        if not golds:
            raise ValueError(f"question {qa['id']!r} has no gold answer: use the v2.0 evaluation")
        pred = predictions[qa["id"]]
        exact += max(exact_match_score_v1(pred, g) for g in golds)
        f1 += max(f1_score_v1(pred, g) for g in golds)
    if not total:
        raise ValueError("the data file has no questions")
    return {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1 / total}
