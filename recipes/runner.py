"""The fine-tuning runner every task recipe shares, on ``transformers.Trainer``.

A task recipe (GLUE, SWAG, SQuAD, NER) is a :class:`Task`: its data arguments, its raw data, its
featurisation, its model class, its metrics and its official output files. The runner does the
rest, the same way for every task, in the order of transformers' ``run_glue.py``:

1. parse :class:`ModelArguments`, the task's data arguments, :class:`RunArguments` and the
   installed ``transformers.TrainingArguments`` with ``HfArgumentParser``; ``--config X.yaml``
   supplies defaults that command-line flags override; BERT's fine-tuning defaults
   (:data:`BERT_DEFAULTS`) come first;
2. refuse an ``output_dir`` that holds another run unless ``--overwrite_output_dir`` (or
   ``--resume_from_checkpoint``) is given, before any work;
3. read the raw data (the task validates it: one-line ``file:line`` errors), turn it into a
   ``datasets.Dataset`` and featurise it with ``.map(batched=True)`` on the main process first,
   cached on disk (a second launch re-tokenises nothing);
4. load the tokenizer and the task's model class (our fast ``modeling`` classes), build the
   ``Trainer`` (or the task's subclass), train (resuming from a checkpoint on request), save model
   and tokenizer in ``output_dir``;
5. evaluate (the task's post-processing and official metric), predict the test sets (the task's
   official files), write ``train_results.json`` / ``eval_results.json`` / ``all_results.json`` /
   ``trainer_state.json`` and a ``README.md`` model card; push to the Hub on request;
6. with ``--learning_rate_grid`` / ``--batch_size_grid`` / ``--num_train_epochs_grid`` /
   ``--seeds``: the paper's protocol, one Trainer run per cell (each cell resumable), choose on
   dev, ``grid_results.json`` with best / median / std per setting.

Metrics are percentages (0-100) in every task, as in the paper's tables; keys are flat
``eval_<name>`` as in transformers' examples.

Beside this module: :mod:`recipes.featurise` (raw sets, ``datasets`` featurisation and its
cache), :mod:`recipes.grid` (the grid x seeds protocol), :mod:`recipes.card` (model card, Hub).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modeling.cli import UsageError, yaml_defaults
from modeling.tokenizer_folder import drop_runtime_kwargs, save_tokenizer

from .card import check_push, push_to_hub, write_model_card
from .featurise import Data, featurise, load_data, read_raw, tokenizer_fingerprint

__all__ = [
    "Arguments",
    "Data",
    "ModelArguments",
    "RunArguments",
    "Task",
    "build_parser",
    "build_trainer",
    "featurise",
    "load_data",
    "load_tokenizer",
    "parse_args",
    "read_raw",
    "run",
    "tokenizer_fingerprint",
    "train_and_evaluate",
]

logger = logging.getLogger(__name__)

# BERT's fine-tuning recipe (Devlin et al. 2018, appendix A.3 and google-research/bert's
# optimizer): linear warmup over 10% of the steps then linear decay, AdamW with weight decay 0.01
# (Trainer exempts biases and LayerNorm weights), gradient clipping at 1.0. Batches are drawn at
# random: length-grouped batches lose accuracy at these data sizes (see the README).
# ``average_tokens_across_devices`` off: on several CPU processes the loss is otherwise doubled.
BERT_DEFAULTS: dict[str, Any] = {
    "warmup_steps": 0.1,
    "weight_decay": 0.01,
    "optim": "adamw_torch_fused",
    "max_grad_norm": 1.0,
    "lr_scheduler_type": "linear",
    "train_sampling_strategy": "random",
    "average_tokens_across_devices": False,
    "save_total_limit": 2,
}

# What the runner writes into an output folder; ``--overwrite_output_dir`` removes these (and
# the task's :attr:`Task.output_files`) so that a folder's results always describe its model.
RUNNER_OUTPUTS = (
    "all_results.json",
    "train_results.json",
    "eval_results.json",
    "predict_results.json",
    "trainer_state.json",
    "grid_results.json",
    "README.md",
    "training_args.bin",
    "checkpoint-*",
    "runs",
)
MODEL_FILES = (
    "config.json",
    "model.safetensors",
    "model-*.safetensors",
    "model.safetensors.index.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "chat_template.jinja",
)


# --------------------------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------------------------


@dataclass
class ModelArguments:
    """Which checkpoint to fine-tune and how to run it."""

    model_name_or_path: str = field(
        default=None,
        metadata={"help": "pretrained checkpoint folder (ours or stock BERT) or Hub id"},
    )
    tokenizer_name: str | None = field(default=None, metadata={"help": "defaults to the model's"})
    cache_dir: str | None = field(
        default=None,
        metadata={
            "help": "where featurised datasets (and Hub downloads) are cached "
            "(default: the datasets cache, $HF_DATASETS_CACHE)"
        },
    )
    unpad_inputs: bool = field(
        default=True, metadata={"help": "run the encoder on real tokens only (same math, faster)"}
    )
    attn_implementation: str = field(default="sdpa", metadata={"help": "sdpa or eager"})

    def __post_init__(self):
        if not self.model_name_or_path:
            raise ValueError("--model_name_or_path is required")


@dataclass
class RunArguments:
    """Output folder policy, data caps and the paper's grid x seeds protocol."""

    overwrite_output_dir: bool = field(
        default=False,
        metadata={"help": "replace the results of an earlier run in --output_dir"},
    )
    overwrite_cache: bool = field(
        default=False, metadata={"help": "featurise again even if a cached copy exists"}
    )
    max_train_samples: int | None = field(
        default=None, metadata={"help": "keep the first N training examples"}
    )
    max_eval_samples: int | None = field(
        default=None, metadata={"help": "keep the first N dev examples"}
    )
    max_predict_samples: int | None = field(
        default=None, metadata={"help": "keep the first N test examples"}
    )
    learning_rate_grid: list[float] = field(
        default_factory=list, metadata={"help": "learning rates to try, chosen on dev"}
    )
    batch_size_grid: list[int] = field(
        default_factory=list, metadata={"help": "per-device train batch sizes to try"}
    )
    num_train_epochs_grid: list[float] = field(
        default_factory=list, metadata={"help": "epochs to try"}
    )
    seeds: list[int] = field(default_factory=list, metadata={"help": "random restarts per setting"})

    def __post_init__(self):
        for name in ("max_train_samples", "max_eval_samples", "max_predict_samples"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"--{name} must be >= 1, got {value}")

    @property
    def is_grid(self) -> bool:
        return (
            bool(self.learning_rate_grid or self.batch_size_grid or self.num_train_epochs_grid)
            or bool(self.seeds)  # even one seed: the seed the cell runs with
        )


@dataclass
class Arguments:
    """Everything one run was given."""

    model: ModelArguments
    data: Any
    run: RunArguments
    training: Any  # transformers.TrainingArguments


def join_cpu_processes() -> None:
    """Make the processes of ``accelerate launch`` on a machine without GPU one gloo group.

    ``accelerate_configs/cpu.yaml`` (``distributed_type: MULTI_GPU``, ``use_cpu: true``)
    starts N processes, but each one builds a world of 1 (and trains on all the data, writing
    the same files) unless ``ACCELERATE_USE_CPU`` is set in its environment, which the launcher
    does not do. Set it when launched with several processes and no GPU is present."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and "ACCELERATE_USE_CPU" not in os.environ:
        import torch

        if not torch.cuda.is_available():
            os.environ["ACCELERATE_USE_CPU"] = "1"


def build_parser(task: Task, defaults: dict[str, Any] | None = None):
    """``HfArgumentParser`` over the project's dataclasses and transformers' TrainingArguments,
    with BERT's defaults and ``--config``."""
    from transformers import HfArgumentParser, TrainingArguments

    parser = HfArgumentParser(
        (ModelArguments, task.data_args_class, RunArguments, TrainingArguments),
        description=task.description,
    )
    parser.add_argument(
        "--config", type=str, default=None, help="YAML recipe of field: value; flags override it"
    )
    import torch

    # without a GPU, say so: TrainingArguments then accepts --bf16 (CPU autocast; AVX512-BF16
    # or AMX make it faster than fp32) instead of refusing it as "no bf16 GPU"
    machine = {"use_cpu": not torch.cuda.is_available()}
    parser.set_defaults(**BERT_DEFAULTS, **machine, **task.training_defaults, **(defaults or {}))
    return parser


def parse_args(task: Task, argv: Sequence[str] | None = None) -> Arguments:
    """Flags over ``--config`` YAML over the task's and BERT's defaults; any bad value is a
    :class:`UsageError` naming the flag (or the file and key)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--config", default=None)
    known, _ = pre.parse_known_args(argv)
    join_cpu_processes()
    from transformers import TrainingArguments

    classes = (ModelArguments, task.data_args_class, RunArguments, TrainingArguments)
    yaml_values = yaml_defaults(known.config, classes) if known.config else {}
    parser = build_parser(task, yaml_values)
    try:
        *parsed, _namespace = parser.parse_args_into_dataclasses(args=argv)
    except (TypeError, ValueError) as err:
        raise UsageError(str(err).splitlines()[0]) from None
    model_args, data_args, run_args, training_args = parsed
    if not training_args.output_dir or training_args.output_dir == "trainer_output":
        if "--output_dir" not in argv and "output_dir" not in yaml_values:
            raise UsageError("--output_dir is required")
    return Arguments(model_args, data_args, run_args, training_args)


# --------------------------------------------------------------------------------------------
# The task interface
# --------------------------------------------------------------------------------------------


class Task:
    """What a recipe tells the runner. Subclass it and override what differs.

    Splits: ``"train"``, ``"eval"``, ``"predict"``. :meth:`load_raw` returns, for a split, a
    mapping of set name -> raw examples (a list of dicts or a ``datasets.Dataset``); GLUE's MNLI
    has two dev sets, most tasks one. The runner caps the sets (``--max_*_samples``), turns them
    into ``Dataset`` s and calls :meth:`featurise` through ``.map(batched=True)``; the columns it
    returns are the features (raw columns are dropped). :meth:`evaluate` and :meth:`predict` get
    the raw set and its features and return ``eval_``-prefixed metrics / write official files.
    """

    name: str = "task"
    description: str | None = None
    data_args_class: type = object
    model_class: str = "BertForSequenceClassification"  # a class of ``modeling``
    metric_for_grid: str = "eval_accuracy"  # the dev metric the grid chooses on
    feature_version: str = "1"  # bump when featurise changes: invalidates the cache
    output_files: tuple[str, ...] = ()  # globs this task writes into output_dir
    training_defaults: dict[str, Any] = {}

    def check(self, args: Arguments) -> None:
        """Cross-argument checks before any work (raise UsageError)."""

    def load_raw(self, data_args, split: str, args: Arguments) -> dict[str, Any]:
        raise NotImplementedError

    def featurise(self, batch: dict[str, list], tokenizer, data_args, split: str) -> dict:
        raise NotImplementedError

    def features(self, data_args, split: str):
        """``datasets.Features`` of what :meth:`featurise` returns (compact Arrow types), or
        None to let ``datasets`` infer them."""
        return None

    def model_kwargs(self, data_args) -> dict[str, Any]:
        """Config overrides for ``from_pretrained`` (``num_labels``, ``id2label`` ...)."""
        return {}

    def load_model(self, args: Arguments):
        import modeling

        model_cls = getattr(modeling, self.model_class)
        return model_cls.from_pretrained(
            args.model.model_name_or_path,
            unpad_inputs=args.model.unpad_inputs,
            attn_implementation=args.model.attn_implementation,
            cache_dir=args.model.cache_dir,
            **self.model_kwargs(args.data),
        )

    def data_collator(self, tokenizer, args: Arguments):
        from transformers import DataCollatorWithPadding

        return DataCollatorWithPadding(tokenizer)

    def compute_metrics(self, eval_pred) -> dict[str, float]:
        """Metrics from ``EvalPrediction`` (percentages, no prefix), or None."""
        return {}

    def trainer_class(self):
        from .trainer import Trainer

        return Trainer

    def trainer_kwargs(self, args: Arguments) -> dict[str, Any]:
        """Extra keyword arguments for the Trainer (e.g. raw dev examples for post-processing)."""
        return {}

    def evaluate(self, trainer, name: str, raw, features, args: Arguments) -> dict[str, float]:
        """Dev metrics of set ``name`` (``eval_`` prefixed); may write prediction files (only
        where ``trainer.is_world_process_zero()``). Default: ``trainer.evaluate``."""
        return trainer.evaluate(features, metric_key_prefix="eval")

    def predict(self, trainer, name: str, raw, features, args: Arguments) -> dict[str, float]:
        """Predict test set ``name`` and write the official files; return any metrics."""
        return {}

    def finish(self, args: Arguments, metrics: dict[str, float]) -> None:
        """After the run (main process only): official archives, summaries."""

    def after_grid(self, args: Arguments, chosen_dir: Path) -> None:
        """After a grid (main process only), given the chosen cell's folder."""

    def card(self, args: Arguments) -> dict[str, str]:
        """What the model card says about the task: ``task`` (the Hub task type, e.g.
        text-classification), ``dataset`` (a Hub dataset type, e.g. glue), ``dataset_config``,
        ``data`` (a sentence on the data used) and ``pipeline_tag`` (if not the default)."""
        return {"task": "text-classification", "dataset": self.name}


# --------------------------------------------------------------------------------------------
# Output folder
# --------------------------------------------------------------------------------------------


def resolve_resume(training_args) -> str | bool | None:
    """``--resume_from_checkpoint`` as the Trainer takes it: a path, True (the latest
    checkpoint in output_dir) or None."""
    value = training_args.resume_from_checkpoint
    if value is None or value is False:
        return None
    if value is True or str(value).lower() in ("true", "1", "yes", "latest"):
        from transformers.trainer_utils import get_last_checkpoint

        out = Path(training_args.output_dir)
        if not out.is_dir() or get_last_checkpoint(str(out)) is None:
            raise UsageError(f"--resume_from_checkpoint: no checkpoint-* folder in {out}")
        return True
    if str(value).lower() in ("false", "0", "no", "none"):
        return None
    if not Path(value).is_dir():
        raise UsageError(f"--resume_from_checkpoint: {value} is not a checkpoint folder")
    return str(value)


def _matches(folder: Path, patterns: Sequence[str]) -> list[Path]:
    return sorted({p for pattern in patterns for p in folder.glob(pattern)})


def check_output_dir(task: Task, args: Arguments, resume) -> list[Path]:
    """Refuse an output folder holding another run (HF's rule) unless overwriting or resuming;
    return what overwriting will remove. Runs on every process, before any work."""
    out = Path(args.training.output_dir)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--output_dir {out} is a file, not a folder")
    parent = next((p for p in out.parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise UsageError(f"--output_dir {out}: {parent} is a file, not a folder")
    if not out.is_dir() or not any(out.iterdir()):
        return []
    if resume or args.run.is_grid and args.training.resume_from_checkpoint:
        return []
    if not args.run.overwrite_output_dir:
        first = sorted(p.name for p in out.iterdir())[:3]
        raise UsageError(
            f"--output_dir {out} is not empty ({', '.join(first)}...): pass "
            "--overwrite_output_dir to replace its results or --resume_from_checkpoint to continue"
        )
    patterns = [*RUNNER_OUTPUTS, *task.output_files]
    same_model = Path(args.model.model_name_or_path).resolve() == out.resolve()
    if not same_model:  # evaluating the model in its own folder keeps the model
        patterns += MODEL_FILES
    return _matches(out, patterns)


def _remove(paths: Sequence[Path]) -> None:
    for path in paths:
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


# --------------------------------------------------------------------------------------------
# Model, tokenizer, Trainer
# --------------------------------------------------------------------------------------------


def load_tokenizer(model_args: ModelArguments):
    from transformers import AutoTokenizer

    import modeling

    modeling.register_auto_classes()  # so that AutoTokenizer reads our config.json as ours
    name = model_args.tokenizer_name or model_args.model_name_or_path
    if not Path(name).exists() and os.environ.get("HF_HUB_OFFLINE") == "1" and "/" not in name:
        raise UsageError(f"--model_name_or_path {name}: no such folder (and the Hub is offline)")
    try:
        tokenizer = AutoTokenizer.from_pretrained(name, cache_dir=model_args.cache_dir)
    except OSError as err:
        raise UsageError(f"tokenizer {name}: {str(err).splitlines()[0]}") from None
    if len(tokenizer) < 10 or tokenizer.cls_token_id is None or tokenizer.sep_token_id is None:
        raise UsageError(f"tokenizer at {name} looks broken: {len(tokenizer)} entries")
    # loading options (local_files_only offline...) would go into every folder the Trainer writes
    return drop_runtime_kwargs(tokenizer)


def build_trainer(task: Task, args: Arguments, model, tokenizer, data: Data, training_args=None):
    training_args = training_args or args.training
    train = data.get("train")
    (train_features,) = [f for _, f in train.values()] or [None]
    metrics_fn = (
        task.compute_metrics if type(task).compute_metrics is not Task.compute_metrics else None
    )
    return task.trainer_class()(
        model=model,
        args=training_args,
        train_dataset=train_features,
        eval_dataset=_first_eval(data),
        processing_class=tokenizer,
        data_collator=task.data_collator(tokenizer, args),
        compute_metrics=metrics_fn,
        **task.trainer_kwargs(args),
    )


def _first_eval(data: Data):
    sets = data.get("eval")
    if not sets:
        return None
    if len(sets) == 1:
        return next(iter(sets.values()))[1]
    return {name: features for name, (_, features) in sets.items()}


# --------------------------------------------------------------------------------------------
# One run
# --------------------------------------------------------------------------------------------


def train_and_evaluate(task: Task, args: Arguments, tokenizer, data: Data, resume=None) -> dict:
    """One Trainer run in ``args.training.output_dir``: train, save, evaluate, predict, results
    files. Returns all metrics (train_*, eval_*)."""
    from transformers import set_seed

    training_args = args.training
    set_seed(training_args.seed)  # the new head's initialisation
    model = task.load_model(args)
    push = training_args.push_to_hub
    training_args.push_to_hub = False  # pushed once at the end, with our model card
    trainer = build_trainer(task, args, model, tokenizer, data)
    metrics: dict[str, float] = {}
    if training_args.do_train:
        ((_, train_features),) = data.get("train").values()
        result = trainer.train(resume_from_checkpoint=resume)
        train_metrics = dict(result.metrics, train_samples=len(train_features))
        # the schedule's end: 0 after the last optimiser step when it counted steps right
        train_metrics["train_final_learning_rate"] = trainer.lr_scheduler.get_last_lr()[0]
        trainer.save_model()  # model + tokenizer in output_dir (main process)
        if trainer.is_world_process_zero():  # the tokenizer again, with vocab.txt etc.
            save_tokenizer(trainer.processing_class, training_args.output_dir)
        trainer.log_metrics("train", train_metrics)
        trainer.save_metrics("train", train_metrics)
        trainer.save_state()
        metrics.update(train_metrics)
    for name, (raw, features) in data.get("eval").items():
        eval_metrics = task.evaluate(trainer, name, raw, features, args)
        metrics.update(eval_metrics)
    if data.get("eval"):
        eval_only = {k: v for k, v in metrics.items() if k.startswith("eval_")}
        trainer.log_metrics("eval", eval_only)
        trainer.save_metrics("eval", eval_only)
    predict_metrics: dict[str, float] = {}
    for name, (raw, features) in data.get("predict").items():
        predict_metrics.update(task.predict(trainer, name, raw, features, args) or {})
    if predict_metrics:
        trainer.save_metrics("predict", predict_metrics)
        metrics.update(predict_metrics)
    if trainer.is_world_process_zero():
        task.finish(args, metrics)
        write_model_card(task, args, metrics)
    training_args.push_to_hub = push
    if push and trainer.is_world_process_zero():
        push_to_hub(args)
    trainer.accelerator.wait_for_everyone()
    return metrics


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def run(task: Task, argv: Sequence[str] | None = None, args: Arguments | None = None) -> dict:
    """Parse, check, load, featurise, then one Trainer run or the grid. Returns the metrics
    (one run) or the grid summary."""
    args = args or parse_args(task, argv)
    logging.basicConfig(
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        level=logging.INFO if args.training.process_index == 0 else logging.WARNING,
    )
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    task.check(args)
    if not (args.training.do_train or args.training.do_eval or args.training.do_predict):
        raise UsageError("nothing to do: give --do_train, --do_eval and/or --do_predict")
    resume = None if args.run.is_grid else resolve_resume(args.training)
    if resume and not args.training.do_train:
        raise UsageError("--resume_from_checkpoint needs --do_train")
    stale = check_output_dir(task, args, resume)
    check_push(args)
    raw = read_raw(task, args)  # every file read and checked before the model loads
    tokenizer = load_tokenizer(args.model)
    if stale:
        with args.training.main_process_first(desc="clear output_dir"):
            if args.training.process_index == 0:
                logger.info("--overwrite_output_dir: removing %s", [p.name for p in stale])
                _remove(stale)
    data = load_data(task, args, tokenizer, raw)
    if args.run.is_grid:
        from .grid import run_grid

        return run_grid(task, args, tokenizer, data)
    return train_and_evaluate(task, args, tokenizer, data, resume=resume)


def main_for(task_factory: Callable[[], Task]) -> Callable:
    """A script's ``main(argv)`` for a task."""

    def main(argv=None):
        return run(task_factory(), argv)

    return main
