"""The phases of a pretraining run and their deterministic data order.

A phase is one prepared data folder (``scripts/create_pretraining_data.py`` output; raw text is
converted on the fly into ``output_dir/data``) with its share of the steps, its global batch and
its accumulation.

The data order is a pure function of ``(seed, epoch)`` (:class:`SampleOrder`): position ``p`` of
the stream is sample ``perm_{p // N}[p % N]``. Step ``s`` of a phase reads positions
``[s * B, (s + 1) * B)``, split over accumulation micro-batches and processes
(:class:`PhaseBatches`). Resuming at any step jumps straight to its position: no skipped batches
are read. Masking draws come from a generator seeded by ``(seed, phase, step, micro-batch,
rank)``, so they too do not depend on what ran before.
"""

from __future__ import annotations

import glob
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .cli import UsageError
from .pretraining_args import PretrainingArguments
from .pretraining_data import create_pretraining_data, load_metadata
from .tokenizer_training import train_wordpiece

logger = logging.getLogger(__name__)


@dataclass
class Phase:
    index: int
    path: Path
    steps: int
    first_global_step: int
    global_batch: int
    accumulation: int
    max_seq_length: int
    max_predictions: int | None
    metadata: dict


def is_prepared(path: Path) -> bool:
    return (path / "metadata.json").is_file()


def check_data_paths(args: PretrainingArguments) -> None:
    """Every train_data entry is a prepared folder or matches raw text files."""
    for i, entry in enumerate(args.train_data):
        path = Path(entry)
        if path.is_dir() and not is_prepared(path):
            raise UsageError(
                f"train_data[{i}]: {path} has no metadata.json (not written by "
                "scripts/create_pretraining_data.py)"
            )
        if not path.is_dir() and not glob.glob(entry):
            raise UsageError(f"train_data[{i}]: {entry} not found")


def resolve_data(args: PretrainingArguments, accelerator=None) -> list[Path]:
    """Each phase's prepared data folder; raw text is converted (on the main process)."""
    check_data_paths(args)
    folders: list[Path] = []
    lengths = args.per_phase("max_seq_length")
    tokenizer = args.tokenizer_name
    for i, entry in enumerate(args.train_data):
        path = Path(entry)
        if is_prepared(path):
            folders.append(path)
            continue
        files = sorted(glob.glob(entry))
        target = Path(args.output_dir) / "data" / f"phase{i}-{lengths[i]}"
        folders.append(target)
        if is_prepared(target) and load_metadata(target)["inputs"] == files:
            continue  # converted by an earlier run (e.g. the one being resumed)
        is_main = accelerator is None or accelerator.is_main_process
        if is_main:
            tokenizer = tokenizer or _train_tokenizer(files, args)
            logger.info("building %s from %d raw file(s)", target, len(files))
            create_pretraining_data(
                files,
                target,
                tokenizer,
                max_seq_length=lengths[i],
                num_validation_docs=args.num_validation_docs,
                seed=args.seed,
                overwrite=True,
                progress=False,
            )
        if accelerator is not None:
            accelerator.wait_for_everyone()
    return folders


def _train_tokenizer(files: list[str], args: PretrainingArguments) -> str:
    out = Path(args.output_dir) / "data" / "tokenizer"
    if not (out / "tokenizer_config.json").is_file():
        logger.info(
            "training a %d-entry WordPiece tokenizer on %s", args.tokenizer_vocab_size, files
        )
        train_wordpiece(files, out, vocab_size=args.tokenizer_vocab_size)
    return str(out)


def build_phases(args: PretrainingArguments, folders: list[Path]) -> list[Phase]:
    phases, first = [], 0
    batches = args.per_phase("train_batch_size")
    accums = args.per_phase("gradient_accumulation_steps")
    caps = args.per_phase("max_predictions_per_seq")
    vocab = None
    for i, (path, steps) in enumerate(zip(folders, args.phase_steps())):
        meta = load_metadata(path)
        if vocab is not None and meta["vocab_size"] != vocab:
            raise UsageError(
                f"train_data[{i}]: {path} has vocabulary size {meta['vocab_size']}, phase 0 has "
                f"{vocab}: all phases must share one tokenizer"
            )
        vocab = meta["vocab_size"]
        if meta["max_seq_length"] > args.max_position_embeddings:
            raise UsageError(
                f"train_data[{i}]: sequences of {meta['max_seq_length']} exceed "
                f"max_position_embeddings={args.max_position_embeddings}"
            )
        static = meta.get("masking") == "static"
        if static != (args.masking_strategy == "static"):
            raise UsageError(
                f"train_data[{i}]: {path} was written with {meta.get('masking')} masking; use "
                f"masking_strategy {'static' if static else 'token/whole_word/span'}"
            )
        phases.append(
            Phase(
                i, path, steps, first, batches[i], accums[i], meta["max_seq_length"], caps[i], meta
            )
        )
        first += steps
    return phases


def check_batches(phases: list[Phase], num_processes: int) -> None:
    for p in phases:
        if p.global_batch % (num_processes * p.accumulation):
            raise UsageError(
                f"train_batch_size[{p.index}]={p.global_batch} is not divisible by "
                f"num_processes ({num_processes}) x gradient_accumulation_steps "
                f"({p.accumulation})"
            )


# --------------------------------------------------------------------------------------------
# Data order: a sample-indexed stream
# --------------------------------------------------------------------------------------------


class SampleOrder:
    """The infinite training stream over ``n`` samples: position ``p`` is sample
    ``perm(epoch = p // n)[p % n]``, each epoch's permutation drawn from ``(seed, epoch)``.

    Any stretch of the stream is computed directly from its start position, so resuming at
    step 900k costs one permutation, not 900k batches.
    """

    def __init__(self, n: int, seed: int):
        if n < 1:
            raise ValueError("cannot order an empty dataset")
        self.n, self.seed = n, seed
        self._epoch, self._perm = -1, None

    def permutation(self, epoch: int):
        if epoch != self._epoch:
            self._perm = np.random.default_rng([self.seed, epoch]).permutation(self.n)
            self._epoch = epoch
        return self._perm

    def indices(self, start: int, count: int) -> list[int]:
        out: list[int] = []
        pos = start
        while len(out) < count:
            epoch, offset = divmod(pos, self.n)
            take = min(count - len(out), self.n - offset)
            out.extend(self.permutation(epoch)[offset : offset + take].tolist())
            pos += take
        return out


def mix_seed(*parts: int) -> int:
    return int(np.random.SeedSequence([p & 0xFFFFFFFF for p in parts]).generate_state(1)[0])


def collate_rows(dataset, indices: list[int], collator, seed: int) -> dict:
    """Fetch rows ``indices`` of a pretraining dataset and collate (mask) them with a generator
    seeded by ``seed``, so the masks depend on nothing else."""
    columns = [c for c in dataset.column_names if c != "attention_mask"]
    rows = dataset[indices]
    examples = [dict(zip(columns, values)) for values in zip(*(rows[c] for c in columns))]
    collator.generator = torch.Generator().manual_seed(seed)
    try:
        return collator(examples)
    finally:
        collator.generator = None


class PhaseBatches:
    """Micro-batches of one phase for one process, as a map-style dataset (item ``k`` is
    micro-batch ``k % accumulation`` of step ``first_step + k // accumulation``), so a
    ``DataLoader`` with workers collates them in parallel and the result never depends on
    the number of workers."""

    def __init__(
        self,
        dataset,
        collator,
        order: SampleOrder,
        phase: int,
        first_step: int,
        num_steps: int,
        global_batch: int,
        accumulation: int,
        num_processes: int,
        rank: int,
        seed: int,
    ):
        self.dataset, self.collator, self.order = dataset, collator, order
        self.phase, self.first_step, self.num_steps = phase, first_step, num_steps
        self.global_batch, self.accumulation = global_batch, accumulation
        self.num_processes, self.rank, self.seed = num_processes, rank, seed
        self.micro = global_batch // (num_processes * accumulation)

    def __len__(self) -> int:
        return (self.num_steps - self.first_step) * self.accumulation

    def sample_indices(self, k: int) -> list[int]:
        step, m = divmod(k, self.accumulation)
        step += self.first_step
        start = step * self.global_batch + (m * self.num_processes + self.rank) * self.micro
        return self.order.indices(start, self.micro)

    def __getitem__(self, k: int) -> dict:
        if not 0 <= k < len(self):
            raise IndexError(k)
        step, m = divmod(k, self.accumulation)
        seed = mix_seed(self.seed, self.phase, step + self.first_step, m, self.rank)
        return collate_rows(self.dataset, self.sample_indices(k), self.collator, seed)
