"""Pretraining instances (BERT Masked LM + a sentence-relation task) written as Arrow shards.

The instance builder follows Google's ``create_pretraining_data.py``: documents are shuffled;
for every document (``dupe_factor`` times) a target length is drawn (``max_seq_length - 3``,
or with ``short_seq_prob`` a random length in ``[2, max_seq_length - 3]``); whole sentences
are gathered into a chunk until the target is reached; ``A`` is a random prefix of the chunk;
for NSP, ``B`` is the rest of the chunk (label 0) or, with probability 0.5 or when the chunk
has one segment, text from a random other document starting at a random sentence (label 1),
and the unused sentences of the chunk are put back; the longer of ``A``/``B`` is truncated one
token at a time from the front or back at random; the instance is ``[CLS] A [SEP] B [SEP]``
with ``token_type_ids`` 0 for ``[CLS] A [SEP]`` and 1 for ``B [SEP]``; instances are shuffled.

Sentence tasks: ``nsp`` (paper), ``sop`` (ALBERT: ``A``/``B`` consecutive, swapped with
probability 0.5, label 1 when swapped) and ``none`` (RoBERTa FULL-SENTENCES: sentences packed
to ``max_seq_length - 2`` across document boundaries, an extra ``[SEP]`` between documents).

Masking: ``dynamic`` (default; no labels stored, the collator masks every batch afresh) or
``static`` (``labels`` stored, -100 where nothing is predicted), done by the same collator
classes (``modeling.collators``) as dynamic masking, ``dupe_factor`` copies with different
masks and pairings.

Deliberate deviations from Google's script (each an option where it matters):

* Sentence splitting of paragraph text, see ``modeling.corpus`` (Google expects it done).
* WordPiece via the ``tokenizers`` library (same tokens, several times faster).
* Parallelism: documents are processed in fixed chunks of ``CHUNK_DOCS`` documents, each with
  its own random stream derived from ``(seed, dupe, chunk)``, so the output depends only on
  the seed, never on ``num_proc``.
* NSP: the random document is always a different document (Google tries 10 times and may fall
  back to the same one); documents with fewer than ``min_doc_sentences`` sentences are skipped
  and counted (default 1 = Google: single-sentence documents always give random-next pairs,
  which skews the NSP balance on stub-heavy corpora such as Wikipedia).
* SOP: a chunk of one segment is split inside the segment, so ``B`` is never from another
  document (ALBERT falls back to a random document there).
* Static masking: ``round(n * mlm_probability)`` counts only maskable tokens (Google counts
  [CLS]/[SEP] too); random replacements come from ordinary vocabulary only.
* Examples are stored unpadded; the collator pads each batch.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from .constants import IGNORE_INDEX
from .corpus import CorpusError, CorpusStats, read_documents

__all__ = [
    "PretrainingDataError",
    "PretrainingDataConfig",
    "create_pretraining_data",
    "load_pretraining_dataset",
    "load_metadata",
    "CHUNK_DOCS",
    "SENTENCE_TASKS",
]

CHUNK_DOCS = 1024
SENTENCE_TASKS = ("nsp", "sop", "none")
METADATA_VERSION = 1


class PretrainingDataError(ValueError):
    """Invalid settings or input for pretraining-data creation."""


@dataclass
class PretrainingDataConfig:
    """Every setting of a pretraining-data run (stored in ``metadata.json``)."""

    max_seq_length: int = 128
    short_seq_prob: float = 0.1
    sentence_task: str = "nsp"
    masking: str = "dynamic"
    masking_strategy: str = "token"
    mlm_probability: float = 0.15
    mask_replace_prob: float = 0.8
    random_replace_prob: float = 0.1
    max_predictions_per_seq: int | None = 20
    dupe_factor: int | None = None
    seed: int = 12345
    min_doc_sentences: int = 1
    validation_fraction: float = 0.0
    num_validation_docs: int = 0
    input_format: str = "auto"
    sentence_splitter: str = "rules"
    text_field: str = "text"
    on_decode_error: str = "error"
    num_shards: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> None:
        if self.sentence_task not in SENTENCE_TASKS:
            raise PretrainingDataError(
                f"sentence_task must be one of {SENTENCE_TASKS}, got {self.sentence_task!r}"
            )
        if self.masking not in ("dynamic", "static"):
            raise PretrainingDataError(
                f"masking must be 'dynamic' or 'static', got {self.masking!r}"
            )
        if self.max_seq_length < 8:
            raise PretrainingDataError(f"max_seq_length must be >= 8, got {self.max_seq_length}")
        if not 0.0 <= self.short_seq_prob <= 1.0:
            raise PretrainingDataError(
                f"short_seq_prob must be in [0, 1], got {self.short_seq_prob}"
            )
        if self.dupe_factor is not None and self.dupe_factor < 1:
            raise PretrainingDataError(f"dupe_factor must be >= 1, got {self.dupe_factor}")
        if not 0.0 <= self.validation_fraction < 1.0:
            raise PretrainingDataError(
                f"validation_fraction must be in [0, 1), got {self.validation_fraction}"
            )
        if self.num_validation_docs < 0:
            raise PretrainingDataError("num_validation_docs must be >= 0")
        if self.validation_fraction and self.num_validation_docs:
            raise PretrainingDataError("give validation_fraction or num_validation_docs, not both")

    @property
    def effective_dupe_factor(self) -> int:
        if self.dupe_factor is not None:
            return self.dupe_factor
        return 10 if self.masking == "static" else 1


# --------------------------------------------------------------------------- tokenized corpus
@dataclass
class TokenizedCorpus:
    """Flat token ids; ``sent_offsets`` index ``tokens``; ``doc_offsets`` index sentences."""

    tokens: np.ndarray
    sent_offsets: np.ndarray
    doc_offsets: np.ndarray

    @property
    def num_documents(self) -> int:
        return len(self.doc_offsets) - 1

    def document(self, d: int) -> list[list[int]]:
        s0, s1 = self.doc_offsets[d], self.doc_offsets[d + 1]
        off = self.sent_offsets[s0 : s1 + 1]
        flat = self.tokens[off[0] : off[-1]].tolist()
        base = int(off[0])
        return [flat[a - base : b - base] for a, b in zip(off[:-1].tolist(), off[1:].tolist())]


def _backend_tokenizer(tokenizer: Any):
    from tokenizers import Tokenizer

    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise PretrainingDataError("a fast (tokenizers-backed) tokenizer is required")
    fresh = Tokenizer.from_str(backend.to_str())
    # tokenizer.json files often carry truncation/padding (e.g. fixed 128): never here.
    fresh.no_truncation()
    fresh.no_padding()
    return fresh


def _tokenize_docs(backend, docs: list[list[str]], batch_size: int = 4096):
    """Tokenize documents: returns (tokens int32, sentence lengths, sentences per document)."""
    sentences = [s for d in docs for s in d]
    lengths = np.zeros(len(sentences), dtype=np.int64)
    pieces = []
    for i in range(0, len(sentences), batch_size):
        encs = backend.encode_batch_fast(sentences[i : i + batch_size], add_special_tokens=False)
        ids = [e.ids for e in encs]
        lengths[i : i + len(ids)] = [len(x) for x in ids]
        pieces.append(np.fromiter(chain.from_iterable(ids), dtype=np.int32))
    tokens = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int32)
    counts = np.array([len(d) for d in docs], dtype=np.int64)
    return tokens, lengths, counts


_WORKER: dict[str, Any] = {}


def _init_reader(tokenizer_json: str, read_kwargs: dict) -> None:
    from tokenizers import Tokenizer

    backend = Tokenizer.from_str(tokenizer_json)
    backend.no_truncation()
    backend.no_padding()
    _WORKER["backend"] = backend
    _WORKER["read_kwargs"] = read_kwargs


def _read_and_tokenize(source: str):
    stats = CorpusStats()
    docs = read_documents([source], stats=stats, **_WORKER["read_kwargs"])
    return (*_tokenize_docs(_WORKER["backend"], docs), stats)


def _assemble(parts, min_sentences: int, stats: CorpusStats) -> TokenizedCorpus:
    """Join per-file pieces, dropping empty sentences and documents left too short."""
    tokens = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int32)
    lengths = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
    counts = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, np.int64)
    doc_of_sentence = np.repeat(np.arange(len(counts)), counts)
    keep = lengths > 0
    if (~keep).any():
        stats.skip("sentences empty after tokenization", int((~keep).sum()))
    counts = np.bincount(doc_of_sentence[keep], minlength=len(counts))
    lengths = lengths[keep]
    ok_doc = counts >= max(1, min_sentences)
    if not ok_doc.all():
        stats.skip("documents too short after tokenization", int((~ok_doc).sum()))
        keep_sent = np.repeat(ok_doc, counts)
        tokens = tokens[np.repeat(keep_sent, lengths)]
        lengths = lengths[keep_sent]
        counts = counts[ok_doc]
    sent_offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    doc_offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    stats.documents = len(counts)
    stats.sentences = int(len(lengths))
    return TokenizedCorpus(tokens, sent_offsets, doc_offsets)


# ------------------------------------------------------------------------- instance building
def _truncate_seq_pair(tokens_a: list, tokens_b: list, max_num_tokens: int, rng) -> None:
    """Google's truncation: drop from the longer sequence, front or back at random."""
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        trunc = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del trunc[0]
        else:
            trunc.pop()


def _random_other_doc(rng, docs: Sequence[int], doc_pos: int) -> int:
    n = len(docs)
    for _ in range(10):
        j = rng.randint(0, n - 1)
        if j != doc_pos:
            return j
    j = rng.randint(0, n - 2)
    return j + 1 if j >= doc_pos else j


def _pair_instances(corpus, docs, doc_pos, cfg, rng, cls_id, sep_id, out) -> None:
    """Google's create_instances_from_document (nsp) or its ALBERT variant (sop)."""
    document = corpus.document(docs[doc_pos])
    max_num_tokens = cfg.max_seq_length - 3
    target_seq_length = max_num_tokens
    if rng.random() < cfg.short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)
    current_chunk: list[list[int]] = []
    current_length = 0
    i = 0
    while i < len(document):
        segment = document[i]
        current_chunk.append(segment)
        current_length += len(segment)
        if i == len(document) - 1 or current_length >= target_seq_length:
            if current_chunk:
                a_end = 1
                if len(current_chunk) >= 2:
                    a_end = rng.randint(1, len(current_chunk) - 1)
                tokens_a = [t for seg in current_chunk[:a_end] for t in seg]
                tokens_b: list[int] = []
                if cfg.sentence_task == "nsp":
                    if len(current_chunk) == 1 or rng.random() < 0.5:
                        label = 1
                        target_b_length = target_seq_length - len(tokens_a)
                        random_doc = corpus.document(docs[_random_other_doc(rng, docs, doc_pos)])
                        random_start = rng.randint(0, len(random_doc) - 1)
                        for j in range(random_start, len(random_doc)):
                            tokens_b.extend(random_doc[j])
                            if len(tokens_b) >= target_b_length:
                                break
                        # put the unused segments back
                        i -= len(current_chunk) - a_end
                    else:
                        label = 0
                        tokens_b = [t for seg in current_chunk[a_end:] for t in seg]
                else:  # sop
                    if len(current_chunk) == 1:
                        if len(tokens_a) < 2:
                            out["skipped_short"] += 1
                            current_chunk, current_length = [], 0
                            i += 1
                            continue
                        cut = rng.randint(1, len(tokens_a) - 1)
                        tokens_a, tokens_b = tokens_a[:cut], tokens_a[cut:]
                    else:
                        tokens_b = [t for seg in current_chunk[a_end:] for t in seg]
                    label = 0
                    if rng.random() < 0.5:
                        tokens_a, tokens_b, label = tokens_b, tokens_a, 1
                _truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
                out["ids"].append([cls_id, *tokens_a, sep_id, *tokens_b, sep_id])
                out["types"].append([0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1))
                out["nsp"].append(label)
            current_chunk, current_length = [], 0
        i += 1


def _packed_instances(corpus, docs, cfg, cls_id, sep_id, out) -> None:
    """RoBERTa FULL-SENTENCES: pack sentences across documents, [SEP] between documents."""
    max_tokens = cfg.max_seq_length - 2
    current: list[int] = []

    def emit():
        while current and current[-1] == sep_id:
            current.pop()
        if current:
            out["ids"].append([cls_id, *current, sep_id])
            out["types"].append([0] * (len(current) + 2))
        current.clear()

    for d in docs:
        for sentence in corpus.document(d):
            if len(current) + len(sentence) > max_tokens:
                emit()
            while len(sentence) > max_tokens:  # a sentence longer than a whole instance
                current.extend(sentence[:max_tokens])
                emit()
                sentence = sentence[max_tokens:]
            current.extend(sentence)
        if current:
            if len(current) + 1 > max_tokens:
                emit()
            else:
                current.append(sep_id)
    emit()


def _chunk_seed(seed: int, dupe: int, chunk: int) -> int:
    return int(np.random.SeedSequence([seed, dupe, chunk]).generate_state(1, np.uint64)[0] >> 1)


def _init_builder(corpus, docs, cfg, cls_id, sep_id, collator) -> None:
    _WORKER.update(
        corpus=corpus, docs=docs, cfg=cfg, cls_id=cls_id, sep_id=sep_id, collator=collator
    )
    if collator is not None:
        import torch

        torch.set_num_threads(1)


def _build_chunk(task):
    """Instances for one chunk of documents; returns flat numpy arrays."""
    start, stop, dupe, chunk = task
    corpus, docs, cfg = _WORKER["corpus"], _WORKER["docs"], _WORKER["cfg"]
    cls_id, sep_id = _WORKER["cls_id"], _WORKER["sep_id"]
    seed = _chunk_seed(cfg.seed, dupe, chunk)
    rng = random.Random(seed)
    out: dict[str, Any] = {"ids": [], "types": [], "nsp": [], "skipped_short": 0}
    if cfg.sentence_task == "none":
        _packed_instances(corpus, docs[start:stop], cfg, cls_id, sep_id, out)
    else:
        for pos in range(start, stop):
            _pair_instances(corpus, docs, pos, cfg, rng, cls_id, sep_id, out)
    ids, labels = out["ids"], None
    collator = _WORKER["collator"]
    if collator is not None and ids:
        import torch

        gen = torch.Generator().manual_seed(seed)
        masked, labels = [], []
        for i in range(0, len(ids), 512):
            m, lab = collator.mask_rows(ids[i : i + 512], generator=gen)
            masked.extend(m)
            labels.extend(lab)
        labels = np.fromiter(chain.from_iterable(labels), dtype=np.int32)
        ids = masked
    lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
    return {
        "input_ids": np.fromiter(chain.from_iterable(ids), dtype=np.int32),
        "token_type_ids": np.fromiter(chain.from_iterable(out["types"]), dtype=np.int8),
        "lengths": lengths,
        "next_sentence_label": np.asarray(out["nsp"], dtype=np.int64),
        "labels": labels,
        "skipped_short": out["skipped_short"],
    }


def _pool(num_proc: int, initializer, initargs):
    import multiprocessing as mp

    methods = mp.get_all_start_methods()
    ctx = mp.get_context("fork" if "fork" in methods else "spawn")
    return ctx.Pool(num_proc, initializer=initializer, initargs=initargs)


def _run(tasks, fn, num_proc, initializer, initargs, desc, progress):
    from tqdm.auto import tqdm

    bar = tqdm(
        total=len(tasks),
        desc=desc,
        unit="chunk" if "build" in desc else "file",
        disable=not progress,
    )
    results = []
    try:
        if num_proc <= 1 or len(tasks) <= 1:
            initializer(*initargs)
            for t in tasks:
                results.append(fn(t))
                bar.update()
        else:
            with _pool(min(num_proc, len(tasks)), initializer, initargs) as pool:
                for r in pool.imap(fn, tasks):
                    results.append(r)
                    bar.update()
    finally:
        bar.close()
    return results


def _build_split(corpus, docs, cfg, tokenizer, collator, num_proc, progress, desc):
    """Build, shuffle and return (arrow table, summary) for one split's documents."""
    import pyarrow as pa

    if cfg.sentence_task == "nsp" and len(docs) < 2:
        raise PretrainingDataError(
            f"{desc}: next sentence prediction needs at least 2 documents, got {len(docs)}"
        )
    tasks = [
        (s, min(s + CHUNK_DOCS, len(docs)), dupe, s // CHUNK_DOCS)
        for dupe in range(cfg.effective_dupe_factor)
        for s in range(0, len(docs), CHUNK_DOCS)
    ]
    initargs = (corpus, docs, cfg, tokenizer.cls_token_id, tokenizer.sep_token_id, collator)
    parts = _run(tasks, _build_chunk, num_proc, _init_builder, initargs, f"build {desc}", progress)
    lengths = np.concatenate([p["lengths"] for p in parts])
    n = len(lengths)
    if n == 0:
        raise PretrainingDataError(f"{desc}: no instances could be built from the input")
    perm = np.random.default_rng(cfg.seed).permutation(n)
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))

    def list_column(key, dtype):
        values = pa.array(np.concatenate([p[key] for p in parts]).astype(dtype, copy=False))
        return pa.ListArray.from_arrays(offsets, values)

    columns = {
        "input_ids": list_column("input_ids", np.int32),
        "token_type_ids": list_column("token_type_ids", np.int8),
        "attention_mask": pa.ListArray.from_arrays(
            offsets, pa.array(np.ones(int(lengths.sum()), dtype=np.int8))
        ),
    }
    nsp = np.concatenate([p["next_sentence_label"] for p in parts])
    if cfg.sentence_task != "none":
        columns["next_sentence_label"] = pa.array(nsp)
    if collator is not None:
        columns["labels"] = list_column("labels", np.int32)
    table = pa.table(columns).take(pa.array(perm))
    tokens = int(lengths.sum())
    summary = {
        "documents": len(docs),
        "instances": n,
        "tokens": tokens,
        "mean_length": tokens / n,
        "padding_share_at_max_seq_length": 1.0 - tokens / (n * cfg.max_seq_length),
        "short_segments_skipped": int(sum(p["skipped_short"] for p in parts)),
    }
    if cfg.sentence_task != "none":
        summary["next_sentence_label_0_share"] = float((nsp == 0).mean())
    if collator is not None:
        labels = np.concatenate([p["labels"] for p in parts])
        summary["masked_share_of_tokens"] = float((labels != IGNORE_INDEX).mean())
    return table, summary


# ------------------------------------------------------------------------------- entry point
def _check_tokenizer(tokenizer: Any, name: str) -> None:
    missing = [
        t
        for t, i in (
            ("[CLS]", tokenizer.cls_token_id),
            ("[SEP]", tokenizer.sep_token_id),
            ("[MASK]", tokenizer.mask_token_id),
            ("[PAD]", tokenizer.pad_token_id),
        )
        if i is None
    ]
    if missing:
        raise PretrainingDataError(
            f"tokenizer {name}: vocabulary has no {', '.join(missing)} token"
        )


def _split_documents(n: int, cfg: PretrainingDataConfig):
    """Shuffle document indices with the seed; the first ones become the validation split."""
    order = np.random.default_rng(cfg.seed).permutation(n)
    n_val = cfg.num_validation_docs or int(round(n * cfg.validation_fraction))
    if n_val >= n:
        raise PretrainingDataError(f"validation split of {n_val} documents leaves none of {n}")
    return order[n_val:], order[:n_val]


def create_pretraining_data(
    inputs: Sequence[str | Path],
    output_dir: str | Path,
    tokenizer: str | Path | Any,
    config: PretrainingDataConfig | None = None,
    num_proc: int = 1,
    overwrite: bool = False,
    progress: bool = True,
    **overrides: Any,
) -> dict[str, Any]:
    """Read ``inputs``, build instances, write ``output_dir`` atomically; return the metadata.

    ``tokenizer`` is a folder/name for ``AutoTokenizer.from_pretrained`` or a loaded fast
    tokenizer. Settings come from ``config`` (a :class:`PretrainingDataConfig`) updated with
    keyword ``overrides``. Layout: ``metadata.json``, ``tokenizer/``, ``train/`` and, with a
    held-out split, ``validation/`` (``datasets`` folders of Arrow shards).
    """
    t0 = time.perf_counter()
    cfg = PretrainingDataConfig(**{**asdict(config or PretrainingDataConfig()), **overrides})
    cfg.validate()
    output_dir = Path(output_dir)
    if output_dir.exists() and not overwrite:
        raise PretrainingDataError(f"{output_dir} exists; pass overwrite=True (--overwrite)")
    if not inputs:
        raise PretrainingDataError("no input files given")
    tokenizer_name = (
        str(tokenizer) if isinstance(tokenizer, (str, Path)) else tokenizer.name_or_path
    )
    if isinstance(tokenizer, (str, Path)):
        from transformers import AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(str(tokenizer))
        except (OSError, ValueError) as err:
            raise PretrainingDataError(f"cannot load tokenizer {tokenizer}: {err}") from None
    _check_tokenizer(tokenizer, tokenizer_name)
    backend = _backend_tokenizer(tokenizer)

    collator = None
    if cfg.masking == "static":
        from .collators import build_collator

        if cfg.masking_strategy == "static":
            raise PretrainingDataError("masking_strategy for static masking must mask tokens")
        collator = build_collator(
            cfg.masking_strategy,
            tokenizer,
            mlm_probability=cfg.mlm_probability,
            mask_replace_prob=cfg.mask_replace_prob,
            random_replace_prob=cfg.random_replace_prob,
            max_predictions_per_seq=cfg.max_predictions_per_seq,
            **({"selection": "exact"} if cfg.masking_strategy != "span" else {}),
        )

    # 1. read and tokenize (one task per file; hub datasets in-process)
    stats = CorpusStats()
    read_kwargs = {
        "input_format": cfg.input_format,
        "sentence_splitter": cfg.sentence_splitter,
        "text_field": cfg.text_field,
        "on_decode_error": cfg.on_decode_error,
        "min_sentences": cfg.min_doc_sentences,
    }
    sources = [str(s) for s in inputs]
    for s in sources:
        if cfg.input_format != "hub" and not Path(s).is_file():
            raise PretrainingDataError(f"{s}: no such file")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true" if num_proc <= 1 else "false")
    parts = _run(
        sources,
        _read_and_tokenize,
        num_proc,
        _init_reader,
        (backend.to_str(), read_kwargs),
        "read+tokenize",
        progress,
    )
    for p in parts:
        part_stats = p[3]
        stats.files += part_stats.files
        for k, v in part_stats.skipped.items():
            stats.skip(k, v)
    corpus = _assemble([p[:3] for p in parts], cfg.min_doc_sentences, stats)
    if corpus.num_documents == 0:
        raise PretrainingDataError(
            f"no usable documents in {len(sources)} input(s) (skipped: {stats.skipped or 'none'})"
        )
    train_docs, val_docs = _split_documents(corpus.num_documents, cfg)
    input_tokens = int(len(corpus.tokens))

    # 2. build, 3. write to a temporary folder, renamed when complete
    output_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = output_dir.parent / f".{output_dir.name}.tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        import datasets
        from datasets.table import InMemoryTable

        splits = {"train": train_docs}
        if len(val_docs):
            splits["validation"] = val_docs
        summaries = {}
        for split, docs in splits.items():
            table, summary = _build_split(
                corpus, docs.tolist(), cfg, tokenizer, collator, num_proc, progress, split
            )
            ds = datasets.Dataset(InMemoryTable(table))
            num_shards = cfg.num_shards or max(1, math.ceil(table.nbytes / (64 << 20)))
            num_shards = min(num_shards, len(ds))
            ds.save_to_disk(str(tmp / split), num_shards=num_shards)
            summary["shards"] = num_shards
            summaries[split] = summary
            del table, ds
        tokenizer.save_pretrained(str(tmp / "tokenizer"))
        elapsed = time.perf_counter() - t0
        train = summaries["train"]
        metadata = {
            "format_version": METADATA_VERSION,
            "tokenizer": tokenizer_name,
            "vocab_size": len(tokenizer),
            "inputs": sources,
            "num_proc": num_proc,
            "config": asdict(cfg) | {"dupe_factor": cfg.effective_dupe_factor},
            "max_seq_length": cfg.max_seq_length,
            "sentence_task": cfg.sentence_task,
            "masking": cfg.masking,
            "seed": cfg.seed,
            "columns": list(table_columns(cfg)),
            "summary": {
                "files": stats.files,
                "documents": corpus.num_documents,
                "sentences": stats.sentences,
                "input_tokens": input_tokens,
                "skipped": stats.skipped,
                "splits": summaries,
                "seconds": elapsed,
                "instances_per_second": train["instances"] / elapsed,
                "tokens_per_second": train["tokens"] / elapsed,
            },
        }
        (tmp / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")
        if output_dir.exists():
            old = output_dir.parent / f".{output_dir.name}.old-{os.getpid()}"
            output_dir.rename(old)
            tmp.rename(output_dir)
            shutil.rmtree(old)
        else:
            tmp.rename(output_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return metadata


def table_columns(cfg: PretrainingDataConfig) -> tuple[str, ...]:
    """Column names written for a configuration."""
    cols = ("input_ids", "token_type_ids", "attention_mask")
    if cfg.sentence_task != "none":
        cols += ("next_sentence_label",)
    if cfg.masking == "static":
        cols += ("labels",)
    return cols


def load_metadata(path: str | Path) -> dict[str, Any]:
    """The ``metadata.json`` of a folder written by :func:`create_pretraining_data`."""
    meta = Path(path) / "metadata.json"
    if not meta.is_file():
        raise PretrainingDataError(
            f"{path}: no metadata.json (not written by create_pretraining_data)"
        )
    return json.loads(meta.read_text())


def load_pretraining_dataset(path: str | Path, split: str = "train"):
    """Load one split (all its shards) of a folder written by :func:`create_pretraining_data`
    as a ``datasets.Dataset``; ``path`` may also be a split folder itself."""
    import datasets

    path = Path(path)
    target = path / split if (path / "metadata.json").is_file() else path
    if not target.is_dir():
        raise PretrainingDataError(f"{path}: no {split!r} split")
    return datasets.load_from_disk(str(target))


__all__ += ["TokenizedCorpus", "CorpusError", "table_columns"]
