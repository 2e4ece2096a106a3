"""The model card and the Hub upload of a fine-tuning run (through :mod:`modeling.hub`)."""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modeling.cli import UsageError

if TYPE_CHECKING:
    from .runner import Arguments, Task

logger = logging.getLogger(__name__)


def _hyper_parameters(training_args) -> dict[str, Any]:
    keys = (
        "learning_rate",
        "per_device_train_batch_size",
        "gradient_accumulation_steps",
        "num_train_epochs",
        "max_steps",
        "warmup_steps",
        "weight_decay",
        "lr_scheduler_type",
        "optim",
        "max_grad_norm",
        "seed",
        "bf16",
        "train_sampling_strategy",
    )
    out = {k: getattr(training_args, k) for k in keys}
    out = {k: getattr(v, "value", v) for k, v in out.items()}  # enums as their names
    out["world_size"] = training_args.world_size
    return out


def _is_bookkeeping(key: str) -> bool:
    return key.endswith(("_runtime", "_per_second", "_preparation_time", "_loss", "_samples"))


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def write_model_card(task: Task, args: Arguments, metrics: dict) -> Path | None:
    """``README.md`` in output_dir through :func:`modeling.hub.write_model_card`: task, data,
    base model, command, hyper-parameters, training figures and the dev results (as model-index
    metadata too). Only where output_dir holds a model (not after an evaluation-only run)."""
    from modeling import hub

    out = Path(args.training.output_dir)
    if not (out / "config.json").is_file():
        return None
    card = task.card(args)
    results = [
        {
            "task_type": card.get("task"),
            "dataset_type": card.get("dataset"),
            "dataset_name": card.get("dataset_name", card.get("dataset")),
            "dataset_config": card.get("dataset_config"),
            "dataset_split": "validation",
            "metric_type": key.removeprefix("eval_"),
            "metric_name": key,
            "metric_value": round(float(value), 4),
        }
        for key, value in sorted(metrics.items())
        if key.startswith("eval_") and _is_number(value) and not _is_bookkeeping(key)
    ]
    figures = {
        k: v for k, v in metrics.items() if k.startswith("train_") and _is_number(v) and v == v
    }
    figures["eval_samples"] = metrics.get("eval_samples")
    return hub.write_model_card(
        out,
        model_name=args.training.hub_model_id or out.resolve().name,
        base_model=args.model.model_name_or_path,
        data_description=card.get("data"),
        command=shlex.join(["python", *sys.argv]),
        hyperparameters=_hyper_parameters(args.training),
        training_figures={k: v for k, v in figures.items() if v is not None},
        eval_results=results,
        pipeline_tag=card.get("pipeline_tag"),
        tags=[task.name, "transformers-trainer"],
    )


def check_push(args: Arguments) -> None:
    """Before any work: a push that cannot succeed (bad repo id, no token, offline) fails now."""
    if not args.training.push_to_hub:
        return
    from modeling import hub

    try:
        hub.check_push_settings(repo_id(args), token=args.training.hub_token)
    except ValueError as err:
        raise UsageError(str(err)) from None


def repo_id(args: Arguments) -> str:
    from modeling import hub

    return args.training.hub_model_id or hub.default_repo_id(args.training.output_dir)


def push_to_hub(args: Arguments) -> str:
    """Upload output_dir (model, tokenizer, results, card; not the checkpoints nor the tracker
    logs) with :func:`modeling.hub.push_to_hub`; returns the commit URL."""
    import tempfile

    from modeling import hub

    out = Path(args.training.output_dir)
    skip = shutil.ignore_patterns("checkpoint-*", "runs", "training_args.bin")
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}-push-") as tmp:
        staged = Path(tmp) / out.name
        shutil.copytree(out, staged, ignore=skip, copy_function=os.link)  # hard links: no copy
        url = hub.push_to_hub(
            staged,
            repo_id(args),
            private=bool(args.training.hub_private_repo),
            token=args.training.hub_token,
            revision=args.training.hub_revision,
        )
    logger.info("pushed %s to %s", out, url)
    return url
