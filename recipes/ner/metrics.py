"""Entity-level precision, recall and F1 exactly as the CoNLL ``conlleval`` Perl script.

The script reads one token per line (``... gold predicted``) and walks the tags with two small
state machines (``startOfChunk`` / ``endOfChunk``). A predicted chunk counts as correct only when
it starts and ends at the same tokens as a gold chunk and has the same type. Ill-formed sequences
(an ``I-X`` after ``O`` or after ``I-Y``) are handled as the script does: the ``I-X`` opens a new
chunk. Sentence boundaries act as an ``O`` token. This module follows the script line by line
(``conlleval`` v2004-01-26, default options, not ``-r``), so its numbers match it digit for digit;
``tests/test_ner.py`` checks it against ``seqeval`` (default, conlleval-compatible mode) on random
and hand-made sequences.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field


def _split(tag: str) -> tuple[str, str]:
    # conlleval: /^([^-]*)-(.*)$/ -> (prefix, type); anything else has an empty type
    if "-" in tag:
        prefix, kind = tag.split("-", 1)
        return prefix, kind
    return tag, ""


def end_of_chunk(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    """conlleval ``endOfChunk``: does a chunk end between the previous token and this one?"""
    end = (
        (prev_tag == "B" and tag == "B")
        or (prev_tag == "B" and tag == "O")
        or (prev_tag == "I" and tag == "B")
        or (prev_tag == "I" and tag == "O")
        or (prev_tag == "E" and tag == "E")
        or (prev_tag == "E" and tag == "I")
        or (prev_tag == "E" and tag == "O")
    )
    if prev_tag != "O" and prev_tag != "." and prev_type != type_:
        end = True
    # conlleval: chunks marked [ or ] have length 1
    return end or prev_tag in ("]", "[")


def start_of_chunk(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    """conlleval ``startOfChunk``: does a chunk start at this token?"""
    start = (
        (prev_tag == "B" and tag == "B")
        or (prev_tag == "I" and tag == "B")
        or (prev_tag == "O" and tag == "B")
        or (prev_tag == "O" and tag == "I")
        or (prev_tag == "E" and tag == "E")
        or (prev_tag == "E" and tag == "I")
        or (prev_tag == "O" and tag == "E")
    )
    if tag != "O" and tag != "." and prev_type != type_:
        start = True
    return start or tag in ("[", "]")


@dataclass
class ChunkCounts:
    """The counters conlleval keeps (overall and per entity type)."""

    correct_chunk: Counter = field(default_factory=Counter)
    found_correct: Counter = field(default_factory=Counter)
    found_guessed: Counter = field(default_factory=Counter)
    correct_tags: int = 0
    token_counter: int = 0


def count_chunks(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> ChunkCounts:
    """Run conlleval's per-token loop over sentences of (gold, predicted) tags."""
    if len(gold) != len(pred):
        raise ValueError(f"{len(gold)} gold sentences but {len(pred)} predicted")
    counts = ChunkCounts()
    in_correct = False
    last_correct, last_correct_type = "O", ""
    last_guessed, last_guessed_type = "O", ""
    for index, (gold_tags, pred_tags) in enumerate(zip(gold, pred)):
        if len(gold_tags) != len(pred_tags):
            raise ValueError(
                f"sentence {index}: {len(gold_tags)} gold tags but {len(pred_tags)} predicted"
            )
        # each sentence is followed by a boundary line, which conlleval reads as tag O/O
        items = [(g, p, True) for g, p in zip(gold_tags, pred_tags)] + [("O", "O", False)]
        for gold_tag, pred_tag, is_token in items:
            correct, correct_type = _split(gold_tag)
            guessed, guessed_type = _split(pred_tag)
            end_c = end_of_chunk(last_correct, correct, last_correct_type, correct_type)
            end_g = end_of_chunk(last_guessed, guessed, last_guessed_type, guessed_type)
            start_c = start_of_chunk(last_correct, correct, last_correct_type, correct_type)
            start_g = start_of_chunk(last_guessed, guessed, last_guessed_type, guessed_type)
            if in_correct:
                if end_c and end_g and last_guessed_type == last_correct_type:
                    in_correct = False
                    counts.correct_chunk[last_correct_type] += 1
                elif end_c != end_g or guessed_type != correct_type:
                    in_correct = False
            if start_c and start_g and guessed_type == correct_type:
                in_correct = True
            if start_c:
                counts.found_correct[correct_type] += 1
            if start_g:
                counts.found_guessed[guessed_type] += 1
            if is_token:
                if correct == guessed and guessed_type == correct_type:
                    counts.correct_tags += 1
                counts.token_counter += 1
            last_guessed, last_guessed_type = guessed, guessed_type
            last_correct, last_correct_type = correct, correct_type
    if in_correct:
        counts.correct_chunk[last_correct_type] += 1
    return counts


def _prf(correct: int, guessed: int, gold: int) -> dict[str, float]:
    precision = 100.0 * correct / guessed if guessed else 0.0
    recall = 100.0 * correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def conlleval(gold: Sequence[Sequence[str]], pred: Sequence[Sequence[str]]) -> dict:
    """Overall and per-type precision/recall/F1 (percentages) and token accuracy, as conlleval.

    Returns ``{"precision", "recall", "f1", "accuracy", "found_gold", "found_guessed",
    "correct", "per_type": {type: {"precision", "recall", "f1", "found_gold",
    "found_guessed", "correct"}}}``.
    """
    c = count_chunks(gold, pred)
    n_correct = sum(c.correct_chunk.values())
    n_guessed = sum(c.found_guessed.values())
    n_gold = sum(c.found_correct.values())
    result = {
        **_prf(n_correct, n_guessed, n_gold),
        "accuracy": 100.0 * c.correct_tags / c.token_counter if c.token_counter else 0.0,
        "tokens": c.token_counter,
        "found_gold": n_gold,
        "found_guessed": n_guessed,
        "correct": n_correct,
    }
    types = sorted(set(c.found_correct) | set(c.found_guessed))
    result["per_type"] = {
        t: {
            **_prf(c.correct_chunk[t], c.found_guessed[t], c.found_correct[t]),
            "found_gold": c.found_correct[t],
            "found_guessed": c.found_guessed[t],
            "correct": c.correct_chunk[t],
        }
        for t in types
    }
    return result


def format_report(result: dict) -> str:
    """The summary conlleval prints: totals, then one line per entity type."""
    lines = [
        f"processed {result['tokens']} tokens with {result['found_gold']} phrases; "
        f"found: {result['found_guessed']} phrases; correct: {result['correct']}.",
        f"accuracy: {result['accuracy']:6.2f}%; precision: {result['precision']:6.2f}%; "
        f"recall: {result['recall']:6.2f}%; FB1: {result['f1']:6.2f}",
    ]
    for kind, r in result["per_type"].items():
        lines.append(
            f"{kind:>17}: precision: {r['precision']:6.2f}%; recall: {r['recall']:6.2f}%; "
            f"FB1: {r['f1']:6.2f}  {r['found_guessed']}"
        )
    return "\n".join(lines)
