"""Masking collators for BERT pretraining.

Every collator is a callable taking a list of examples (dicts holding at least ``input_ids``;
optionally ``token_type_ids``, ``attention_mask``, ``next_sentence_label``, ``labels``,
``special_tokens_mask``, ``word_ids`` or ``offset_mapping``) and returning a dict of padded
``torch.long`` tensors: ``input_ids``, ``token_type_ids``, ``attention_mask``, ``labels`` and
``next_sentence_label`` when the examples carry it.

Strategies (``build_collator(strategy, tokenizer, **kwargs)``):

* ``"token"``      -- :class:`TokenMaskingCollator`, the paper's Masked LM: each ordinary token
  is selected with ``mlm_probability``.
* ``"whole_word"`` -- :class:`WholeWordMaskingCollator`: words are selected as units, so every
  selected word has all its pieces selected. Words come from WordPiece ``##`` continuations, or
  from ``word_ids`` / ``offset_mapping`` in the examples for other tokenizers.
* ``"span"``       -- :class:`SpanMaskingCollator`: SpanBERT spans of whole words with
  geometric lengths (p=0.2, clipped at 10) until the masking budget is spent.
* ``"static"``     -- :class:`StaticMaskingCollator`: pass-through for data masked offline
  (``labels`` already in the examples); it only pads.

The shared base (:class:`MaskingCollator`) holds everything common once: padding, the
special-token exclusion, ``labels = -100`` outside the selection, the mask/random/keep draw and
the random-token pool (ordinary vocabulary only: no special tokens, no ``[unusedN]`` slots).

Selection rules (base class):

* ``selection="bernoulli"`` (default, as in ``transformers``): every candidate is selected
  independently with ``mlm_probability``.
* ``selection="exact"`` (as Google's ``create_pretraining_data.py``): exactly
  ``round(n * mlm_probability)`` tokens per sequence in random order. Deviation from Google:
  ``n`` counts only maskable tokens (Google counts [CLS]/[SEP] too, which inflates the rate
  on short sequences).
* In both modes at least one unit is selected in every sequence that has a maskable token,
  and ``max_predictions_per_seq`` caps the number of selected tokens (whole units only).

Reproducibility: pass ``seed`` (or an explicit ``generator``). With a seed, every dataloader
worker and every distributed process draws from its own stream, derived from
``(seed, rank, worker_id)``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from itertools import chain
from typing import Any

import numpy as np
import torch

__all__ = [
    "MaskingCollator",
    "TokenMaskingCollator",
    "WholeWordMaskingCollator",
    "SpanMaskingCollator",
    "StaticMaskingCollator",
    "build_collator",
    "COLLATOR_STRATEGIES",
]

_UNUSED_TOKEN = re.compile(r"^\[[^\]]+\]$|^<[^>]+>$")


def _distributed_rank() -> int:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank()
    return int(os.environ.get("RANK", "0"))


def _worker_id() -> int:
    info = torch.utils.data.get_worker_info()
    return 0 if info is None else info.id


def _stream_seed(seed: int, rank: int, worker: int) -> int:
    """Mix seed, process rank and worker id into one 63-bit seed (splitmix64 steps)."""
    x = seed & 0xFFFFFFFFFFFFFFFF
    for part in (rank + 1, worker + 1):
        x = (x ^ (part * 0x9E3779B97F4A7C15)) & 0xFFFFFFFFFFFFFFFF
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        x ^= x >> 31
    return x & 0x7FFFFFFFFFFFFFFF


class MaskingCollator:
    """Base class: padding, special-token exclusion, the mask/random/keep split, labels.

    Subclasses implement :meth:`select` (which positions are predicted). Arguments follow
    ``transformers.DataCollatorForLanguageModeling``; the mask/random/keep split may be any
    split with ``mask_replace_prob + random_replace_prob <= 1`` (the rest stays unchanged).
    """

    def __init__(
        self,
        tokenizer: Any,
        mlm_probability: float = 0.15,
        mask_replace_prob: float = 0.8,
        random_replace_prob: float = 0.1,
        max_predictions_per_seq: int | None = None,
        pad_to_multiple_of: int | None = None,
        selection: str = "bernoulli",
        seed: int | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        if not 0.0 < mlm_probability < 1.0:
            raise ValueError(f"mlm_probability must be in (0, 1), got {mlm_probability}")
        for name, value in (
            ("mask_replace_prob", mask_replace_prob),
            ("random_replace_prob", random_replace_prob),
        ):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {value}")
        if mask_replace_prob + random_replace_prob > 1.0 + 1e-9:
            raise ValueError(
                "mask_replace_prob + random_replace_prob must be <= 1, got "
                f"{mask_replace_prob} + {random_replace_prob}"
            )
        if selection not in ("bernoulli", "exact"):
            raise ValueError(f"selection must be 'bernoulli' or 'exact', got {selection!r}")
        if max_predictions_per_seq is not None and max_predictions_per_seq < 1:
            raise ValueError(f"max_predictions_per_seq must be >= 1, got {max_predictions_per_seq}")
        if tokenizer.mask_token_id is None and mask_replace_prob > 0:
            raise ValueError("the tokenizer has no mask token ([MASK]); masked LM needs one")
        if tokenizer.pad_token_id is None:
            raise ValueError("the tokenizer has no padding token ([PAD])")
        self.tokenizer = tokenizer
        self.mlm_probability = float(mlm_probability)
        self.mask_replace_prob = float(mask_replace_prob)
        self.random_replace_prob = float(random_replace_prob)
        self.max_predictions_per_seq = max_predictions_per_seq
        self.pad_to_multiple_of = pad_to_multiple_of
        self.selection = selection
        self.seed = seed
        self.generator = generator
        self._generators: dict[tuple[int, int], torch.Generator] = {}
        self.pad_token_id = int(tokenizer.pad_token_id)
        self.mask_token_id = tokenizer.mask_token_id
        vocab = tokenizer.get_vocab()
        size = max(len(tokenizer), max(vocab.values()) + 1)
        special = torch.zeros(size, dtype=torch.bool)
        special[list({int(i) for i in tokenizer.all_special_ids})] = True
        self._special_lookup = special
        self._special_np = special.numpy()
        ordinary = [i for t, i in vocab.items() if not special[i] and not _UNUSED_TOKEN.match(t)]
        if not ordinary:
            raise ValueError("the tokenizer vocabulary has no ordinary tokens to sample from")
        self._random_pool = torch.tensor(sorted(ordinary), dtype=torch.long)

    # ----------------------------------------------------------------- randomness
    def _get_generator(self) -> torch.Generator | None:
        if self.generator is not None:
            return self.generator
        if self.seed is None:
            return None
        key = (_distributed_rank(), _worker_id())
        gen = self._generators.get(key)
        if gen is None:
            gen = torch.Generator().manual_seed(_stream_seed(self.seed, *key))
            self._generators[key] = gen
        return gen

    # -------------------------------------------------------------------- padding
    def _padded_length(self, longest: int) -> int:
        m = self.pad_to_multiple_of
        if m:
            return ((longest + m - 1) // m) * m
        return longest

    def _pad_field(
        self, rows: Sequence[Sequence[int]], valid: torch.Tensor, value: int
    ) -> torch.Tensor:
        # numpy: torch's parallel index_put is slow on small batches when cores are busy
        mask = valid.numpy()
        out = np.full(mask.shape, value, dtype=np.int64)
        out[mask] = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=int(mask.sum()))
        return torch.from_numpy(out)

    def pad(
        self, examples: Sequence[dict[str, Any]]
    ) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """Pad a list of unpadded examples; return the batch and the valid-position mask."""
        if not examples:
            raise ValueError("cannot collate an empty list of examples")
        ids = [e["input_ids"] for e in examples]
        lengths = torch.tensor([len(x) for x in ids], dtype=torch.long)
        width = self._padded_length(int(lengths.max()))
        valid = torch.from_numpy(np.arange(width)[None, :] < lengths.numpy()[:, None])
        batch = {"input_ids": self._pad_field(ids, valid, self.pad_token_id)}
        first = examples[0]
        if "token_type_ids" in first:
            batch["token_type_ids"] = self._pad_field(
                [e["token_type_ids"] for e in examples], valid, 0
            )
        else:
            batch["token_type_ids"] = torch.zeros(valid.shape, dtype=torch.long)
        batch["attention_mask"] = valid.long()
        if "labels" in first:
            batch["labels"] = self._pad_field([e["labels"] for e in examples], valid, -100)
        if "next_sentence_label" in first:
            batch["next_sentence_label"] = torch.tensor(
                [int(e["next_sentence_label"]) for e in examples], dtype=torch.long
            )
        return batch, valid

    def candidates(
        self, examples: Sequence[dict[str, Any]], input_ids: torch.Tensor, valid: torch.Tensor
    ) -> torch.Tensor:
        """Positions that may be selected: real, non-special tokens."""
        cand = valid & ~torch.from_numpy(self._special_np[input_ids.numpy()])
        if "special_tokens_mask" in examples[0]:
            cand &= ~self._pad_field([e["special_tokens_mask"] for e in examples], valid, 1).bool()
        return cand

    # ------------------------------------------------------------------ selection
    def select(
        self,
        examples: Sequence[dict[str, Any]],
        input_ids: torch.Tensor,
        candidates: torch.Tensor,
        valid: torch.Tensor,
        generator: torch.Generator | None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Return (selected bool mask, unit index per position or None). Subclasses override."""
        raise NotImplementedError

    def _select_units(self, scores: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """Select whole units from per-position scores (equal within a unit, U(0,1) per unit).

        A unit's "budget position" is the number of candidate tokens whose score is <= its
        own, i.e. the running token count when units are taken in random (score) order.
        """
        scores = scores.masked_fill(~candidates, 2.0)
        s = scores.numpy()
        order = np.argsort(s, axis=1, kind="stable")
        ss = np.take_along_axis(s, order, axis=1)
        width = s.shape[1]
        is_end = np.ones(s.shape, dtype=bool)
        is_end[:, :-1] = ss[:, 1:] != ss[:, :-1]
        end = np.where(is_end, np.arange(1, width + 1)[None, :], width + 1)
        count_sorted = np.minimum.accumulate(end[:, ::-1], axis=1)[:, ::-1]
        count = np.empty_like(count_sorted)
        np.put_along_axis(count, order, count_sorted, axis=1)
        count_le = torch.from_numpy(count)
        sorted_scores = torch.from_numpy(np.ascontiguousarray(ss[:, :1]))
        n_cand = candidates.sum(dim=1, keepdim=True)
        if self.selection == "bernoulli":
            selected = scores < self.mlm_probability
        else:
            budget = torch.round(n_cand.double() * self.mlm_probability).long().clamp_min(1)
            selected = count_le <= budget
        if self.max_predictions_per_seq is not None:
            selected &= count_le <= self.max_predictions_per_seq
        # At least one unit per non-empty sequence: the unit with the lowest score.
        selected |= scores == sorted_scores
        return selected & candidates

    # ---------------------------------------------------------------- replacement
    def replace(
        self,
        input_ids: torch.Tensor,
        selected: torch.Tensor,
        units: torch.Tensor | None,
        generator: torch.Generator | None,
    ) -> torch.Tensor:
        """Apply the mask / random / keep split to the selected positions (one draw per unit
        when ``units`` gives, for each position, the index of its unit's first position)."""
        draw = torch.rand(input_ids.shape, generator=generator)
        if units is not None:
            draw = torch.from_numpy(np.take_along_axis(draw.numpy(), units.numpy(), axis=1))
        to_mask = selected & (draw < self.mask_replace_prob)
        to_random = (
            selected
            & (draw >= self.mask_replace_prob)
            & (draw < self.mask_replace_prob + self.random_replace_prob)
        )
        out = input_ids
        if self.mask_token_id is not None:
            out = torch.where(to_mask, self.mask_token_id, out)
        if self.random_replace_prob > 0:
            pick = torch.randint(len(self._random_pool), input_ids.shape, generator=generator)
            replacement = torch.from_numpy(self._random_pool.numpy()[pick.numpy()])
            out = torch.where(to_random, replacement, out)
        return out

    def __call__(self, examples: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        batch, valid = self.pad(examples)
        generator = self._get_generator()
        input_ids = batch["input_ids"]
        cand = self.candidates(examples, input_ids, valid)
        selected, units = self.select(examples, input_ids, cand, valid, generator)
        batch["labels"] = input_ids.masked_fill(~selected, -100)
        batch["input_ids"] = self.replace(input_ids, selected, units, generator)
        return batch

    def mask_rows(
        self, rows: Sequence[Sequence[int]], generator: torch.Generator | None = None
    ) -> tuple[list[list[int]], list[list[int]]]:
        """Mask plain id lists (used for static masking); returns (input_ids, labels) lists."""
        examples = [{"input_ids": r} for r in rows]
        saved = self.generator
        if generator is not None:
            self.generator = generator
        try:
            batch = self(examples)
        finally:
            self.generator = saved
        lengths = [len(r) for r in rows]
        ids = [row[:n] for row, n in zip(batch["input_ids"].tolist(), lengths)]
        labels = [row[:n] for row, n in zip(batch["labels"].tolist(), lengths)]
        return ids, labels


class TokenMaskingCollator(MaskingCollator):
    """The paper's Masked LM: every ordinary WordPiece token is a unit of its own."""

    def select(self, examples, input_ids, candidates, valid, generator):
        scores = torch.rand(input_ids.shape, generator=generator, dtype=torch.float64)
        return self._select_units(scores, candidates), None


class _WordBoundaries:
    """Word starts from ``word_ids`` / ``offset_mapping`` in the examples or ``##`` pieces."""

    def _init_words(self, tokenizer: Any, continuation_prefix: str) -> None:
        cont = torch.zeros_like(self._special_lookup)
        for token, idx in tokenizer.get_vocab().items():
            if token.startswith(continuation_prefix) and len(token) > len(continuation_prefix):
                cont[idx] = True
        self._continuation = cont

    def word_starts(self, examples, input_ids: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        first = examples[0]
        if "word_ids" in first:
            rows = []
            for e in examples:
                prev, starts = None, []
                for w in e["word_ids"]:
                    starts.append(1 if (w is None or w != prev) else 0)
                    prev = w
                rows.append(starts)
            return self._pad_field(rows, valid, 1).bool()
        if "offset_mapping" in first:
            rows = []
            for e in examples:
                prev_end, starts = None, []
                for start, end in e["offset_mapping"]:
                    starts.append(int(prev_end is None or start != prev_end or start == end))
                    prev_end = end
                rows.append(starts)
            return self._pad_field(rows, valid, 1).bool()
        return ~torch.from_numpy(self._continuation.numpy()[input_ids.numpy()])


class WholeWordMaskingCollator(_WordBoundaries, MaskingCollator):
    """Whole-word masking: a word is selected with all its pieces.

    Word boundaries, in order of preference: ``word_ids`` in the examples (any tokenizer),
    ``offset_mapping`` in the examples (a new word starts where the character offsets are not
    adjacent, as in transformers), else WordPiece ``##`` continuation pieces of the vocabulary.
    The mask/random/keep draw is per token, as in Google's ``do_whole_word_mask``.
    """

    def __init__(self, tokenizer: Any, continuation_prefix: str = "##", **kwargs: Any) -> None:
        super().__init__(tokenizer, **kwargs)
        self._init_words(tokenizer, continuation_prefix)

    def select(self, examples, input_ids, candidates, valid, generator):
        starts = self.word_starts(examples, input_ids, valid) | ~candidates
        positions = np.arange(input_ids.shape[1])[None, :]
        word_first = np.maximum.accumulate(np.where(starts.numpy(), positions, 0), axis=1)
        scores = torch.rand(input_ids.shape, generator=generator, dtype=torch.float64).numpy()
        scores = torch.from_numpy(np.take_along_axis(scores, word_first, axis=1))
        return self._select_units(scores, candidates), None


class SpanMaskingCollator(_WordBoundaries, MaskingCollator):
    """SpanBERT span masking: spans of whole words, lengths ~ Geometric(p) clipped at
    ``max_span_length`` (p=0.2, 10: mean 3.8 words), anchored at a random word and drawn until
    ``mlm_probability`` of the maskable tokens are selected. The mask/random/keep draw is per
    span, as in SpanBERT.

    The budget is always the exact count ``round(n * mlm_probability)`` (``selection`` is
    ignored); ``max_predictions_per_seq`` lowers it. A span stops early at the end of the
    sequence, at an already selected word, or when the next word would exceed the budget (the
    first word of a span is always taken, so every non-empty sequence gets a span).
    ``last_span_lengths`` holds (drawn, applied) word counts of the spans of the last batch.
    """

    def __init__(
        self,
        tokenizer: Any,
        geometric_p: float = 0.2,
        max_span_length: int = 10,
        continuation_prefix: str = "##",
        **kwargs: Any,
    ) -> None:
        super().__init__(tokenizer, **kwargs)
        if not 0.0 < geometric_p <= 1.0:
            raise ValueError(f"geometric_p must be in (0, 1], got {geometric_p}")
        if max_span_length < 1:
            raise ValueError(f"max_span_length must be >= 1, got {max_span_length}")
        self._init_words(tokenizer, continuation_prefix)
        self.geometric_p = geometric_p
        self.max_span_length = max_span_length
        lengths = torch.arange(1, max_span_length + 1, dtype=torch.float64)
        probs = geometric_p * (1 - geometric_p) ** (lengths - 1)
        self.span_length_probs = probs / probs.sum()
        self.last_span_lengths: list[tuple[int, int]] = []

    @property
    def mean_span_length(self) -> float:
        """Expected span length in words under the clipped geometric distribution."""
        return float((self.span_length_probs * torch.arange(1, self.max_span_length + 1)).sum())

    def _draws(self, n: int, generator):
        lengths = torch.multinomial(
            self.span_length_probs, n, replacement=True, generator=generator
        )
        anchors = torch.rand(n, generator=generator, dtype=torch.float64)
        return (lengths + 1).tolist(), anchors.tolist()

    def select(self, examples, input_ids, candidates, valid, generator):
        batch_size, width = input_ids.shape
        starts = (self.word_starts(examples, input_ids, valid) & candidates).tolist()
        cand_rows = candidates.tolist()
        n_cand = candidates.sum(dim=1).tolist()
        selected = torch.zeros(input_ids.shape, dtype=torch.bool)
        units = torch.arange(width).repeat(batch_size, 1)
        n_draw = max(8, int(width * self.mlm_probability))
        self.last_span_lengths = []
        for b in range(batch_size):
            if n_cand[b] == 0:
                continue
            budget = max(1, round(n_cand[b] * self.mlm_probability))
            if self.max_predictions_per_seq is not None:
                budget = min(budget, self.max_predictions_per_seq)
            word_pos = [i for i, s in enumerate(starts[b]) if s]
            ends = []
            for p in word_pos:
                e = p + 1
                while e < width and cand_rows[b][e] and not starts[b][e]:
                    e += 1
                ends.append(e)
            n_words = len(word_pos)
            taken = [False] * n_words
            count, free, draw = 0, n_words, n_draw
            while count < budget and free > 0:
                if draw >= n_draw:
                    lengths, anchors = self._draws(n_draw, generator)
                    draw = 0
                length, k0 = lengths[draw], int(anchors[draw] * n_words)
                draw += 1
                if taken[k0]:
                    continue
                k1 = k0
                while k1 < n_words and k1 - k0 < length and not taken[k1]:
                    size = ends[k1] - word_pos[k1]
                    if k1 > k0 and count + size > budget:
                        break
                    count += size
                    taken[k1] = True
                    free -= 1
                    k1 += 1
                lo, hi = word_pos[k0], ends[k1 - 1]
                selected[b, lo:hi] = True
                units[b, lo:hi] = lo
                self.last_span_lengths.append((length, k1 - k0))
        return selected & candidates, units


class StaticMaskingCollator(MaskingCollator):
    """Pass-through for statically masked data: pads ``input_ids`` and the stored ``labels``
    (-100 where nothing is predicted); no new masking."""

    def __init__(
        self, tokenizer: Any, pad_to_multiple_of: int | None = None, **kwargs: Any
    ) -> None:
        kwargs = {k: v for k, v in kwargs.items() if k == "seed"}
        super().__init__(tokenizer, pad_to_multiple_of=pad_to_multiple_of, **kwargs)

    def __call__(self, examples):
        if "labels" not in examples[0]:
            raise ValueError(
                "static collator needs examples with 'labels' (data written with static masking)"
            )
        batch, _ = self.pad(examples)
        return batch


COLLATOR_STRATEGIES = {
    "token": TokenMaskingCollator,
    "whole_word": WholeWordMaskingCollator,
    "span": SpanMaskingCollator,
    "static": StaticMaskingCollator,
}


def build_collator(strategy: str, tokenizer: Any, **kwargs: Any) -> MaskingCollator:
    """Build a collator by strategy name: "token", "whole_word", "span" or "static"."""
    try:
        cls = COLLATOR_STRATEGIES[strategy]
    except KeyError:
        raise ValueError(
            f"unknown masking strategy {strategy!r}; choose from {sorted(COLLATOR_STRATEGIES)}"
        ) from None
    return cls(tokenizer, **kwargs)
