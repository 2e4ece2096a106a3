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
import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from . import atomic
from .cli import UsageError
from .corpus import CorpusError
from .pretraining_args import PretrainingArguments
from .pretraining_data import PretrainingDataError, create_pretraining_data, load_metadata
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
    signature: str = ""  # data_signature(path)


def is_prepared(path: Path) -> bool:
    return (path / "metadata.json").is_file()


def _check_text_file(i: int, path: str) -> None:
    """Cheap checks of a raw text input before any work: not empty, not binary."""
    if not Path(path).is_file():
        raise UsageError(f"train_data[{i}]: {path} is not a file")
    with open(path, "rb") as fh:
        head = fh.read(1 << 16)
    if not head.strip():
        raise UsageError(f"train_data[{i}]: {path} is empty")
    if b"\0" in head:
        raise UsageError(
            f"train_data[{i}]: {path} is binary, not text (NUL byte at {head.index(0)})"
        )
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as err:
        if err.start < len(head) - 3:  # not just a character cut by the 64 KiB window
            raise UsageError(
                f"train_data[{i}]: {path} is not UTF-8 text (byte {err.start})"
            ) from None


def check_data_paths(args: PretrainingArguments) -> None:
    """Every train_data entry is a prepared folder or matches raw text files."""
    for i, entry in enumerate(args.train_data):
        path = Path(entry)
        if path.is_dir() and not is_prepared(path):
            raise UsageError(
                f"train_data[{i}]: {path} has no metadata.json (not written by "
                "scripts/create_pretraining_data.py)"
            )
        if path.is_dir():
            continue
        files = sorted(glob.glob(entry))
        if not files:
            raise UsageError(f"train_data[{i}]: {entry} not found")
        for f in files:
            _check_text_file(i, f)


def _key(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def _file_facts(files: list[str]) -> list:
    """What decides whether a cached conversion is still valid: path, size, modification."""
    return [[f, os.stat(f).st_size, os.stat(f).st_mtime_ns] for f in files]


def resolve_data(args: PretrainingArguments, accelerator=None) -> list[Path]:
    """Each phase's prepared data folder.

    Raw text is converted by the main process into ``output_dir/data/phase<i>-<length>`` (with
    a WordPiece tokenizer trained on all raw files into ``output_dir/data/tokenizer`` unless
    ``tokenizer_name`` is given). Each conversion is keyed by its inputs (file paths, sizes and
    modification times, vocabulary size, length, held-out documents, seed): a folder with the
    same key is reused, any other is rebuilt, atomically."""
    check_data_paths(args)
    lengths = args.per_phase("max_seq_length")
    data_dir = Path(args.output_dir) / "data"
    raw = {
        i: sorted(glob.glob(entry))
        for i, entry in enumerate(args.train_data)
        if not is_prepared(Path(entry))
    }
    folders = [
        data_dir / f"phase{i}-{lengths[i]}" if i in raw else Path(entry)
        for i, entry in enumerate(args.train_data)
    ]
    if raw and (accelerator is None or accelerator.is_main_process):
        _convert_raw(args, raw, folders)
    if raw and accelerator is not None:
        accelerator.wait_for_everyone()
    return folders


def _convert_raw(args: PretrainingArguments, raw: dict[int, list[str]], folders: list[Path]):
    lengths = args.per_phase("max_seq_length")
    if args.tokenizer_name:
        tokenizer = args.tokenizer_name
        folder = Path(tokenizer)
        names = sorted(str(f) for f in folder.iterdir()) if folder.is_dir() else []
        tokenizer_key = _key([tokenizer, _file_facts(names)])
    else:
        tokenizer, tokenizer_key = _cached_tokenizer(sorted(set(sum(raw.values(), []))), args)
    for i, files in raw.items():
        key = _key({
            "files": _file_facts(files), "tokenizer": tokenizer_key, "seed": args.seed,
            "max_seq_length": lengths[i], "num_validation_docs": args.num_validation_docs,
        })  # fmt: skip
        target = folders[i]
        if (
            is_prepared(target)
            and load_metadata(target)["config"].get("extra", {}).get("key") == key
        ):
            continue  # converted by an earlier run from the same inputs
        logger.info("building %s from %d raw file(s)", target, len(files))
        try:
            create_pretraining_data(
                files,
                target,
                tokenizer,
                max_seq_length=lengths[i],
                num_validation_docs=args.num_validation_docs,
                seed=args.seed,
                overwrite=True,
                progress=False,
                extra={"key": key},
            )
        except (PretrainingDataError, CorpusError) as err:
            raise UsageError(f"train_data[{i}]: {err}") from None


def _cached_tokenizer(files: list[str], args: PretrainingArguments) -> tuple[str, str]:
    out = Path(args.output_dir) / "data" / "tokenizer"
    key = _key({"files": _file_facts(files), "vocab_size": args.tokenizer_vocab_size})
    stamp = out / "inputs_key.txt"
    if stamp.is_file() and stamp.read_text() == key:
        return str(out), key
    logger.info("training a %d-entry WordPiece tokenizer on %s", args.tokenizer_vocab_size, files)
    with atomic.atomic_dir(out) as tmp:
        try:
            train_wordpiece(files, tmp, vocab_size=args.tokenizer_vocab_size)
        except (ValueError, CorpusError) as err:
            raise UsageError(f"train_data: no tokenizer from {files}: {err}") from None
        (tmp / "inputs_key.txt").write_text(key)
    return str(out), key


def data_signature(path: Path) -> str:
    """A fingerprint of a prepared folder's content (settings, counts, vocabulary), not of
    where it lies or when it was written: two identical builds have the same one."""
    meta = load_metadata(path)
    config = {k: v for k, v in meta["config"].items() if k != "extra"}
    splits = {
        name: {k: v for k, v in split.items() if k != "shards"}
        for name, split in meta["summary"]["splits"].items()
    }
    vocab = path / "tokenizer" / "tokenizer.json"
    digest = hashlib.sha256(vocab.read_bytes()).hexdigest() if vocab.is_file() else None
    return _key({"config": config, "vocab_size": meta["vocab_size"], "splits": splits,
                 "tokenizer": digest})  # fmt: skip


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
                i,
                path,
                steps,
                first,
                batches[i],
                accums[i],
                meta["max_seq_length"],
                caps[i],
                meta,
                data_signature(path),
            )
        )
        first += steps
    return phases


def check_batches(args: PretrainingArguments, num_processes: int) -> None:
    batches = args.per_phase("train_batch_size")
    for i, accumulation in enumerate(args.per_phase("gradient_accumulation_steps")):
        if batches[i] % (num_processes * accumulation):
            raise UsageError(
                f"train_batch_size[{i}]={batches[i]} is not divisible by "
                f"num_processes ({num_processes}) x gradient_accumulation_steps "
                f"({accumulation})"
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
