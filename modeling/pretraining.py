"""The BERT pretraining loop: one library for one CPU, one GPU, many GPUs or many nodes.

``scripts/pretrain.py`` parses :class:`PretrainingArguments` (YAML recipe + flags) and calls
:func:`pretrain`. What happens, top to bottom:

* **Phases.** ``train_data`` names one data folder per phase (written by
  ``scripts/create_pretraining_data.py``; a raw text file or glob is turned into one on the fly).
  The paper's recipe is two phases: 90% of the steps at length 128, then 10% at 512
  (``phase_fractions: [0.9, 0.1]``). Data and batch size change at the switch; the model,
  optimizer and learning-rate schedule simply continue.
* **Batches.** ``train_batch_size`` is the global batch (sequences per optimizer step, as in
  the paper); each process runs micro-batches of
  ``train_batch_size / (num_processes * gradient_accumulation_steps)`` sequences.
* **Sample-indexed order** (:class:`SampleOrder`). The data order is a pure function of
  ``(seed, epoch)``: position ``p`` of the stream is sample ``perm_{p // N}[p % N]``. Step ``s``
  of a phase reads positions ``[s * B, (s + 1) * B)``, split over accumulation micro-batches and
  processes. Resuming at any step jumps straight to its position: no skipped batches are read.
  Masking draws come from a generator seeded by ``(seed, phase, step, micro-batch, rank)``,
  so they too do not depend on what ran before.
* **Optimizers.** ``adamw`` (``torch.optim.AdamW``, bias-corrected, the default),
  ``adamw_bert`` (Google's ``AdamWeightDecayOptimizer``: no bias correction, as the reference
  code) and ``lamb`` (You et al. 2019, for large batches). Weight decay never applies to biases
  and LayerNorm. Gradients are clipped to ``max_grad_norm`` (1.0).
* **Schedule** per optimizer step: ``bert`` (the reference code: ``lr * step / warmup`` during
  warmup, then ``lr * (1 - step / max_steps)``) or ``linear`` (the ``transformers`` shape).
* **Checkpoints** (``output_dir/checkpoint-<step>/``, every ``save_steps`` and at the end,
  written to a temporary folder and renamed when complete, the last ``save_total_limit`` kept):
  ``state/`` (``accelerator.save_state``: model, optimizer, scheduler, RNG states of every
  process; DeepSpeed-aware), ``model/`` (``save_pretrained`` + tokenizer, loads in stock
  ``transformers.BertForPreTraining``) and ``trainer_state.json`` (step, phase, data position,
  log history). ``resume_from_checkpoint: latest`` picks the newest complete one.
* **Logging** every ``logging_steps``: loss, MLM/NSP loss and accuracy, learning rate, gradient
  norm, tokens/s and MFU (model FLOPs / measured dense-GEMM peak of the device) to
  ``output_dir/log.jsonl``, the progress bar, and wandb/tensorboard (``report_to``). Every
  ``eval_steps``, the same metrics on the held-out split of the current phase's data.
* **Budget stops:** ``max_steps`` (the schedule length), ``max_time`` (wall clock; saves a
  checkpoint, then stops) and ``stop_at_step`` (stop with a checkpoint without shortening the
  schedule, e.g. for time-sliced cluster jobs).

Errors in the configuration (unknown field, a batch that does not split over processes x
accumulation, missing data) raise :class:`modeling.cli.UsageError` before any work starts.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import logging
import math
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cli import UsageError
from .constants import IGNORE_INDEX

logger = logging.getLogger(__name__)

CHECKPOINT_PATTERN = re.compile(r"^checkpoint-(\d+)$")
TRAINER_STATE = "trainer_state.json"
OPTIMIZERS = ("adamw", "adamw_bert", "lamb")
SCHEDULES = ("bert", "linear")


# --------------------------------------------------------------------------------------------
# Arguments (no heavy imports here: ``--help`` must be instant)
# --------------------------------------------------------------------------------------------


@dataclass
class PretrainingArguments:
    """Every hyper-parameter of a pretraining run. Per-phase fields are lists with one entry
    per phase (a single entry applies to every phase)."""

    # ---- data
    train_data: list[str] = field(
        default_factory=list,
        metadata={
            "help": "one data folder per phase (create_pretraining_data.py output); a raw text "
            "file or glob is converted on the fly into output_dir/data/phase<i>"
        },
    )
    phase_fractions: list[float] = field(
        default_factory=lambda: [1.0],
        metadata={"help": "share of max_steps per phase (paper: 0.9 at 128, 0.1 at 512)"},
    )
    masking_strategy: str = field(
        default="token",
        metadata={
            "help": "collator: token (paper), whole_word, span, or static (data masked offline)",
            "choices": ["token", "whole_word", "span", "static"],
        },
    )
    mlm_probability: float = field(default=0.15, metadata={"help": "share of tokens predicted"})
    mask_replace_prob: float = field(default=0.8, metadata={"help": "predicted -> [MASK]"})
    random_replace_prob: float = field(default=0.1, metadata={"help": "predicted -> random"})
    max_predictions_per_seq: list[int] = field(
        default_factory=list,
        metadata={"help": "cap on predicted tokens per sequence, per phase (Google: 20, 80)"},
    )
    max_seq_length: list[int] = field(
        default_factory=lambda: [128],
        metadata={"help": "per phase; used when train_data is raw text (else from metadata)"},
    )
    tokenizer_name: str | None = field(
        default=None,
        metadata={"help": "tokenizer folder for raw-text train_data (default: train one)"},
    )
    tokenizer_vocab_size: int = field(
        default=8192, metadata={"help": "vocabulary of a tokenizer trained on raw train_data"}
    )
    num_validation_docs: int = field(
        default=100, metadata={"help": "held-out documents when converting raw train_data"}
    )
    # ---- model
    model_name_or_path: str | None = field(
        default=None, metadata={"help": "continue from a checkpoint folder (else a new model)"}
    )
    hidden_size: int = field(default=768, metadata={"help": "H"})
    num_hidden_layers: int = field(default=12, metadata={"help": "L"})
    num_attention_heads: int = field(default=12, metadata={"help": "A"})
    intermediate_size: int | None = field(default=None, metadata={"help": "default 4 H"})
    hidden_act: str = field(default="gelu", metadata={"help": "activation"})
    hidden_dropout_prob: float = field(default=0.1, metadata={"help": "dropout"})
    attention_probs_dropout_prob: float = field(default=0.1, metadata={"help": "dropout"})
    max_position_embeddings: int = field(default=512, metadata={"help": "longest sequence"})
    initializer_range: float = field(default=0.02, metadata={"help": "init std"})
    unpad_inputs: bool = field(default=True, metadata={"help": "skip padding (same math)"})
    attn_implementation: str = field(
        default="sdpa", metadata={"help": "sdpa or eager", "choices": ["sdpa", "eager"]}
    )
    # ---- optimisation
    output_dir: str = field(default="outputs/pretrain", metadata={"help": "run folder"})
    max_steps: int = field(default=1000, metadata={"help": "optimizer steps (schedule length)"})
    train_batch_size: list[int] = field(
        default_factory=lambda: [256],
        metadata={"help": "global batch (sequences per step), per phase"},
    )
    gradient_accumulation_steps: list[int] = field(
        default_factory=lambda: [1], metadata={"help": "micro-batches per step, per phase"}
    )
    optim: str = field(
        default="adamw",
        metadata={"help": "adamw, adamw_bert (Google: no bias correction), lamb"},
    )
    learning_rate: float = field(default=1e-4, metadata={"help": "peak learning rate"})
    lr_scheduler_type: str = field(
        default="bert", metadata={"help": "bert (reference code) or linear (transformers)"}
    )
    warmup_steps: int = field(default=0, metadata={"help": "warmup steps (wins over ratio)"})
    warmup_ratio: float = field(default=0.0, metadata={"help": "warmup share of max_steps"})
    weight_decay: float = field(default=0.01, metadata={"help": "not on biases/LayerNorm"})
    adam_beta1: float = field(default=0.9, metadata={"help": "beta1"})
    adam_beta2: float = field(default=0.999, metadata={"help": "beta2"})
    adam_epsilon: float = field(default=1e-6, metadata={"help": "epsilon (Google: 1e-6)"})
    max_grad_norm: float = field(default=1.0, metadata={"help": "clipping (0 = off)"})
    mixed_precision: str | None = field(
        default=None, metadata={"help": "no, bf16, fp16 (default: the accelerate config's)"}
    )
    seed: int = field(default=42, metadata={"help": "init, data order, masking, dropout"})
    dataloader_num_workers: int = field(default=0, metadata={"help": "collation workers"})
    # ---- checkpoints, budget
    save_steps: int = field(default=1000, metadata={"help": "checkpoint every N steps (0=end)"})
    save_total_limit: int = field(default=2, metadata={"help": "keep the last K checkpoints"})
    resume_from_checkpoint: str | None = field(
        default=None, metadata={"help": "a checkpoint folder or 'latest' (in output_dir)"}
    )
    max_time: str | None = field(
        default=None, metadata={"help": "wall-clock budget: seconds or 30m / 2h / 1d"}
    )
    stop_at_step: int | None = field(
        default=None, metadata={"help": "stop with a checkpoint here; schedule unchanged"}
    )
    # ---- logging, evaluation
    logging_steps: int = field(default=50, metadata={"help": "log every N steps"})
    eval_steps: int = field(default=0, metadata={"help": "evaluate every N steps (0 = end)"})
    max_eval_samples: int = field(default=2000, metadata={"help": "held-out sequences used"})
    per_device_eval_batch_size: int = field(default=64, metadata={"help": "eval batch"})
    report_to: list[str] = field(
        default_factory=list, metadata={"help": "wandb and/or tensorboard"}
    )
    run_name: str | None = field(default=None, metadata={"help": "tracker run name"})
    peak_flops: float = field(
        default=0.0,
        metadata={"help": "device peak FLOP/s for MFU (0 = measure a dense matmul)"},
    )
    disable_tqdm: bool = field(default=False, metadata={"help": "no progress bar"})

    def __post_init__(self):
        self.validate()

    # Per-phase lists -------------------------------------------------------------------------
    @property
    def num_phases(self) -> int:
        return max(1, len(self.train_data))

    def per_phase(self, name: str) -> list:
        values = getattr(self, name)
        if not values:
            return [None] * self.num_phases
        return list(values) * self.num_phases if len(values) == 1 else list(values)

    def validate(self) -> None:
        """Checks that need no data and no devices (raises ValueError with the field name)."""
        if not self.train_data:
            raise ValueError("train_data: give one data folder (or raw text file) per phase")
        for name in (
            "phase_fractions",
            "train_batch_size",
            "gradient_accumulation_steps",
            "max_predictions_per_seq",
            "max_seq_length",
        ):
            values = getattr(self, name)
            if len(values) not in (0, 1, self.num_phases):
                raise ValueError(
                    f"{name}: {len(values)} values for {self.num_phases} phases (give 1 or "
                    f"{self.num_phases})"
                )
        fractions = self.per_phase("phase_fractions")
        if len(self.phase_fractions) == 1 and self.num_phases > 1:
            raise ValueError("phase_fractions: give one share per phase")
        if any(f <= 0 for f in fractions) or abs(sum(fractions) - 1.0) > 1e-6:
            raise ValueError(f"phase_fractions must be positive and sum to 1, got {fractions}")
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")
        if min(self.phase_steps()) < 1:
            raise ValueError(
                f"max_steps={self.max_steps} leaves a phase without steps ({self.phase_steps()})"
            )
        for name in ("train_batch_size", "gradient_accumulation_steps"):
            if any(v < 1 for v in getattr(self, name)):
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.optim not in OPTIMIZERS:
            raise ValueError(f"optim must be one of {OPTIMIZERS}, got {self.optim!r}")
        if self.lr_scheduler_type not in SCHEDULES:
            raise ValueError(
                f"lr_scheduler_type must be one of {SCHEDULES}, got {self.lr_scheduler_type!r}"
            )
        if self.learning_rate <= 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        if self.mixed_precision not in (None, "no", "bf16", "fp16"):
            raise ValueError(f"mixed_precision must be no, bf16 or fp16: {self.mixed_precision!r}")
        unknown = set(self.report_to) - {"wandb", "tensorboard", "none"}
        if unknown:
            raise ValueError(f"report_to: unknown tracker(s) {sorted(unknown)}")
        if self.max_time is not None:
            parse_duration(self.max_time)
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size} is not a multiple of num_attention_heads "
                f"{self.num_attention_heads}"
            )

    def phase_steps(self) -> list[int]:
        """Optimizer steps per phase (cumulative rounding, so they sum to max_steps)."""
        bounds, acc = [0], 0.0
        for f in self.per_phase("phase_fractions"):
            acc += f
            bounds.append(round(acc * self.max_steps))
        bounds[-1] = self.max_steps
        return [b - a for a, b in zip(bounds[:-1], bounds[1:])]

    @property
    def warmup(self) -> int:
        return self.warmup_steps or int(self.warmup_ratio * self.max_steps)


def parse_duration(text: str | float | int) -> float:
    """Seconds from ``90``, ``90s``, ``30m``, ``1.5h`` or ``2d``."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([smhd]?)\s*", str(text))
    if not m:
        raise ValueError(f"max_time: expected seconds or a number with s/m/h/d, got {text!r}")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


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
        import numpy as np

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


def _mix_seed(*parts: int) -> int:
    import numpy as np

    return int(np.random.SeedSequence([p & 0xFFFFFFFF for p in parts]).generate_state(1)[0])


def collate_rows(dataset, indices: list[int], collator, seed: int) -> dict:
    """Fetch rows ``indices`` of a pretraining dataset and collate (mask) them with a generator
    seeded by ``seed``, so the masks depend on nothing else."""
    import torch

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
        seed = _mix_seed(self.seed, self.phase, step + self.first_step, m, self.rank)
        return collate_rows(self.dataset, self.sample_indices(k), self.collator, seed)


# --------------------------------------------------------------------------------------------
# Optimizers and schedules
# --------------------------------------------------------------------------------------------


def _optimizer_class():
    import torch

    class Lamb(torch.optim.Optimizer):
        """LAMB (You et al. 2019) and, with ``trust_ratio=False``, AdamW.

        Update: ``u = m_hat / (sqrt(v_hat) + eps) + weight_decay * p``; with the trust ratio,
        ``p -= lr * (||p|| / ||u||) * u`` (ratio 1 when either norm is 0), otherwise
        ``p -= lr * u``. With ``bias_correction=False`` ``m_hat = m`` and ``v_hat = v``: this is
        Google BERT's ``AdamWeightDecayOptimizer``. Options are per parameter group.
        """

        def __init__(
            self,
            params,
            lr: float = 1e-3,
            betas: tuple[float, float] = (0.9, 0.999),
            eps: float = 1e-6,
            weight_decay: float = 0.0,
            bias_correction: bool = True,
            trust_ratio: bool = True,
        ):
            defaults = dict(
                lr=lr,
                betas=betas,
                eps=eps,
                weight_decay=weight_decay,
                bias_correction=bias_correction,
                trust_ratio=trust_ratio,
            )
            super().__init__(params, defaults)

        @torch.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            for group in self.param_groups:
                beta1, beta2 = group["betas"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    if not state:
                        state["step"] = 0
                        state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                        state["exp_avg_sq"] = torch.zeros_like(
                            p, memory_format=torch.preserve_format
                        )
                    state["step"] += 1
                    m, v = state["exp_avg"], state["exp_avg_sq"]
                    m.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                    v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                    if group["bias_correction"]:
                        m_hat = m / (1 - beta1 ** state["step"])
                        v_hat = v / (1 - beta2 ** state["step"])
                    else:
                        m_hat, v_hat = m, v
                    update = m_hat / (v_hat.sqrt() + group["eps"])
                    if group["weight_decay"]:
                        update.add_(p, alpha=group["weight_decay"])
                    ratio = 1.0
                    if group["trust_ratio"]:
                        w_norm, u_norm = p.norm(), update.norm()
                        ratio = torch.where(
                            (w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm)
                        )
                    p.sub_(update * (group["lr"] * ratio))
            return loss

    return Lamb


def param_groups(model, weight_decay: float) -> list[dict]:
    """Weight decay on weights only: not on biases or LayerNorm parameters (as in BERT)."""
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        is_norm_or_bias = name.endswith("bias") or "LayerNorm" in name or param.ndim == 1
        (no_decay if is_norm_or_bias else decay).append(param)
    return [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]


def build_optimizer(model, args: PretrainingArguments):
    """AdamW / Google's AdamWeightDecay / LAMB; no weight decay (and, for LAMB, no layer
    adaptation, as in the ALBERT/TF implementation) on biases and LayerNorm."""
    import torch

    groups = param_groups(model, args.weight_decay)
    common = dict(lr=args.learning_rate, betas=(args.adam_beta1, args.adam_beta2))
    if args.optim == "adamw":
        return torch.optim.AdamW(groups, eps=args.adam_epsilon, **common)
    lamb = args.optim == "lamb"
    for g in groups:
        g["trust_ratio"] = lamb and g["weight_decay"] > 0
    return _optimizer_class()(
        groups, eps=args.adam_epsilon, bias_correction=lamb, trust_ratio=lamb, **common
    )


def lr_factor(step: int, kind: str, warmup: int, total: int) -> float:
    """Learning-rate multiplier at optimizer step ``step`` (0-based).

    ``bert``: Google's ``optimization.py``: ``step / warmup`` while ``step < warmup``, then
    ``1 - step / total`` (polynomial decay of power 1 counted from step 0, so the rate drops
    to ``1 - warmup / total`` right after warmup, as in the reference code).
    ``linear``: ``transformers``' linear warmup/decay: ``step / warmup`` then
    ``(total - step) / (total - warmup)``.
    """
    if step < warmup:
        return step / warmup
    if kind == "bert":
        return max(0.0, 1.0 - step / total)
    return max(0.0, (total - step) / max(1, total - warmup))


def build_scheduler(optimizer, args: PretrainingArguments):
    import torch

    kind, warmup, total = args.lr_scheduler_type, args.warmup, args.max_steps
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: lr_factor(step, kind, warmup, total)
    )


# --------------------------------------------------------------------------------------------
# Data and model set-up
# --------------------------------------------------------------------------------------------


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


def _is_prepared(path: Path) -> bool:
    return (path / "metadata.json").is_file()


def check_data_paths(args: PretrainingArguments) -> None:
    """Every train_data entry is a prepared folder or matches raw text files."""
    for i, entry in enumerate(args.train_data):
        path = Path(entry)
        if path.is_dir() and not _is_prepared(path):
            raise UsageError(
                f"train_data[{i}]: {path} has no metadata.json (not written by "
                "scripts/create_pretraining_data.py)"
            )
        if not path.is_dir() and not glob.glob(entry):
            raise UsageError(f"train_data[{i}]: {entry} not found")


def resolve_data(args: PretrainingArguments, accelerator=None) -> list[Path]:
    """Each phase's prepared data folder; raw text is converted (on the main process)."""
    from .pretraining_data import load_metadata

    check_data_paths(args)
    folders: list[Path] = []
    lengths = args.per_phase("max_seq_length")
    tokenizer = args.tokenizer_name
    for i, entry in enumerate(args.train_data):
        path = Path(entry)
        if _is_prepared(path):
            folders.append(path)
            continue
        files = sorted(glob.glob(entry))
        target = Path(args.output_dir) / "data" / f"phase{i}-{lengths[i]}"
        folders.append(target)
        if _is_prepared(target) and load_metadata(target)["inputs"] == files:
            continue  # converted by an earlier run (e.g. the one being resumed)
        is_main = accelerator is None or accelerator.is_main_process
        if is_main:
            tokenizer = tokenizer or _train_tokenizer(files, args)
            from .pretraining_data import create_pretraining_data

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
    from .tokenizer_training import train_wordpiece

    out = Path(args.output_dir) / "data" / "tokenizer"
    if not (out / "tokenizer_config.json").is_file():
        logger.info(
            "training a %d-entry WordPiece tokenizer on %s", args.tokenizer_vocab_size, files
        )
        train_wordpiece(files, out, vocab_size=args.tokenizer_vocab_size)
    return str(out)


def build_phases(args: PretrainingArguments, folders: list[Path]) -> list[Phase]:
    from .pretraining_data import load_metadata

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


def build_model(args: PretrainingArguments, vocab_size: int, pad_token_id: int):
    from . import BertConfig, BertForPreTraining

    if args.model_name_or_path:
        return BertForPreTraining.from_pretrained(
            args.model_name_or_path,
            unpad_inputs=args.unpad_inputs,
            attn_implementation=args.attn_implementation,
        )
    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=args.hidden_size,
        num_hidden_layers=args.num_hidden_layers,
        num_attention_heads=args.num_attention_heads,
        intermediate_size=args.intermediate_size or 4 * args.hidden_size,
        hidden_act=args.hidden_act,
        hidden_dropout_prob=args.hidden_dropout_prob,
        attention_probs_dropout_prob=args.attention_probs_dropout_prob,
        max_position_embeddings=args.max_position_embeddings,
        initializer_range=args.initializer_range,
        pad_token_id=pad_token_id,
        unpad_inputs=args.unpad_inputs,
        sparse_prediction_head=True,
    )
    config._attn_implementation = args.attn_implementation
    return BertForPreTraining(config)


def build_collator(args: PretrainingArguments, tokenizer, phase: Phase):
    from .collators import build_collator as _build

    if args.masking_strategy == "static":
        return _build("static", tokenizer)
    return _build(
        args.masking_strategy,
        tokenizer,
        mlm_probability=args.mlm_probability,
        mask_replace_prob=args.mask_replace_prob,
        random_replace_prob=args.random_replace_prob,
        max_predictions_per_seq=phase.max_predictions,
    )


# --------------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------------


class Meter:
    """Sums of losses and correct counts, kept on the device until a log step."""

    KEYS = ("loss", "mlm_loss", "nsp_loss", "batches", "mlm_correct", "mlm_total",
            "nsp_correct", "nsp_total")  # fmt: skip

    def __init__(self, device):
        import torch

        self.device = device
        self.values = torch.zeros(len(self.KEYS), dtype=torch.float64, device=device)

    def add(self, out, batch) -> None:
        import torch

        with torch.no_grad():
            labels = batch["labels"]
            selected = labels[labels != IGNORE_INDEX]
            logits = out.prediction_logits
            if logits.dim() == 3:  # dense head
                logits = logits[labels != IGNORE_INDEX]
            correct = (logits.argmax(-1) == selected).sum()
            row = [
                out.loss.detach(),
                out.mlm_loss.detach(),
                out.nsp_loss.detach()
                if out.nsp_loss is not None
                else torch.zeros((), device=self.device),
                torch.ones((), device=self.device),
                correct,
                torch.tensor(selected.numel(), device=self.device),
            ]
            if "next_sentence_label" in batch:
                nsp = batch["next_sentence_label"]
                row += [(out.seq_relationship_logits.argmax(-1) == nsp).sum(),
                        torch.tensor(nsp.numel(), device=self.device)]  # fmt: skip
            else:
                row += [torch.zeros((), device=self.device)] * 2
            self.values += torch.stack([r.to(torch.float64) for r in row])

    def summary(self, accelerator, prefix: str = "") -> dict[str, float]:
        """Reduce over processes and reset; losses are means over micro-batches."""
        total = accelerator.reduce(self.values.clone(), reduction="sum").tolist()
        self.values.zero_()
        v = dict(zip(self.KEYS, total))
        n = max(1.0, v["batches"])
        out = {
            f"{prefix}loss": v["loss"] / n,
            f"{prefix}mlm_loss": v["mlm_loss"] / n,
            f"{prefix}mlm_accuracy": v["mlm_correct"] / max(1.0, v["mlm_total"]),
        }
        if v["nsp_total"]:
            out[f"{prefix}nsp_loss"] = v["nsp_loss"] / n
            out[f"{prefix}nsp_accuracy"] = v["nsp_correct"] / v["nsp_total"]
        return out


def measure_peak_flops(device, dtype=None, size: int | None = None, repeats: int = 10) -> float:
    """Dense-matmul FLOP/s of this device and thread count (best of ``repeats``): the MFU
    denominator. On a shared machine it is measured under whatever load is there at start;
    pass ``peak_flops`` for a fixed denominator."""
    import torch

    size = size or (8192 if device.type == "cuda" else 1024)
    dtype = dtype or torch.float32
    # constant inputs: drawing random ones would move the global RNG (dropout) state
    a = torch.full((size, size), 0.5, device=device, dtype=dtype)
    b = torch.full((size, size), 0.25, device=device, dtype=dtype)
    torch.matmul(a, b)
    best = float("inf")
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        torch.matmul(a, b)
        if device.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return 2 * size**3 / best


def _matmul_dtype(accelerator):
    """The dtype the model's matmuls run in (mixed precision only on GPUs)."""
    import torch

    if accelerator.device.type != "cuda":
        return torch.float32
    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(
        accelerator.mixed_precision, torch.float32
    )


def batch_flops(config, batch: dict) -> float:
    """Training FLOPs of one micro-batch (3x forward: forward + backward)."""
    from . import forward_flops_per_token

    tokens = float(batch["attention_mask"].sum())
    masked = float((batch["labels"] != IGNORE_INDEX).sum())
    width = batch["attention_mask"].shape[1]
    return 3 * forward_flops_per_token(config, width, masked / max(1.0, tokens)) * tokens


def unigram_baseline(dataset, collator, num_samples: int = 2000, seed: int = 0) -> dict:
    """MLM accuracy of always predicting the most frequent masked token (a floor to beat)."""
    import collections

    n = min(num_samples, len(dataset))
    counts: collections.Counter = collections.Counter()
    for i in range(0, n, 256):
        batch = collate_rows(dataset, list(range(i, min(i + 256, n))), collator, seed + i)
        labels = batch["labels"]
        counts.update(labels[labels != IGNORE_INDEX].tolist())
    token, hits = counts.most_common(1)[0]
    return {
        "token_id": token,
        "accuracy": hits / sum(counts.values()),
        "masked": sum(counts.values()),
    }


# --------------------------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------------------------


def list_checkpoints(output_dir: str | Path) -> list[Path]:
    """Complete checkpoints (with trainer_state.json), oldest first."""
    root = Path(output_dir)
    if not root.is_dir():
        return []
    found = []
    for d in root.iterdir():
        m = CHECKPOINT_PATTERN.match(d.name)
        if m and (d / TRAINER_STATE).is_file():
            found.append((int(m.group(1)), d))
    return [d for _, d in sorted(found)]


def find_checkpoint(spec: str, output_dir: str | Path) -> Path | None:
    if spec == "latest":
        found = list_checkpoints(output_dir)
        return found[-1] if found else None
    path = Path(spec)
    if not (path / TRAINER_STATE).is_file():
        raise UsageError(f"resume_from_checkpoint: {path} is not a complete checkpoint")
    return path


def param_fingerprint(model) -> str:
    """SHA-256 of all parameters (in name order): equal on every process of a healthy run."""
    digest = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(p.detach().float().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def save_pretrained_folder(accelerator, model, tokenizer, target: Path) -> None:
    """``save_pretrained`` (config, safetensors) + tokenizer, on the main process."""
    state_dict = accelerator.get_state_dict(model)
    if accelerator.is_main_process:
        unwrapped = accelerator.unwrap_model(model)
        unwrapped.save_pretrained(str(target), state_dict=state_dict, safe_serialization=True)
        tokenizer.save_pretrained(str(target))


class Checkpointer:
    def __init__(self, accelerator, model, tokenizer, args: PretrainingArguments):
        self.accelerator, self.model, self.tokenizer, self.args = (
            accelerator,
            model,
            tokenizer,
            args,
        )
        self.root = Path(args.output_dir)

    def save(self, state: dict) -> Path:
        acc = self.accelerator
        final = self.root / f"checkpoint-{state['step']:07d}"
        tmp = self.root / f".{final.name}.tmp"
        if acc.is_main_process:
            if tmp.exists():
                shutil.rmtree(tmp)
            tmp.mkdir(parents=True)
        acc.wait_for_everyone()
        acc.save_state(str(tmp / "state"), safe_serialization=False)
        save_pretrained_folder(acc, self.model, self.tokenizer, tmp / "model")
        acc.wait_for_everyone()
        if acc.is_main_process:
            (tmp / TRAINER_STATE).write_text(json.dumps(state, indent=1) + "\n")
            if final.exists():
                shutil.rmtree(final)
            tmp.rename(final)
            for old in list_checkpoints(self.root)[: -max(1, self.args.save_total_limit)]:
                shutil.rmtree(old, ignore_errors=True)
        acc.wait_for_everyone()
        return final


# --------------------------------------------------------------------------------------------
# The loop
# --------------------------------------------------------------------------------------------


def _flat_config(args: PretrainingArguments) -> dict:
    return {k: (str(v) if isinstance(v, (list, dict)) or v is None else v)
            for k, v in dataclasses.asdict(args).items()}  # fmt: skip


def _make_accelerator(args: PretrainingArguments, needs_unused: bool):
    from accelerate import Accelerator
    from accelerate.utils import DistributedDataParallelKwargs

    trackers = [t for t in args.report_to if t != "none"]
    kwargs: dict[str, Any] = {}
    if args.mixed_precision:
        kwargs["mixed_precision"] = args.mixed_precision
    handlers = [DistributedDataParallelKwargs(find_unused_parameters=True)] if needs_unused else []
    # `accelerate launch` on a machine without GPUs starts WORLD_SIZE processes but each one
    # stays single-process unless told to use the CPU: then they join one gloo group.
    import torch

    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not torch.cuda.is_available():
        kwargs["cpu"] = True
    return Accelerator(
        log_with=trackers or None,
        project_dir=args.output_dir,
        kwargs_handlers=handlers,
        **kwargs,
    )


def _is_deepspeed(accelerator) -> bool:
    from accelerate.utils import DistributedType

    return accelerator.distributed_type == DistributedType.DEEPSPEED


def evaluate(accelerator, model, dataset, collator, args: PretrainingArguments) -> dict[str, float]:
    """MLM/NSP loss and accuracy on the first ``max_eval_samples`` held-out sequences, masked
    with a fixed seed (comparable across steps), split over processes.

    Every process runs the same number of forward passes (a process without a batch of its own
    repeats batch 0 and discards it), since DDP and ZeRO-3 forwards are collective."""
    import torch

    n = min(args.max_eval_samples, len(dataset))
    bs = args.per_device_eval_batch_size
    rank, world = accelerator.process_index, accelerator.num_processes
    starts = list(range(0, n, bs))
    rounds = math.ceil(len(starts) / world)
    meter = Meter(accelerator.device)
    net = model if _is_deepspeed(accelerator) else accelerator.unwrap_model(model)
    was_training = net.training
    net.eval()
    with torch.no_grad():
        for r in range(rounds):
            b = r * world + rank
            start = starts[b] if b < len(starts) else 0
            indices = list(range(start, min(start + bs, n)))
            batch = collate_rows(dataset, indices, collator, _mix_seed(args.seed, 7919, start))
            batch = {k: v.to(accelerator.device) for k, v in batch.items()}
            out = net(**batch)
            if b < len(starts):
                meter.add(out, batch)
    net.train(was_training)
    return meter.summary(accelerator, prefix="eval_")


def pretrain(args: PretrainingArguments) -> dict[str, Any]:
    """Run (or resume) pretraining; return the final metrics (also in train_results.json)."""
    # Everything that can fail cheaply fails before models, devices and heavy imports.
    check_data_paths(args)
    t_start = time.perf_counter()
    import torch
    from transformers import AutoTokenizer

    from . import atomic
    from .pretraining_data import PretrainingDataError, load_pretraining_dataset

    out_dir = Path(args.output_dir)
    budget = parse_duration(args.max_time) if args.max_time else None
    folders = [Path(p) for p in args.train_data]
    prepared = all(_is_prepared(p) for p in folders)
    if prepared:
        phases = build_phases(args, folders)
    has_nsp = not prepared or all(p.metadata["sentence_task"] != "none" for p in phases)
    accelerator = _make_accelerator(args, needs_unused=not has_nsp)
    if not prepared:
        phases = build_phases(args, resolve_data(args, accelerator))
    check_batches(phases, accelerator.num_processes)
    deepspeed = _is_deepspeed(accelerator)
    if deepspeed and len({p.accumulation for p in phases}) > 1:
        raise UsageError(
            "gradient_accumulation_steps must be the same in every phase with DeepSpeed"
        )

    tokenizer = AutoTokenizer.from_pretrained(str(phases[0].path / "tokenizer"))
    try:
        train_sets = [load_pretraining_dataset(p.path, "train") for p in phases]
    except PretrainingDataError as err:
        raise UsageError(str(err)) from None
    eval_sets = [
        load_pretraining_dataset(p.path, "validation") if (p.path / "validation").is_dir() else None
        for p in phases
    ]

    torch.manual_seed(args.seed)
    model = build_model(args, len(tokenizer), tokenizer.pad_token_id)
    optimizer = build_optimizer(model, args)
    scheduler = build_scheduler(optimizer, args)
    if deepspeed:
        ds = accelerator.state.deepspeed_plugin.deepspeed_config
        p0 = phases[0]
        ds["train_micro_batch_size_per_gpu"] = p0.global_batch // (
            accelerator.num_processes * p0.accumulation
        )
        ds["gradient_accumulation_steps"] = p0.accumulation
        if ds.get("gradient_clipping") == "auto":
            ds["gradient_clipping"] = args.max_grad_norm
    model, optimizer = accelerator.prepare(model, optimizer)
    accelerator.register_for_checkpointing(scheduler)
    config = accelerator.unwrap_model(model).config

    # ---- resume
    step, log_history, elapsed_before = 0, [], 0.0
    ckpt = (
        find_checkpoint(args.resume_from_checkpoint, out_dir)
        if args.resume_from_checkpoint
        else None
    )
    if args.resume_from_checkpoint and ckpt is None:
        logger.warning("no checkpoint in %s: starting from scratch", out_dir)
    if ckpt is not None:
        state = json.loads((ckpt / TRAINER_STATE).read_text())
        if state["max_steps"] != args.max_steps:
            raise UsageError(
                f"{ckpt}: saved with max_steps={state['max_steps']}, now {args.max_steps}; the "
                "schedule and phase boundaries would change"
            )
        accelerator.load_state(str(ckpt / "state"))
        step, log_history = state["step"], state["log_history"]
        elapsed_before = state.get("train_seconds", 0.0)
        accelerator.print(f"resumed from {ckpt} at step {step}")
    log_history = [r for r in log_history if r["step"] <= step]
    log_path = out_dir / "log.jsonl"
    if accelerator.is_main_process:
        out_dir.mkdir(parents=True, exist_ok=True)
        atomic.write_text(log_path, "".join(json.dumps(r) + "\n" for r in log_history))
    if args.report_to:
        accelerator.init_trackers(args.run_name or out_dir.name, config=_flat_config(args))

    peak = args.peak_flops or measure_peak_flops(accelerator.device, _matmul_dtype(accelerator))
    checkpointer = Checkpointer(accelerator, model, tokenizer, args)
    from tqdm.auto import tqdm

    progress = tqdm(
        total=args.max_steps,
        initial=step,
        desc="pretrain",
        unit="step",
        disable=args.disable_tqdm or not accelerator.is_local_main_process,
    )
    meter = Meter(accelerator.device)
    window = {"tokens": 0.0, "flops": 0.0, "sequences": 0.0, "t0": time.perf_counter()}
    grad_norm = torch.zeros((), device=accelerator.device)
    stop_reason = "max_steps"
    t_loop = time.perf_counter()

    def trainer_state() -> dict:
        phase = (
            next(p for p in phases if step < p.first_global_step + p.steps)
            if step < args.max_steps
            else phases[-1]
        )
        return {
            "step": step,
            "max_steps": args.max_steps,
            "phase": phase.index,
            "phase_step": step - phase.first_global_step,
            "data_position": (step - phase.first_global_step) * phase.global_batch,
            "train_seconds": elapsed_before + time.perf_counter() - t_loop,
            "num_processes": accelerator.num_processes,
            "log_history": log_history,
            "args": dataclasses.asdict(args),
        }

    def record(values: dict) -> None:
        values = {"step": step, **values}
        log_history.append(values)
        if accelerator.is_main_process:
            with open(log_path, "a") as fh:
                fh.write(json.dumps(values) + "\n")
        if args.report_to:
            accelerator.log({k: v for k, v in values.items() if k != "step"}, step=step)

    def run_eval(phase: Phase) -> None:
        if eval_sets[phase.index] is None:
            return
        collator = build_collator(args, tokenizer, phase)
        record(
            {
                "phase": phase.index,
                **evaluate(accelerator, model, eval_sets[phase.index], collator, args),
            }
        )

    model.train()
    done = step >= args.max_steps
    for phase in phases:
        if done or step >= phase.first_global_step + phase.steps:
            continue
        accelerator.gradient_accumulation_steps = phase.accumulation
        accelerator.step = 0
        collator = build_collator(args, tokenizer, phase)
        batches = PhaseBatches(
            train_sets[phase.index],
            collator,
            SampleOrder(len(train_sets[phase.index]), _mix_seed(args.seed, phase.index)),
            phase.index,
            step - phase.first_global_step,
            phase.steps,
            phase.global_batch,
            phase.accumulation,
            accelerator.num_processes,
            accelerator.process_index,
            args.seed,
        )
        loader = torch.utils.data.DataLoader(
            batches,
            batch_size=None,
            shuffle=False,
            num_workers=args.dataloader_num_workers,
            generator=torch.Generator(),  # never touch the global RNG (dropout state)
            persistent_workers=False,
        )
        accelerator.print(
            f"phase {phase.index}: {phase.path} (length {phase.max_seq_length}, "
            f"{len(train_sets[phase.index])} sequences), steps {step}->"
            f"{phase.first_global_step + phase.steps}, global batch {phase.global_batch} = "
            f"{accelerator.num_processes} process(es) x {phase.accumulation} x {batches.micro}"
        )
        for batch in loader:
            window["tokens"] += float(batch["attention_mask"].sum())
            window["sequences"] += batch["attention_mask"].shape[0]
            window["flops"] += batch_flops(config, batch)
            batch = {k: v.to(accelerator.device, non_blocking=True) for k, v in batch.items()}
            with accelerator.accumulate(model):
                out = model(**batch)
                accelerator.backward(out.loss)
                if accelerator.sync_gradients and args.max_grad_norm > 0:
                    norm = accelerator.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                    if norm is not None:
                        grad_norm = norm.detach() if torch.is_tensor(norm) else torch.tensor(norm)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                if deepspeed and accelerator.sync_gradients:  # DeepSpeed clips inside its step
                    norm = model.get_global_grad_norm()
                    grad_norm = torch.tensor(float(norm if norm is not None else 0.0))
            meter.add(out, batch)
            if not accelerator.sync_gradients:
                continue
            lr = scheduler.get_last_lr()[0]
            scheduler.step()
            step += 1
            progress.update(1)
            last = step == args.max_steps
            if step % args.logging_steps == 0 or last:
                now = time.perf_counter()
                seconds = now - window["t0"]
                totals = accelerator.reduce(
                    torch.tensor([window["tokens"], window["flops"], window["sequences"]],
                                 dtype=torch.float64, device=accelerator.device), reduction="sum"
                ).tolist()  # fmt: skip
                values = {
                    "phase": phase.index,
                    **meter.summary(accelerator),
                    "learning_rate": lr,
                    "grad_norm": float(grad_norm),
                    "tokens_per_second": totals[0] / seconds,
                    "sequences_per_second": totals[2] / seconds,
                    "mfu": totals[1] / seconds / (peak * accelerator.num_processes),
                    "elapsed_seconds": elapsed_before + now - t_loop,
                }
                record(values)
                progress.set_postfix(
                    loss=f"{values['loss']:.3f}",
                    mlm_acc=f"{values['mlm_accuracy']:.3f}",
                    tok_s=f"{values['tokens_per_second']:.0f}",
                    mfu=f"{values['mfu']:.2f}",
                )
                window = {"tokens": 0.0, "flops": 0.0, "sequences": 0.0, "t0": time.perf_counter()}
            if args.eval_steps and step % args.eval_steps == 0 and not last:
                run_eval(phase)
            stop = None
            if args.stop_at_step is not None and step >= args.stop_at_step and not last:
                stop = "stop_at_step"
            elif budget is not None:
                over = torch.tensor(
                    float(time.perf_counter() - t_start >= budget), device=accelerator.device
                )
                if accelerator.reduce(over, reduction="max").item() > 0 and not last:
                    stop = "max_time"
            if stop or last or (args.save_steps and step % args.save_steps == 0):
                if last:
                    run_eval(phase)
                checkpointer.save(trainer_state())
            if stop:
                stop_reason = stop
                done = True
                break
            if last:
                done = True
                break
        if done:
            break
    progress.close()

    # ---- final model, fingerprints, results
    from accelerate.utils import gather_object

    fingerprints = gather_object([param_fingerprint(accelerator.unwrap_model(model))])
    results = {
        "step": step,
        "stop_reason": stop_reason,
        "num_processes": accelerator.num_processes,
        "param_fingerprints": fingerprints,
        "ranks_identical": len(set(fingerprints)) == 1,
        "train_seconds": elapsed_before + time.perf_counter() - t_loop,
        "peak_flops_per_process": peak,
        "last_log": next((r for r in reversed(log_history) if "loss" in r), None),
        "last_eval": next((r for r in reversed(log_history) if "eval_loss" in r), None),
    }
    if eval_sets[0] is not None and accelerator.is_main_process:
        # the floor an MLM accuracy must beat: always answering the commonest masked token
        results["unigram_baseline"] = unigram_baseline(
            eval_sets[0], build_collator(args, tokenizer, phases[0]), args.max_eval_samples
        )
    if stop_reason == "max_steps" and accelerator.is_main_process:
        # the final save_pretrained folder at a fixed place: output_dir/model
        final_src = out_dir / f"checkpoint-{step:07d}" / "model"
        with atomic.atomic_dir(out_dir / "model") as tmp:
            for f in final_src.iterdir():
                shutil.copy2(f, tmp / f.name)
    if accelerator.is_main_process:
        atomic.write_json(out_dir / "train_results.json", results)
    accelerator.wait_for_everyone()
    if args.report_to:
        accelerator.end_training()
    if not results["ranks_identical"]:
        raise RuntimeError(f"processes ended with different weights: {fingerprints}")
    return results


# --------------------------------------------------------------------------------------------
# Curves
# --------------------------------------------------------------------------------------------

CURVE_COLUMNS = (
    "step", "phase", "elapsed_seconds", "loss", "mlm_loss", "mlm_accuracy", "nsp_loss",
    "nsp_accuracy", "learning_rate", "grad_norm", "tokens_per_second", "mfu", "eval_mlm_loss",
    "eval_mlm_accuracy", "eval_nsp_accuracy",
)  # fmt: skip


def write_curves(
    log_path: str | Path,
    csv_path: str | Path,
    png_path: str | Path | None = None,
    baseline: float | None = None,
) -> list[dict]:
    """Turn a run's ``log.jsonl`` into a CSV (training and evaluation rows merged per step) and,
    with matplotlib installed, a PNG of the MLM loss/accuracy and NSP accuracy curves."""
    import csv

    from . import atomic

    rows: dict[int, dict] = {}
    for line in Path(log_path).read_text().splitlines():
        record = json.loads(line)
        rows.setdefault(record["step"], {}).update(record)
    table = [rows[s] for s in sorted(rows)]
    with atomic.atomic_open(csv_path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=CURVE_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(table)
    if png_path is None:
        return table
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def series(key):
        pts = [(r["step"], r[key]) for r in table if r.get(key) is not None]
        return [p[0] for p in pts], [p[1] for p in pts]

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for ax, keys, title in (
        (axes[0], ("mlm_loss", "eval_mlm_loss"), "MLM loss"),
        (axes[1], ("mlm_accuracy", "eval_mlm_accuracy"), "MLM accuracy"),
        (axes[2], ("nsp_accuracy", "eval_nsp_accuracy"), "NSP accuracy"),
    ):
        for key, style in zip(keys, ("-", "o-")):
            x, y = series(key)
            if x:
                ax.plot(x, y, style, label=key, markersize=3)
        if title == "MLM accuracy" and baseline is not None:
            ax.axhline(baseline, color="gray", linestyle="--", label="unigram baseline")
        switches = [r["step"] for a, r in zip(table, table[1:]) if a.get("phase") != r.get("phase")]
        for s in switches:
            ax.axvline(s, color="red", linestyle=":", label="phase switch")
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.legend(fontsize=8)
    fig.tight_layout()
    Path(png_path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png_path, dpi=90)
    plt.close(fig)
    return table
