"""SQuAD v1.1 / v2.0: data loading, windowed features, n-best post-processing, evaluation.

Faithful to the paper and Google's ``run_squad.py``:

* the question is segment A (cut to ``max_query_length`` tokens), the passage segment B; a
  passage longer than ``max_seq_length - len(question) - 3`` tokens is cut into windows whose
  starts are ``doc_stride`` tokens apart (Google's ``doc_stride`` is the *step* between windows);
* each passage token is scored only in the window where it has the most context,
  ``min(left, right) + 0.01 * window length`` (Google's ``_check_is_max_context``);
* answers are mapped from characters to tokens through the fast tokenizer's offsets; a training
  window that does not contain the whole answer, and every window of an unanswerable v2.0
  question, targets [CLS] (position 0);
* prediction keeps, per window, the ``n_best_size`` best start and end positions, spans with
  start <= end inside the passage, at most ``max_answer_length`` tokens, starting at a
  max-context token; v2.0: the null score is the minimum over windows of the [CLS] start + end
  logits, and the answer is "" when ``null_score - best_span_score > tau``
  (``null_score_diff_threshold``);
* ``predictions.json``, ``nbest_predictions.json``, ``null_odds.json`` in Google's formats and
  ``eval_results.json`` as the official evaluation scripts print it (:mod:`recipes.squad_metrics`).

Windows come from the fast tokenizer (``return_overflowing_tokens``). Its ``stride`` is the
*overlap* between consecutive windows, so for each question we pass
``stride = max(0, max_tokens_for_doc - doc_stride)``: the windows are then exactly Google's
(checked at run time). Deliberate differences, all small: answer text is cut from the context by
character offsets instead of Google's ``get_final_text`` re-alignment (same span, no fallback to
whole whitespace words); the n best positions are taken over real tokens only (Google also ranks
padding positions, then discards them); for training, a question with several gold answers uses
the first (Google refuses such a training file).

tau: evaluation computes, from the null odds, the threshold that maximises F1
(``best_f1_thresh`` of the official v2.0 script, computed over the best non-null answers so that
every threshold is scored), reports results at the tau in force (0 unless given) and at the tuned
tau, and a trained model saves the tuned tau as ``config.null_score_diff_threshold``;
:class:`QuestionAnsweringPipeline` applies it unless told otherwise.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import logging
import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from modeling.cli import UsageError

from . import squad_metrics
from .arguments import ModelArguments, TrainingArguments

logger = logging.getLogger(__name__)

LABEL_KEYS = ("start_positions", "end_positions")
# saved in a fine-tuned model's config (``squad_window``) for the inference pipeline
WINDOW_KEYS = (
    "max_seq_length",
    "doc_stride",
    "max_query_length",
    "n_best_size",
    "max_answer_length",
)
NO_VALID_SPAN_ODDS = 1e6  # null odds when no span is valid at all: always no-answer


@dataclass
class SquadArguments:
    train_file: list[str] = field(
        default_factory=list,
        metadata={
            "help": "official SQuAD JSON file(s); FILE[a:b] or FILE[a:b:step] "
            "selects articles (several files are concatenated)"
        },
    )
    validation_file: str | None = field(
        default=None, metadata={"help": "official SQuAD JSON (FILE[a:b] keeps articles a..b-1)"}
    )
    version_2_with_negative: bool = field(
        default=False, metadata={"help": "SQuAD 2.0: questions may have no answer"}
    )
    null_score_diff_threshold: float | None = field(
        default=None,
        metadata={
            "help": "tau: predict '' when null score - best span score > tau "
            "(default: the model config's, else 0.0)"
        },
    )
    max_seq_length: int = field(default=384, metadata={"help": "tokens per window"})
    doc_stride: int = field(
        default=128, metadata={"help": "step between window starts (Google's doc_stride)"}
    )
    max_query_length: int = field(default=64, metadata={"help": "question tokens kept"})
    n_best_size: int = field(default=20, metadata={"help": "start/end candidates per window"})
    max_answer_length: int = field(default=30, metadata={"help": "longest answer, in tokens"})
    train_sample_seed: int = field(
        default=12345, metadata={"help": "shuffle seed for max_train_samples (Google's 12345)"}
    )

    def __post_init__(self):
        if self.max_seq_length <= self.max_query_length + 3:
            raise ValueError(
                f"max_seq_length ({self.max_seq_length}) must be greater than "
                f"max_query_length ({self.max_query_length}) + 3"
            )
        if self.doc_stride < 1 or self.n_best_size < 1 or self.max_answer_length < 1:
            raise ValueError("doc_stride, n_best_size and max_answer_length must be >= 1")


class SquadFormatError(UsageError):
    """A SQuAD file that does not follow the official schema; names the file and the field."""


# --------------------------------------------------------------------------------------------
# Reading the official JSON
# --------------------------------------------------------------------------------------------


@dataclass
class SquadExample:
    qas_id: str
    question: str
    context: str
    answers: list[dict]  # [{"text", "answer_start"}], empty when unanswerable
    is_impossible: bool = False


_SLICE = re.compile(r"^(?P<path>.*)\[(?P<start>-?\d*):(?P<stop>-?\d*)(?::(?P<step>\d*))?\]$")


def split_file_spec(spec: str) -> tuple[str, slice]:
    """``"dev.json[0:17]"`` -> ``("dev.json", slice(0, 17))`` (Python slice of the articles,
    ``[a:b:c]`` too); a plain path keeps all articles."""
    match = _SLICE.match(spec)
    if not match:
        return spec, slice(None)
    to_int = lambda s: int(s) if s else None  # noqa: E731
    parts = (to_int(match[k]) for k in ("start", "stop", "step"))
    return match["path"], slice(*parts)


def read_json_object(path: str | Path, what: str) -> dict:
    """A JSON object from ``path``; a missing file, bad JSON (with its line) or another JSON
    type is an error naming the file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} {path} not found")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise SquadFormatError(
            f"{path}: line {err.lineno} column {err.colno}: invalid JSON ({err.msg})"
        ) from None
    except UnicodeDecodeError as err:
        raise SquadFormatError(f"{path}: not UTF-8 text ({err})") from None
    if not isinstance(value, dict):
        raise SquadFormatError(f"{path}: expected a JSON object, got {type(value).__name__}")
    return value


def load_squad_file(spec: str) -> tuple[list[dict], str]:
    """Read an official SQuAD JSON file (optionally ``FILE[a:b]``); return (data, version).

    The schema is checked (``data[i].paragraphs[j].qas[k]`` with ``id``, ``question``,
    ``answers[].text`` / ``answer_start``); a violation raises :class:`SquadFormatError` naming
    the file and the field.
    """
    path_str, articles = split_file_spec(spec)
    path = Path(path_str)
    raw = read_json_object(path, "SQuAD file")
    if not isinstance(raw.get("data"), list):
        raise SquadFormatError(f"{path}: expected an object with a 'data' list (official schema)")
    data = raw["data"]
    for i, article in enumerate(data):
        _check_article(path, i, article)
    return data[articles], str(raw.get("version", ""))


def _check_article(path: Path, i: int, article: Any) -> None:
    def fail(where: str, what: str):
        raise SquadFormatError(f"{path}: data[{i}]{where}: {what}")

    if not isinstance(article, dict) or not isinstance(article.get("paragraphs"), list):
        fail("", "expected an object with a 'paragraphs' list")
    for j, para in enumerate(article["paragraphs"]):
        where = f".paragraphs[{j}]"
        if not isinstance(para, dict) or not isinstance(para.get("context"), str):
            fail(where, "missing 'context' (a string)")
        if not isinstance(para.get("qas"), list):
            fail(where, "missing 'qas' (a list)")
        for k, qa in enumerate(para["qas"]):
            w = f"{where}.qas[{k}]"
            if not isinstance(qa, dict):
                fail(w, "expected an object")
            for key, kind in (("id", str), ("question", str), ("answers", list)):
                if not isinstance(qa.get(key), kind):
                    fail(w, f"missing {key!r} ({kind.__name__})")
            for a, ans in enumerate(qa["answers"]):
                if not isinstance(ans, dict) or not isinstance(ans.get("text"), str):
                    fail(f"{w}.answers[{a}]", "missing 'text' (a string)")
                if not isinstance(ans.get("answer_start"), int):
                    fail(f"{w}.answers[{a}]", "missing 'answer_start' (an integer)")


def read_examples(
    data: list[dict], is_training: bool, version_2_with_negative: bool
) -> list[SquadExample]:
    """Official ``data`` list -> examples. For training, answers that do not occur at their
    ``answer_start`` are skipped with a warning (Google skips answers it cannot recover)."""
    examples, skipped = [], 0
    for article in data:
        for para in article["paragraphs"]:
            context = para["context"]
            for qa in para["qas"]:
                impossible = bool(qa.get("is_impossible", False)) and version_2_with_negative
                answers = [] if impossible else qa["answers"]
                if is_training and not impossible:
                    if not answers:
                        raise SquadFormatError(
                            f"question {qa['id']!r} has no answer and is not is_impossible "
                            "(is this a v2.0 file without --version_2_with_negative?)"
                        )
                    answers = answers[:1]
                    start, text = answers[0]["answer_start"], answers[0]["text"]
                    if context[start : start + len(text)] != text or not text.strip():
                        skipped += 1
                        continue
                examples.append(
                    SquadExample(qa["id"], qa["question"], context, answers, impossible)
                )
    if skipped:
        logger.warning("skipped %d training questions whose answer text is not found", skipped)
    return examples


def filter_dataset(data: list[dict], qids: set[str]) -> list[dict]:
    """The official ``data`` list restricted to the questions ``qids`` (for subset evaluation)."""
    out = []
    for article in data:
        paragraphs = []
        for para in article["paragraphs"]:
            qas = [qa for qa in para["qas"] if qa["id"] in qids]
            if qas:
                paragraphs.append({**para, "qas": qas})
        if paragraphs:
            out.append({**article, "paragraphs": paragraphs})
    return out


# --------------------------------------------------------------------------------------------
# Windows and the max-context rule (Google's doc spans)
# --------------------------------------------------------------------------------------------


def doc_spans(num_tokens: int, max_tokens_for_doc: int, doc_stride: int) -> list[tuple[int, int]]:
    """Google's sliding windows: ``(start, length)``; starts ``doc_stride`` apart, the last
    window ends at the last token."""
    spans, start = [], 0
    while start < num_tokens:
        length = min(num_tokens - start, max_tokens_for_doc)
        spans.append((start, length))
        if start + length == num_tokens:
            break
        start += min(length, doc_stride)
    return spans


def is_max_context(spans: Sequence[tuple[int, int]], span_index: int, position: int) -> bool:
    """Is ``span_index`` the window where token ``position`` has the most context?

    Score of a window = min(left context, right context) + 0.01 * window length; the first
    window with the strictly highest score wins (Google's ``_check_is_max_context``).
    """
    best_score, best_index = None, None
    for index, (start, length) in enumerate(spans):
        end = start + length - 1
        if position < start or position > end:
            continue
        score = min(position - start, end - position) + 0.01 * length
        if best_score is None or score > best_score:
            best_score, best_index = score, index
    return span_index == best_index


def max_context_marks(spans: Sequence[tuple[int, int]]) -> list[np.ndarray]:
    """For each window, a boolean per window token: is this its max-context window?"""
    if len(spans) == 1:
        return [np.ones(spans[0][1], dtype=bool)]
    return [
        np.array([is_max_context(spans, k, start + i) for i in range(length)], dtype=bool)
        for k, (start, length) in enumerate(spans)
    ]


# --------------------------------------------------------------------------------------------
# Features
# --------------------------------------------------------------------------------------------


def _truncate_question(tokenizer, questions: list[str], max_query_length: int):
    """Cut each question after its ``max_query_length``-th token (by character offset, so the
    prefix re-tokenises to exactly those tokens); return (texts, token counts)."""
    enc = tokenizer(questions, add_special_tokens=False, return_offsets_mapping=True)
    texts, lengths = [], []
    for question, offsets in zip(questions, enc["offset_mapping"]):
        if len(offsets) > max_query_length:
            question = question[: offsets[max_query_length - 1][1]]
        texts.append(question)
        lengths.append(min(len(offsets), max_query_length))
    return texts, lengths


def _answer_token_span(doc_offsets: np.ndarray, start_char: int, end_char: int):
    """First token ending after ``start_char`` .. last token starting before ``end_char``."""
    first = bisect.bisect_right(doc_offsets[:, 1].tolist(), start_char)
    last = bisect.bisect_left(doc_offsets[:, 0].tolist(), end_char) - 1
    if first >= len(doc_offsets) or last < first:
        return None
    return first, last


def convert_examples_to_features(
    examples: Sequence[SquadExample],
    tokenizer,
    max_seq_length: int = 384,
    doc_stride: int = 128,
    max_query_length: int = 64,
    is_training: bool = False,
) -> list[dict]:
    """Examples -> one feature dict per window, in example order.

    Every feature has ``input_ids``, ``token_type_ids``, ``attention_mask``, ``example_index``,
    ``doc_span_index``; training features have ``start_positions``/``end_positions`` ([CLS] = 0
    when the window lacks the answer or the question has none); prediction features have
    ``offsets`` (an ``(n, 2)`` int array of character spans, -1 outside the passage) and
    ``max_context`` (a boolean per position).
    """
    if max_seq_length <= max_query_length + 3:
        raise ValueError("max_seq_length must be greater than max_query_length + 3")
    questions, q_lens = _truncate_question(
        tokenizer, [e.question for e in examples], max_query_length
    )
    # The tokenizer's stride (window overlap) depends on the question length: group by it.
    groups: dict[int, list[int]] = {}
    for index, q_len in enumerate(q_lens):
        groups.setdefault(q_len, []).append(index)
    per_example: list[list[dict]] = [[] for _ in examples]
    unmappable = 0
    for q_len, indices in groups.items():
        max_tokens_for_doc = max_seq_length - q_len - 3
        stride = max(0, max_tokens_for_doc - doc_stride)
        enc = tokenizer(
            [questions[i] for i in indices],
            [examples[i].context for i in indices],
            truncation="only_second",
            max_length=max_seq_length,
            stride=stride,
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
        )
        windows: dict[int, list[int]] = {}
        for w, sample in enumerate(enc["overflow_to_sample_mapping"]):
            windows.setdefault(indices[sample], []).append(w)
        for ex_index, ws in windows.items():
            feats = _example_features(
                examples[ex_index],
                ex_index,
                enc,
                ws,
                q_len,
                max_tokens_for_doc,
                doc_stride,
                is_training,
            )
            if feats is None:
                unmappable += 1
                continue
            per_example[ex_index] = feats
    if unmappable:
        logger.warning("skipped %d training questions whose answer maps to no token", unmappable)
    return [f for feats in per_example for f in feats]


def _example_features(
    example, ex_index, enc, ws, q_len, max_tokens_for_doc, doc_stride, is_training
):
    seq_ids = [enc.sequence_ids(w) for w in ws]
    doc_pos = [[i for i, s in enumerate(ids) if s == 1] for ids in seq_ids]
    # Check that the tokenizer's windows are Google's: same count, lengths and overlaps.
    lengths = [len(p) for p in doc_pos]
    num_doc = (len(ws) - 1) * min(doc_stride, max_tokens_for_doc) + lengths[-1]
    spans = doc_spans(num_doc, max_tokens_for_doc, doc_stride) if num_doc else [(0, 0)]
    if [n for _, n in spans] != lengths:
        raise RuntimeError(
            f"question {example.qas_id}: tokenizer windows {lengths} differ from "
            f"doc_stride windows {spans}"
        )
    doc_offsets = np.full((num_doc, 2), -1, dtype=np.int64)
    for (start, length), w, pos in zip(spans, ws, doc_pos):
        win = np.asarray([enc["offset_mapping"][w][i] for i in pos], dtype=np.int64).reshape(-1, 2)
        done = doc_offsets[start : start + length]
        if (done[:, 0] >= 0).any() and not (done[done[:, 0] >= 0] == win[done[:, 0] >= 0]).all():
            raise RuntimeError(f"question {example.qas_id}: overlapping windows disagree")
        doc_offsets[start : start + length] = win
    answer = None
    if is_training and not example.is_impossible:
        a = example.answers[0]
        answer = _answer_token_span(
            doc_offsets, a["answer_start"], a["answer_start"] + len(a["text"])
        )
        if answer is None:
            return None
    marks = max_context_marks(spans) if num_doc else [np.zeros(0, dtype=bool)]
    feats = []
    for k, ((start, length), w, pos) in enumerate(zip(spans, ws, doc_pos)):
        n = len(enc["input_ids"][w])
        first = pos[0] if pos else q_len + 2
        if pos and first != q_len + 2:
            raise RuntimeError(f"question {example.qas_id}: passage starts at {first}")
        feat = {
            "input_ids": enc["input_ids"][w],
            "token_type_ids": enc["token_type_ids"][w],
            "attention_mask": enc["attention_mask"][w],
            "example_index": ex_index,
            "doc_span_index": k,
        }
        if is_training:
            s_pos = e_pos = 0
            if answer is not None and answer[0] >= start and answer[1] <= start + length - 1:
                s_pos, e_pos = answer[0] - start + first, answer[1] - start + first
            feat["start_positions"], feat["end_positions"] = s_pos, e_pos
        else:
            offsets = np.full((n, 2), -1, dtype=np.int32)
            offsets[first : first + length] = doc_offsets[start : start + length]
            max_ctx = np.zeros(n, dtype=bool)
            max_ctx[first : first + length] = marks[k]
            feat["offsets"], feat["max_context"] = offsets, max_ctx
        feats.append(feat)
    return feats


# --------------------------------------------------------------------------------------------
# Post-processing (Google's write_predictions)
# --------------------------------------------------------------------------------------------


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
    examples: Sequence[SquadExample],
    features: Sequence[dict],
    start_logits: Sequence[np.ndarray],
    end_logits: Sequence[np.ndarray],
    n_best_size: int = 20,
    max_answer_length: int = 30,
    version_2_with_negative: bool = False,
    null_score_diff_threshold: float = 0.0,
) -> SquadPredictions:
    """Window logits -> answers, n-best lists and null odds (Google's ``write_predictions``)."""
    by_example: dict[int, list[int]] = {}
    for f_index, feat in enumerate(features):
        by_example.setdefault(feat["example_index"], []).append(f_index)
    predictions, nbest_all, null_odds, non_null, spans = {}, {}, {}, {}, {}
    for ex_index, example in enumerate(examples):
        prelim = []  # (score, feature, start, end, start_logit, end_logit)
        score_null, null_feature, null_start, null_end = 1e6, None, 0.0, 0.0
        for f_index in by_example.get(ex_index, []):
            feat = features[f_index]
            starts, ends = start_logits[f_index], end_logits[f_index]
            if version_2_with_negative:
                feature_null = float(starts[0]) + float(ends[0])
                if feature_null < score_null:
                    score_null, null_feature = feature_null, f_index
                    null_start, null_end = float(starts[0]), float(ends[0])
            offsets, max_ctx = feat["offsets"], feat["max_context"]
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
                offsets = features[f_index]["offsets"]
                span = (int(offsets[s, 0]), int(offsets[e, 1]))
                text = example.context[span[0] : span[1]]
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
        nbest_all[example.qas_id] = nbest_json
        best = next((n for n in nbest if n["text"]), None)
        if best is not None:
            spans[example.qas_id] = best["span"]
        if not version_2_with_negative:
            predictions[example.qas_id] = nbest_json[0]["text"]
            continue
        if best is None:  # no valid span at all (Google would fail here)
            diff, best_text = NO_VALID_SPAN_ODDS, ""
        else:
            diff = score_null - best["start_logit"] - best["end_logit"]
            best_text = best["text"]
        null_odds[example.qas_id] = diff
        non_null[example.qas_id] = best_text
        predictions[example.qas_id] = "" if diff > null_score_diff_threshold else best_text
    return SquadPredictions(
        predictions, nbest_all, null_odds, non_null, null_score_diff_threshold, spans
    )


def apply_threshold(preds: SquadPredictions, tau: float) -> dict[str, str]:
    """v2.0 answers at another tau, from the null odds and the best non-null answers."""
    return {q: "" if preds.null_odds[q] > tau else t for q, t in preds.non_null.items()}


# --------------------------------------------------------------------------------------------
# Evaluation and output files
# --------------------------------------------------------------------------------------------


def evaluate_predictions(
    data: list[dict], preds: SquadPredictions, version_2_with_negative: bool
) -> dict[str, Any]:
    """Official metrics. v1.1: ``{"eval": {exact_match, f1}}``. v2.0: ``"eval"`` at the tau in
    force, ``"tau0"`` at tau = 0 and ``"tuned"`` at ``"tuned_tau"`` (:func:`tune_tau`), each the dict the
    official v2.0 script prints (with ``--na-prob-file null_odds.json -t tau`` on the best
    non-null answers: the same exact/f1 as ``predictions.json``, and thresholds scored exactly).
    """
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


def write_prediction_files(
    output_dir: str | Path, preds: SquadPredictions, results: dict[str, dict] | None = None
) -> None:
    """predictions.json, nbest_predictions.json, null_odds.json (v2.0) and eval_results.json;
    v2.0 also predictions/eval results at the tuned tau. Each file is written atomically."""
    from modeling import atomic

    out = Path(output_dir)
    atomic.write_json(out / "predictions.json", preds.predictions, indent=4)
    atomic.write_json(out / "nbest_predictions.json", preds.nbest, indent=4)
    if preds.null_odds:
        atomic.write_json(out / "null_odds.json", preds.null_odds, indent=4)
    if results:
        atomic.write_json(out / "eval_results.json", results["eval"])
        if "tuned" in results:
            tau = results["tuned_tau"]
            atomic.write_json(
                out / "predictions_tuned_tau.json", apply_threshold(preds, tau), indent=4
            )
            atomic.write_json(out / "eval_results_tuned_tau.json", {"tau": tau, **results["tuned"]})
            if results["tau0"] is not results["eval"]:
                atomic.write_json(out / "eval_results_tau0.json", results["tau0"])


def flat_metrics(results: dict[str, dict]) -> dict[str, float]:
    """One flat dict for logs and grid search: ``f1``/``exact`` at the tau in force, plus
    ``tau0_*`` and ``tuned_*`` for v2.0."""
    main = dict(results["eval"])
    if "exact_match" in main:
        main["exact"] = main.pop("exact_match")
    out = dict(main)
    for name in ("tau0", "tuned"):
        if name in results and results[name] is not results["eval"]:
            out.update(
                {f"{name}_{k}": v for k, v in results[name].items() if not k.startswith("best")}
            )
    if "tuned_tau" in results:
        out["tuned_tau"] = results["tuned_tau"]
    return out


# --------------------------------------------------------------------------------------------
# Model-level helpers
# --------------------------------------------------------------------------------------------


def model_tau(model, override: float | None) -> float:
    """tau in force: the explicit value, else the model config's, else 0.0."""
    if override is not None:
        return float(override)
    return float(getattr(model.config, "null_score_diff_threshold", None) or 0.0)


def predict_examples(
    model,
    tokenizer,
    examples: Sequence[SquadExample],
    data_args: SquadArguments,
    batch_size: int = 64,
    features: Sequence[dict] | None = None,
    disable_tqdm: bool = False,
) -> SquadPredictions:
    """Window, run the model, post-process: examples -> :class:`SquadPredictions`."""
    from .finetune import predict

    if features is None:
        features = convert_examples_to_features(
            examples,
            tokenizer,
            data_args.max_seq_length,
            data_args.doc_stride,
            data_args.max_query_length,
            is_training=False,
        )
    out = predict(
        model, features, batch_size, ("start_logits", "end_logits"), disable_tqdm=disable_tqdm
    )
    return postprocess(
        examples,
        features,
        out["start_logits"],
        out["end_logits"],
        n_best_size=data_args.n_best_size,
        max_answer_length=data_args.max_answer_length,
        version_2_with_negative=data_args.version_2_with_negative,
        null_score_diff_threshold=model_tau(model, data_args.null_score_diff_threshold),
    )


class QuestionAnsweringPipeline:
    """Question + context of any length -> answer, or "" (no answer) with the model's tau.

    ``QuestionAnsweringPipeline.from_pretrained(folder)("Who?", long_text)`` returns a dict with
    ``answer``, ``score`` (best span start + end logit), ``null_odds`` (v2.0), ``start``/``end``
    (character offsets into the context, -1 for no answer) and ``n_best``. Whether no-answer is
    possible and tau come from the model config (``version_2_with_negative``,
    ``null_score_diff_threshold``) unless given.
    """

    def __init__(self, model, tokenizer, data_args: SquadArguments | None = None, **overrides):
        self.model, self.tokenizer = model.eval(), tokenizer
        if data_args is None:
            # the window settings the model was fine-tuned with, when it saved them
            saved = dict(getattr(model.config, "squad_window", None) or {})
            saved["version_2_with_negative"] = bool(
                getattr(model.config, "version_2_with_negative", False)
            )
            data_args = SquadArguments(**{**saved, **overrides})
        else:
            data_args = dataclasses.replace(data_args, **overrides)
        limit = model.config.max_position_embeddings
        if data_args.max_seq_length > limit:
            raise ValueError(f"max_seq_length {data_args.max_seq_length} > the model's {limit}")
        self.args = data_args

    @classmethod
    def from_pretrained(cls, path: str | Path, **overrides) -> QuestionAnsweringPipeline:
        from modeling import BertForQuestionAnswering

        from .finetune import load_tokenizer

        model_args = ModelArguments(model_name_or_path=str(path))
        model = BertForQuestionAnswering.from_pretrained(str(path))
        return cls(model, load_tokenizer(model_args), **overrides)

    def __call__(self, question: str, context: str) -> dict[str, Any]:
        example = SquadExample("q", question, context, [], False)
        preds = predict_examples(
            self.model, self.tokenizer, [example], self.args, disable_tqdm=True
        )
        answer, nbest = preds.predictions["q"], preds.nbest["q"]
        best = next((n for n in nbest if n["text"] == answer), nbest[0])
        start, end = preds.spans.get("q", (-1, -1)) if answer else (-1, -1)
        return {
            "answer": answer,
            "score": best["start_logit"] + best["end_logit"],
            "null_odds": preds.null_odds.get("q"),
            "tau": preds.tau,
            "start": start,
            "end": end,
            "n_best": nbest,
        }


# --------------------------------------------------------------------------------------------
# The recipe
# --------------------------------------------------------------------------------------------


def load_train_examples(data_args: SquadArguments, max_samples: int | None) -> list[SquadExample]:
    examples = []
    for spec in data_args.train_file:
        data, _ = load_squad_file(spec)
        examples += read_examples(data, True, data_args.version_2_with_negative)
    if max_samples is not None and max_samples < len(examples):
        # Google shuffles the training questions with Random(12345); a subset is their head
        random.Random(data_args.train_sample_seed).shuffle(examples)
        examples = examples[:max_samples]
    return examples


def load_eval_set(data_args: SquadArguments, max_samples: int | None):
    """(official data restricted to the evaluated questions, examples)."""
    data, version = load_squad_file(data_args.validation_file)
    if version.startswith("v2") and not data_args.version_2_with_negative:
        logger.warning(
            "%s is SQuAD %s: did you mean --version_2_with_negative?",
            data_args.validation_file,
            version,
        )
    examples = read_examples(data, False, data_args.version_2_with_negative)
    if max_samples is not None and max_samples < len(examples):
        examples = examples[:max_samples]
        data = filter_dataset(data, {e.qas_id for e in examples})
    return data, examples


def _describe(name: str, examples, features) -> None:
    lengths = [len(f["input_ids"]) for f in features]
    logger.info(
        "%s: %d questions -> %d windows (%d questions split), mean %.1f tokens",
        name,
        len(examples),
        len(features),
        len({f["example_index"] for f in features if f["doc_span_index"] > 0}),
        sum(lengths) / max(1, len(lengths)),
    )


def run(
    model_args: ModelArguments, data_args: SquadArguments, args: TrainingArguments
) -> dict[str, Any]:
    """Fine-tune and/or evaluate on SQuAD; with grids, pick on dev F1 (the paper's protocol)."""
    from modeling import BertForQuestionAnswering

    from .finetune import (
        grid_search,
        load_model,
        load_tokenizer,
        save_model,
        set_seed,
        train,
        write_results,
    )

    if args.do_train and not data_args.train_file:
        raise UsageError("--do_train needs --train_file")
    if args.do_eval and not data_args.validation_file:
        raise UsageError("--do_eval needs --validation_file")
    tokenizer = load_tokenizer(model_args)
    window = (data_args.max_seq_length, data_args.doc_stride, data_args.max_query_length)
    train_features = None
    if args.do_train:
        train_examples = load_train_examples(data_args, args.max_train_samples)
        train_features = convert_examples_to_features(
            train_examples, tokenizer, *window, is_training=True
        )
        _describe("train", train_examples, train_features)
    eval_data = eval_examples = eval_features = None
    if args.do_eval:
        eval_data, eval_examples = load_eval_set(data_args, args.max_eval_samples)
        eval_features = convert_examples_to_features(
            eval_examples, tokenizer, *window, is_training=False
        )
        _describe("dev", eval_examples, eval_features)

    def run_one(run_args: TrainingArguments) -> dict[str, float]:
        out_dir = Path(run_args.output_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        set_seed(run_args.seed)  # the new QA head's initialisation
        model = load_model(BertForQuestionAnswering, model_args)
        metrics: dict[str, float] = {}
        if train_features is not None:
            result = train(model, train_features, run_args, label_keys=LABEL_KEYS)
            metrics.update(result.summary(), train_windows=len(train_features))
            write_results(out_dir, "train_results.json", dataclasses.asdict(result))
        model = getattr(model, "module", model)
        extra = {
            "version_2_with_negative": data_args.version_2_with_negative,
            "squad_window": {k: getattr(data_args, k) for k in WINDOW_KEYS},
        }
        if eval_examples is not None:
            import time

            start = time.perf_counter()
            preds = predict_examples(
                model,
                tokenizer,
                eval_examples,
                data_args,
                run_args.per_device_eval_batch_size,
                features=eval_features,
                disable_tqdm=run_args.disable_tqdm,
            )
            results = evaluate_predictions(eval_data, preds, data_args.version_2_with_negative)
            write_prediction_files(out_dir, preds, results)
            metrics.update(flat_metrics(results), eval_runtime=time.perf_counter() - start)
            if "tuned" in results:
                extra["null_score_diff_threshold"] = results["tuned_tau"]
            logger.info("dev: %s", {k: round(v, 3) for k, v in metrics.items()})
        write_results(out_dir, "all_results.json", metrics)
        if run_args.save_model and train_features is not None:
            save_model(model, tokenizer, out_dir / "model", extra_config=extra)
        return metrics

    if args.learning_rate_grid or args.batch_size_grid or args.num_train_epochs_grid or args.seeds:
        if not args.do_eval:
            raise UsageError("a grid search picks on dev: it needs --do_eval")
        summary = grid_search(args, run_one, "f1")
        return {"grid": summary, "metrics": summary["best_setting"]}
    return {"metrics": run_one(args)}
