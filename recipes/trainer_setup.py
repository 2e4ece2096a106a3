"""What the Trainer-based recipes (SQuAD, NER) share: arguments, model loading, checks.

* :func:`parse_args`: ``HfArgumentParser`` over the recipe's dataclasses and the installed
  ``transformers.TrainingArguments`` (every Trainer flag works: ``--bf16``, ``--eval_strategy``,
  ``--save_strategy``, ``--resume_from_checkpoint``, ``--deepspeed``, ...); ``--config X.yaml``
  supplies defaults, flags win; BERT's fine-tuning defaults (:data:`BERT_DEFAULTS`).
* :func:`load_model` / :func:`load_tokenizer`: our fast model classes with their speed options.
* :func:`check_output_dir`, :func:`resume_arg`: refusals before any work, one line each.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modeling.cli import UsageError, load_yaml

# BERT's fine-tuning setup (Devlin et al. 2018 / Google's optimization.py): linear warmup over
# 10% of the steps, weight decay 0.01 (Trainer keeps biases and LayerNorm out of it), fused
# AdamW, clipping at 1.0; random batches (length grouping is --train_sampling_strategy
# group_by_length: less padding, lower accuracy at small data sizes, see benchmarks/README.md).
BERT_DEFAULTS: dict[str, Any] = {
    "warmup_steps": 0.1,
    "weight_decay": 0.01,
    "optim": "adamw_torch_fused",
    "max_grad_norm": 1.0,
    "logging_steps": 50,
    "average_tokens_across_devices": False,  # doubled loss logs under CPU DDP otherwise
    "train_sampling_strategy": "random",
}


@dataclass
class ModelArguments:
    model_name_or_path: str = field(
        default=None,
        metadata={"help": "pretrained checkpoint folder (ours or stock BERT) or Hub id"},
    )
    tokenizer_name: str | None = field(default=None, metadata={"help": "defaults to the model's"})
    cache_dir: str | None = field(default=None, metadata={"help": "where Hub downloads are stored"})
    unpad_inputs: bool = field(
        default=True, metadata={"help": "run the encoder on real tokens only (same math, faster)"}
    )
    attn_implementation: str = field(default="sdpa", metadata={"help": "sdpa or eager"})

    def __post_init__(self):
        if not self.model_name_or_path:
            raise ValueError("--model_name_or_path is required")


def parse_args(dataclass_types, argv=None, defaults: dict[str, Any] | None = None) -> tuple:
    """Parse ``--config`` YAML + flags into the dataclasses and ``TrainingArguments`` (last).

    Precedence: flags > YAML > ``defaults`` > :data:`BERT_DEFAULTS` > the dataclass defaults.
    An unknown YAML key, a bad value or an invalid combination is a one-line ``UsageError``."""
    import argparse
    import sys

    from transformers import HfArgumentParser, TrainingArguments

    types = [*dataclass_types, TrainingArguments]
    parser = HfArgumentParser(types)
    parser.add_argument("--config", type=str, default=None, help="YAML recipe; flags override")
    values = {**BERT_DEFAULTS, **(defaults or {})}
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--config", default=None)
    known, _ = pre.parse_known_args(sys.argv[1:] if argv is None else argv)
    dests = {a.dest for a in parser._actions}
    if known.config:
        for key, value in load_yaml(known.config).items():
            if key not in dests:
                raise UsageError(f"{known.config}: unknown field {key!r} (see --help)")
            values[key] = value
    parser.set_defaults(**values)
    try:
        *parsed, config = parser.parse_args_into_dataclasses(args=argv)
    except (TypeError, ValueError) as err:
        raise UsageError(str(err).splitlines()[0]) from None
    del config
    return tuple(parsed)


def check_output_dir(path: str | None) -> Path:
    """``output_dir`` must be a folder or not exist yet: refused before any work."""
    if not path:
        raise UsageError("--output_dir is required")
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise UsageError(f"output_dir {out} exists and is not a folder")
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UsageError(f"output_dir {out}: {parent} is not a folder")
            break
    return out


def resume_arg(training_args) -> str | bool | None:
    """``--resume_from_checkpoint``: a checkpoint folder, or ``true``/``latest`` for the newest
    ``checkpoint-*`` in ``output_dir``; anything else is refused before training."""
    value = training_args.resume_from_checkpoint
    if value is None or value is False:
        return None
    if value is True or str(value).lower() in ("true", "latest"):
        from transformers.trainer_utils import get_last_checkpoint

        out = Path(training_args.output_dir)
        if not out.is_dir() or get_last_checkpoint(str(out)) is None:
            raise UsageError(f"--resume_from_checkpoint {value}: no checkpoint-* in {out}")
        return True
    if not Path(value).is_dir():
        raise UsageError(f"--resume_from_checkpoint {value}: no such checkpoint folder")
    return str(value)


def load_tokenizer(model_args):
    from transformers import AutoTokenizer

    import modeling

    modeling.register_auto_classes()  # so that AutoTokenizer reads our config.json as ours
    name = model_args.tokenizer_name or model_args.model_name_or_path
    tokenizer = AutoTokenizer.from_pretrained(name, cache_dir=model_args.cache_dir)
    if len(tokenizer) < 10 or tokenizer.cls_token_id is None or tokenizer.sep_token_id is None:
        raise UsageError(
            f"tokenizer at {name} looks broken: {len(tokenizer)} entries, cls/sep missing?"
        )
    return tokenizer


def load_model(model_cls, model_args, **config_overrides):
    """``model_cls.from_pretrained`` with our speed options; the task head is newly initialised."""
    return model_cls.from_pretrained(
        model_args.model_name_or_path,
        cache_dir=model_args.cache_dir,
        unpad_inputs=model_args.unpad_inputs,
        attn_implementation=model_args.attn_implementation,
        **config_overrides,
    )


def model_card(trainer, model_args, task: str, dataset: str) -> None:
    """``README.md`` in ``output_dir`` (main process): Trainer's model card."""
    if trainer.is_world_process_zero():
        trainer.create_model_card(
            finetuned_from=model_args.model_name_or_path, tasks=task, dataset=dataset
        )


def as_dict(args) -> dict[str, Any]:
    return {f.name: getattr(args, f.name) for f in dataclasses.fields(args)}
