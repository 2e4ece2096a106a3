"""Arguments shared by the fine-tuning recipes (no heavy imports, so ``--help`` is instant).

Names follow ``transformers.TrainingArguments`` where they overlap.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ModelArguments:
    model_name_or_path: str = field(
        default=None,
        metadata={"help": "pretrained checkpoint folder (ours or stock BERT) or Hub id"},
    )
    tokenizer_name: str | None = field(default=None, metadata={"help": "defaults to the model's"})
    unpad_inputs: bool = field(
        default=True, metadata={"help": "run the encoder on real tokens only (same math, faster)"}
    )
    attn_implementation: str = field(default="sdpa", metadata={"help": "sdpa or eager"})

    def __post_init__(self):
        if not self.model_name_or_path:
            raise ValueError("--model_name_or_path is required")


@dataclass
class TrainingArguments:
    """Fine-tuning hyper-parameters; names follow ``transformers.TrainingArguments``."""

    output_dir: str = field(default="outputs/finetune", metadata={"help": "where results go"})
    do_train: bool = field(default=True, metadata={"help": "fine-tune"})
    do_eval: bool = field(default=True, metadata={"help": "evaluate on the dev set"})
    do_predict: bool = field(default=False, metadata={"help": "predict the test set"})
    learning_rate: float = field(default=2e-5, metadata={"help": "peak learning rate"})
    per_device_train_batch_size: int = field(default=32, metadata={"help": "batch per process"})
    per_device_eval_batch_size: int = field(default=64, metadata={"help": "eval batch per process"})
    gradient_accumulation_steps: int = field(default=1, metadata={"help": "micro-batches per step"})
    num_train_epochs: float = field(default=3.0, metadata={"help": "epochs"})
    max_steps: int = field(default=-1, metadata={"help": "stop after this many steps (>0)"})
    warmup_ratio: float = field(default=0.0, metadata={"help": "share of steps for linear warmup"})
    warmup_steps: int = field(default=0, metadata={"help": "warmup steps (wins over the ratio)"})
    weight_decay: float = field(
        default=0.0, metadata={"help": "AdamW decay (not on bias/LayerNorm)"}
    )
    adam_beta1: float = field(default=0.9, metadata={"help": "Adam beta1"})
    adam_beta2: float = field(default=0.999, metadata={"help": "Adam beta2"})
    adam_epsilon: float = field(default=1e-8, metadata={"help": "Adam epsilon"})
    max_grad_norm: float = field(default=1.0, metadata={"help": "gradient clipping (0 = off)"})
    seed: int = field(default=42, metadata={"help": "seed for init of the head, order, dropout"})
    group_by_length: bool = field(
        default=True, metadata={"help": "batch sequences of similar length (less padding)"}
    )
    logging_steps: int = field(default=50, metadata={"help": "log every N steps"})
    report_to: list[str] = field(
        default_factory=list, metadata={"help": "trackers: wandb, tensorboard (none by default)"}
    )
    run_name: str | None = field(default=None, metadata={"help": "tracker run name"})
    dataloader_num_workers: int = field(default=0, metadata={"help": "dataloader workers"})
    max_train_samples: int | None = field(default=None, metadata={"help": "truncate training set"})
    max_eval_samples: int | None = field(default=None, metadata={"help": "truncate dev set"})
    max_predict_samples: int | None = field(default=None, metadata={"help": "truncate test set"})
    save_model: bool = field(default=True, metadata={"help": "save the fine-tuned model"})
    disable_tqdm: bool = field(default=False, metadata={"help": "no progress bar"})
    # grid search (the paper's protocol); empty = just the single values above
    learning_rate_grid: list[float] = field(
        default_factory=list, metadata={"help": "learning rates to try, chosen on dev"}
    )
    batch_size_grid: list[int] = field(
        default_factory=list, metadata={"help": "batch sizes to try"}
    )
    num_train_epochs_grid: list[float] = field(
        default_factory=list, metadata={"help": "epochs to try"}
    )
    seeds: list[int] = field(default_factory=list, metadata={"help": "random restarts per setting"})

    def __post_init__(self):
        if self.per_device_train_batch_size < 1 or self.gradient_accumulation_steps < 1:
            raise ValueError("batch size and gradient_accumulation_steps must be >= 1")
        if self.learning_rate <= 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
        unknown = set(self.report_to) - {"wandb", "tensorboard", "none"}
        if unknown:
            raise ValueError(f"report_to: unknown tracker(s) {sorted(unknown)}")
