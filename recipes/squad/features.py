"""SQuAD windows as ``datasets.map(batched=True)`` functions (Google's ``run_squad.py`` features).

* the question is segment A (cut to ``max_query_length`` tokens), the passage segment B; a
  passage longer than ``max_seq_length - len(question) - 3`` tokens is cut into windows whose
  starts are ``doc_stride`` tokens apart (Google's ``doc_stride`` is the *step* between windows);
* each passage token is scored only in the window where it has the most context,
  ``min(left, right) + 0.01 * window length`` (Google's ``_check_is_max_context``);
* answers are mapped from characters to tokens through the fast tokenizer's offsets; a training
  window that does not contain the whole answer, and every window of an unanswerable v2.0
  question, targets [CLS] (position 0).

Windows come from the fast tokenizer (``return_overflowing_tokens``). Its ``stride`` is the
*overlap* between consecutive windows, so for each question we pass
``stride = max(0, max_tokens_for_doc - doc_stride)``: the windows are then exactly Google's
(checked at run time). For training, a question with several gold answers uses the first.

:func:`prepare_features` maps a batch of question rows (:mod:`recipes.squad.data`) to windows:
``input_ids``, ``token_type_ids``, ``attention_mask``, ``example_id``, ``doc_span_index``, and
either ``start_positions``/``end_positions`` (training) or ``offset_mapping`` (character span per
token, ``[-1, -1]`` outside the passage) and ``max_context`` (0/1 per token) for prediction.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Sequence

import numpy as np

logger = logging.getLogger(__name__)

# bump when the features change meaning: part of the datasets cache key
FEATURES_VERSION = 1


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


TRAIN_COLUMNS = (
    "input_ids",
    "token_type_ids",
    "attention_mask",
    "start_positions",
    "end_positions",
)
EVAL_COLUMNS = (
    "input_ids",
    "token_type_ids",
    "attention_mask",
    "example_id",
    "doc_span_index",
    "offset_mapping",
    "max_context",
)


def prepare_features(
    batch: dict[str, list],
    tokenizer,
    max_seq_length: int = 384,
    doc_stride: int = 128,
    max_query_length: int = 64,
    is_training: bool = False,
) -> dict[str, list]:
    """A batch of question rows (``id``, ``question``, ``context``, ``answers``,
    ``is_impossible``) -> one row per window, in question order (see the module docstring).
    Training questions whose answer maps to no token are dropped with a warning."""
    if max_seq_length <= max_query_length + 3:
        raise ValueError("max_seq_length must be greater than max_query_length + 3")
    n = len(batch["id"])
    questions, q_lens = _truncate_question(tokenizer, list(batch["question"]), max_query_length)
    impossible = batch.get("is_impossible") or [not a["text"] for a in batch["answers"]]
    # The tokenizer's stride (window overlap) depends on the question length: group by it.
    groups: dict[int, list[int]] = {}
    for index, q_len in enumerate(q_lens):
        groups.setdefault(q_len, []).append(index)
    per_example: list[list[dict]] = [[] for _ in range(n)]
    unmappable = 0
    for q_len, indices in groups.items():
        max_tokens_for_doc = max_seq_length - q_len - 3
        stride = max(0, max_tokens_for_doc - doc_stride)
        enc = tokenizer(
            [questions[i] for i in indices],
            [batch["context"][i] for i in indices],
            truncation="only_second",
            max_length=max_seq_length,
            stride=stride,
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
            return_token_type_ids=True,
        )
        windows: dict[int, list[int]] = {}
        for w, sample in enumerate(enc["overflow_to_sample_mapping"]):
            windows.setdefault(indices[sample], []).append(w)
        for i, ws in windows.items():
            answer = None
            if is_training and not impossible[i]:
                answers = batch["answers"][i]
                start = answers["answer_start"][0]
                answer = (start, start + len(answers["text"][0]))
            feats = _example_features(
                batch["id"][i], enc, ws, q_len, max_tokens_for_doc, doc_stride, answer, is_training
            )
            if feats is None:
                unmappable += 1
                continue
            per_example[i] = feats
    if unmappable:
        logger.warning("skipped %d training questions whose answer maps to no token", unmappable)
    columns = TRAIN_COLUMNS if is_training else EVAL_COLUMNS
    rows = [f for feats in per_example for f in feats]
    return {key: [f[key] for f in rows] for key in columns}


def _example_features(qas_id, enc, ws, q_len, max_tokens_for_doc, doc_stride, answer, is_training):
    seq_ids = [enc.sequence_ids(w) for w in ws]
    doc_pos = [[i for i, s in enumerate(ids) if s == 1] for ids in seq_ids]
    # Check that the tokenizer's windows are Google's: same count, lengths and overlaps.
    lengths = [len(p) for p in doc_pos]
    num_doc = (len(ws) - 1) * min(doc_stride, max_tokens_for_doc) + lengths[-1]
    spans = doc_spans(num_doc, max_tokens_for_doc, doc_stride) if num_doc else [(0, 0)]
    if [n for _, n in spans] != lengths:
        raise RuntimeError(
            f"question {qas_id}: tokenizer windows {lengths} differ from doc_stride windows {spans}"
        )
    doc_offsets = np.full((num_doc, 2), -1, dtype=np.int64)
    for (start, length), w, pos in zip(spans, ws, doc_pos):
        win = np.asarray([enc["offset_mapping"][w][i] for i in pos], dtype=np.int64).reshape(-1, 2)
        done = doc_offsets[start : start + length]
        if (done[:, 0] >= 0).any() and not (done[done[:, 0] >= 0] == win[done[:, 0] >= 0]).all():
            raise RuntimeError(f"question {qas_id}: overlapping windows disagree")
        doc_offsets[start : start + length] = win
    if answer is not None:
        answer = _answer_token_span(doc_offsets, *answer)
        if answer is None:
            return None
    marks = max_context_marks(spans) if num_doc else [np.zeros(0, dtype=bool)]
    feats = []
    for k, ((start, length), w, pos) in enumerate(zip(spans, ws, doc_pos)):
        n = len(enc["input_ids"][w])
        first = pos[0] if pos else q_len + 2
        if pos and first != q_len + 2:
            raise RuntimeError(f"question {qas_id}: passage starts at {first}")
        feat = {
            "input_ids": enc["input_ids"][w],
            "token_type_ids": enc["token_type_ids"][w],
            "attention_mask": enc["attention_mask"][w],
            "example_id": qas_id,
            "doc_span_index": k,
        }
        if is_training:
            s_pos = e_pos = 0
            if answer is not None and answer[0] >= start and answer[1] <= start + length - 1:
                s_pos, e_pos = answer[0] - start + first, answer[1] - start + first
            feat["start_positions"], feat["end_positions"] = s_pos, e_pos
        else:
            offsets = np.full((n, 2), -1, dtype=np.int64)
            offsets[first : first + length] = doc_offsets[start : start + length]
            max_ctx = np.zeros(n, dtype=np.int8)
            max_ctx[first : first + length] = marks[k]
            feat["offset_mapping"], feat["max_context"] = offsets.tolist(), max_ctx.tolist()
        feats.append(feat)
    return feats


def feature_types(is_training: bool):
    """Compact Arrow types for the window columns."""
    import datasets

    ids = datasets.Sequence(datasets.Value("int32"))
    small = datasets.Sequence(datasets.Value("int8"))
    if is_training:
        return datasets.Features(
            {
                "input_ids": ids,
                "token_type_ids": small,
                "attention_mask": small,
                "start_positions": datasets.Value("int32"),
                "end_positions": datasets.Value("int32"),
            }
        )
    return datasets.Features(
        {
            "input_ids": ids,
            "token_type_ids": small,
            "attention_mask": small,
            "example_id": datasets.Value("string"),
            "doc_span_index": datasets.Value("int32"),
            "offset_mapping": datasets.Sequence(datasets.Sequence(datasets.Value("int32"))),
            "max_context": small,
        }
    )
