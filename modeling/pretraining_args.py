"""Every hyper-parameter of a pretraining run (:class:`PretrainingArguments`).

No heavy imports here: ``scripts/pretrain.py --help`` must be instant. Per-phase fields are
lists with one entry per phase (a single entry applies to every phase).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

OPTIMIZERS = ("adamw", "adamw_bert", "lamb")
SCHEDULES = ("bert", "linear")


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
    num_cpu_threads: int = field(
        default=0,
        metadata={
            "help": "CPU threads per process (0 = OMP_NUM_THREADS if set, else cores / "
            "processes; accelerate launch's default OMP_NUM_THREADS=1 is not taken)"
        },
    )
    seed: int = field(default=42, metadata={"help": "init, data order, masking, dropout"})
    dataloader_num_workers: int = field(default=0, metadata={"help": "collation workers"})
    # ---- checkpoints, budget
    save_steps: int = field(default=1000, metadata={"help": "checkpoint every N steps (0=end)"})
    save_total_limit: int = field(default=2, metadata={"help": "keep the last K checkpoints"})
    resume_from_checkpoint: str | None = field(
        default=None,
        metadata={
            "help": "a checkpoint folder; 'latest' (the newest in output_dir, an error if "
            "none) or 'auto' (the newest, or a new run if none)"
        },
    )
    overwrite_output_dir: bool = field(
        default=False,
        metadata={"help": "start a new run in an output_dir that holds another (removes it)"},
    )
    ignore_resume_mismatch: bool = field(
        default=False,
        metadata={"help": "resume although settings that decide the result changed"},
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
    # ---- Hub (the final output_dir/model always gets a README.md model card)
    push_to_hub: bool = field(
        default=False, metadata={"help": "upload output_dir/model to the Hub when the run ends"}
    )
    hub_model_id: str | None = field(
        default=None, metadata={"help": "repository id (default: output_dir's folder name)"}
    )
    hub_private_repo: bool = field(default=False, metadata={"help": "create it private"})
    hub_token: str | None = field(
        default=None, metadata={"help": "default: env HF_TOKEN, then the saved login"}
    )

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
        if self.push_to_hub:
            from .hub import check_push_settings, default_repo_id

            self.hub_model_id = self.hub_model_id or default_repo_id(self.output_dir)
            check_push_settings(self.hub_model_id, token=self.hub_token)

    def public_dict(self) -> dict[str, Any]:
        """The fields, without the Hub token (for logs, trackers, checkpoints, model cards)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "hub_token"}

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
