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
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import itertools
import json
import logging
import os
import shutil
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modeling.cli import UsageError, yaml_defaults

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
            or len(self.seeds) > 1
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
    parser.set_defaults(**BERT_DEFAULTS, **task.training_defaults, **(defaults or {}))
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
        from transformers import Trainer

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
        """What the model card says about the task: ``task`` (e.g. text-classification),
        ``dataset`` (a name) and ``dataset_config``."""
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
# Data
# --------------------------------------------------------------------------------------------


def tokenizer_fingerprint(tokenizer) -> str:
    """A hash of what the tokenizer does (vocabulary, normaliser, pre-tokeniser, special
    tokens), not of its truncation state, which changes as it is used."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        spec = json.loads(backend.to_str())
        spec.pop("truncation", None)
        spec.pop("padding", None)
        text = json.dumps(spec, sort_keys=True)
    else:
        text = json.dumps(sorted(tokenizer.get_vocab().items()))
    text += repr((type(tokenizer).__name__, tokenizer.all_special_tokens))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cache_root(model_args: ModelArguments) -> Path:
    if model_args.cache_dir:
        return Path(model_args.cache_dir) / "features"
    import datasets

    return Path(datasets.config.HF_DATASETS_CACHE) / "bert_toolkit_features"


def _as_dataset(raw):
    import datasets

    if isinstance(raw, datasets.Dataset):
        return raw
    return datasets.Dataset.from_list(list(raw))


def _cap(raw, limit: int | None):
    if limit is None or len(raw) <= limit:
        return raw
    return raw.select(range(limit)) if hasattr(raw, "select") else raw[:limit]


def featurise(task: Task, split: str, name: str, raw, tokenizer, args: Arguments):
    """``raw`` examples -> features through ``Dataset.map(batched=True)``, cached on disk under a
    key of (task, split, raw content, tokenizer, data arguments). A cache hit loads the Arrow
    file memory-mapped without calling :meth:`Task.featurise`."""
    import datasets

    dataset = _as_dataset(raw)
    key = hashlib.sha256(
        json.dumps(
            [
                task.name,
                task.feature_version,
                split,
                name,
                dataset._fingerprint,
                len(dataset),
                tokenizer_fingerprint(tokenizer),
                dataclasses.asdict(args.data),
            ],
            sort_keys=True,
            default=str,
        ).encode()
    ).hexdigest()[:20]
    root = cache_root(args.model)
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{task.name}-{split}-{name}-{key}.arrow"
    if path.is_file() and not args.run.overwrite_cache:
        logger.info("%s %s: cached features %s", task.name, name, path)
        return datasets.Dataset.from_file(str(path))
    return dataset.map(
        task.featurise,
        batched=True,
        fn_kwargs={"tokenizer": tokenizer, "data_args": args.data, "split": split},
        remove_columns=dataset.column_names,
        features=task.features(args.data, split),
        cache_file_name=str(path),
        load_from_cache_file=False,
        desc=f"featurise {task.name} {name}",
    )


@dataclass
class Data:
    """Raw sets and their features, per split: ``{split: {name: (raw, features)}}``."""

    sets: dict[str, dict[str, tuple[Any, Any]]]

    def get(self, split: str) -> dict[str, tuple[Any, Any]]:
        return self.sets.get(split, {})


def read_raw(task: Task, args: Arguments) -> dict[str, dict[str, Any]]:
    """Every raw set the run needs, read, validated and capped (``--max_*_samples``): a bad
    file fails here, before the model loads."""
    wanted = {
        "train": (args.training.do_train, args.run.max_train_samples),
        "eval": (args.training.do_eval, args.run.max_eval_samples),
        "predict": (args.training.do_predict, args.run.max_predict_samples),
    }
    out = {}
    for split, (on, limit) in wanted.items():
        if not on:
            continue
        raw_sets = task.load_raw(args.data, split, args) or {}
        if not raw_sets:
            raise UsageError(f"--do_{split}: no {split} data for {task.name}")
        out[split] = {name: _cap(raw, limit) for name, raw in raw_sets.items()}
    return out


def load_data(task: Task, args: Arguments, tokenizer, raw: dict[str, dict[str, Any]]) -> Data:
    """Featurise every raw set, on the main process first (the others load its cache)."""
    sets: dict[str, dict[str, tuple[Any, Any]]] = {}
    with args.training.main_process_first(desc="featurise"):
        for split, raw_sets in raw.items():
            sets[split] = {}
            for name, raw_set in raw_sets.items():
                raw_set = _as_dataset(raw_set)
                sets[split][name] = (
                    raw_set,
                    featurise(task, split, name, raw_set, tokenizer, args),
                )
    return Data(sets)


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
    return tokenizer


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
        write_model_card(task, args, metrics, trained=training_args.do_train)
    training_args.push_to_hub = push
    if push and trainer.is_world_process_zero():
        push_to_hub(args)
    trainer.accelerator.wait_for_everyone()
    return metrics


# --------------------------------------------------------------------------------------------
# Model card and Hub
# --------------------------------------------------------------------------------------------


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
    out["world_size"] = training_args.world_size
    return out


def write_model_card(task: Task, args: Arguments, metrics: dict, trained: bool = True) -> Path:
    """``README.md`` in output_dir: task, data, base model, hyper-parameters and results, with
    model-index metadata so the Hub shows the results."""
    out = Path(args.training.output_dir)
    card = task.card(args)
    results = {k: v for k, v in metrics.items() if k.startswith("eval_") and _is_number(v)}
    try:
        from modeling.hub import write_model_card as hub_card  # the project's card writer
    except ImportError:
        hub_card = None
    if hub_card is not None:
        return hub_card(
            out,
            base_model=args.model.model_name_or_path,
            task=card.get("task"),
            dataset=card.get("dataset"),
            metrics=results,
            hyper_parameters=_hyper_parameters(args.training),
        )
    name = Path(out).name
    model_index = {
        "name": name,
        "results": [
            {
                "task": {"type": card.get("task")},
                "dataset": {
                    "name": card.get("dataset"),
                    "type": card.get("dataset"),
                    "config": card.get("dataset_config"),
                },
                "metrics": [
                    {"name": k, "type": k.removeprefix("eval_"), "value": round(float(v), 4)}
                    for k, v in sorted(results.items())
                    if not _is_bookkeeping(k)
                ],
            }
        ],
    }
    import yaml

    meta = {
        "library_name": "transformers",
        "base_model": args.model.model_name_or_path,
        "tags": ["bert-toolkit", task.name],
        "datasets": [card.get("dataset")],
        "pipeline_tag": card.get("task"),
        "model-index": [model_index],
    }
    lines = [
        "---",
        yaml.safe_dump(meta, sort_keys=False).rstrip(),
        "---",
        "",
        f"# {name}",
        "",
        f"{args.model.model_name_or_path} fine-tuned on {card.get('dataset')} "
        f"({card.get('task')}) with bert-toolkit's `{task.name}` recipe on transformers.Trainer"
        + ("." if trained else " (evaluation only: this folder holds no newly trained model)."),
        "",
        "## Results (dev set, percent)",
        "",
        "| metric | value |",
        "|---|---|",
        *[
            f"| {k} | {float(v):.4g} |"
            for k, v in sorted(results.items())
            if not _is_bookkeeping(k)
        ],
        "",
        "## Hyper-parameters",
        "",
        "| name | value |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in _hyper_parameters(args.training).items()],
        "",
    ]
    from modeling import atomic

    path = out / "README.md"
    atomic.write_text(path, "\n".join(lines))
    return path


def _is_bookkeeping(key: str) -> bool:
    return key.endswith(("_runtime", "_per_second", "_preparation_time"))


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def push_to_hub(args: Arguments) -> None:
    """Upload output_dir (model, tokenizer, results, card; no checkpoints) to the Hub."""
    training_args = args.training
    out = Path(training_args.output_dir)
    repo_id = training_args.hub_model_id or out.name
    try:
        from modeling.hub import push_to_hub as hub_push
    except ImportError:
        hub_push = None
    if hub_push is not None:
        hub_push(
            out,
            repo_id,
            private=training_args.hub_private_repo,
            token=training_args.hub_token,
        )
        return
    from huggingface_hub import HfApi

    api = HfApi(token=training_args.hub_token)
    repo = api.create_repo(repo_id, private=training_args.hub_private_repo, exist_ok=True)
    api.upload_folder(
        repo_id=getattr(repo, "repo_id", repo_id),
        folder_path=str(out),
        commit_message="bert-toolkit fine-tuning run",
        ignore_patterns=["checkpoint-*", "checkpoint-*/**", "runs/**", "*.bin"],
    )
    logger.info("pushed %s to %s", out, repo_id)


# --------------------------------------------------------------------------------------------
# Grid x seeds (the paper's protocol)
# --------------------------------------------------------------------------------------------


def grid_cells(args: Arguments) -> list[dict[str, Any]]:
    """Every (learning rate, batch size, epochs, seed) of the grid, grids defaulting to the
    single values of the training arguments."""
    t, r = args.training, args.run
    axes = {
        "learning_rate": r.learning_rate_grid or [t.learning_rate],
        "per_device_train_batch_size": r.batch_size_grid or [t.per_device_train_batch_size],
        "num_train_epochs": r.num_train_epochs_grid or [t.num_train_epochs],
        "seed": r.seeds or [t.seed],
    }
    return [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())]


def cell_name(cell: dict[str, Any]) -> str:
    return (
        "lr{learning_rate:g}_bs{per_device_train_batch_size}_ep{num_train_epochs:g}_seed{seed}"
    ).format(**cell)


def summarise_grid(rows: list[dict], metric: str, greater_is_better: bool = True) -> dict:
    """Per setting (all but the seed): best, median, std over seeds; the setting with the best
    median wins (chosen on dev), and its best restart is the run reported (as the paper)."""
    settings: dict[tuple, dict] = {}
    for row in rows:
        key = (row["learning_rate"], row["per_device_train_batch_size"], row["num_train_epochs"])
        settings.setdefault(key, {"runs": []})["runs"].append(row)
    summary_settings = []
    for (lr, bs, ep), entry in settings.items():
        scores = [r[metric] for r in entry["runs"]]
        summary_settings.append(
            {
                "learning_rate": lr,
                "per_device_train_batch_size": bs,
                "num_train_epochs": ep,
                f"{metric}_best": max(scores) if greater_is_better else min(scores),
                f"{metric}_median": statistics.median(scores),
                f"{metric}_std": statistics.pstdev(scores) if len(scores) > 1 else 0.0,
                "n": len(scores),
            }
        )
    pick = max if greater_is_better else min
    best = pick(summary_settings, key=lambda s: s[f"{metric}_median"])
    chosen = pick(
        (
            r
            for r in rows
            if (r["learning_rate"], r["per_device_train_batch_size"], r["num_train_epochs"])
            == (
                best["learning_rate"],
                best["per_device_train_batch_size"],
                best["num_train_epochs"],
            )
        ),
        key=lambda r: r[metric],
    )
    return {
        "metric": metric,
        "best_setting": best,
        "chosen_run": chosen,
        "settings": summary_settings,
        "runs": rows,
    }


def run_grid(task: Task, args: Arguments, tokenizer, data: Data) -> dict:
    """One Trainer run per cell in ``output_dir/<cell>``; a cell whose ``all_results.json``
    exists is reused, a cell with checkpoints resumes from its latest (when resuming)."""
    from transformers.trainer_utils import get_last_checkpoint

    if not args.training.do_eval:
        raise UsageError("a grid search chooses on dev: it needs --do_eval")
    out = Path(args.training.output_dir)
    resuming = bool(args.training.resume_from_checkpoint)
    rows = []
    for cell in grid_cells(args):
        cell_dir = out / cell_name(cell)
        done = cell_dir / "all_results.json"
        if resuming and done.is_file():
            metrics = json.loads(done.read_text())
            logger.info("%s: done earlier, %s", cell_name(cell), _pretty(metrics, task))
        else:
            resume = None
            if resuming and cell_dir.is_dir() and get_last_checkpoint(str(cell_dir)):
                resume = True
            training_args = dataclasses.replace(
                args.training, output_dir=str(cell_dir), resume_from_checkpoint=None, **cell
            )
            training_args.push_to_hub = False
            cell_args = dataclasses.replace(args, training=training_args)
            metrics = train_and_evaluate(task, cell_args, tokenizer, data, resume=resume)
        rows.append({**cell, "output_dir": str(cell_dir), **_numbers(metrics)})
        logger.info("%s: %s", cell_name(cell), _pretty(metrics, task))
    summary = summarise_grid(rows, task.metric_for_grid)
    if args.training.process_index == 0:
        from modeling import atomic

        atomic.write_json(out / "grid_results.json", summary)
        _promote(Path(summary["chosen_run"]["output_dir"]), out)
        task.after_grid(args, Path(summary["chosen_run"]["output_dir"]))
        if args.training.push_to_hub:
            push_to_hub(args)
    return summary


def _promote(cell_dir: Path, out: Path) -> None:
    """Copy the chosen run's model, results and card to the grid's output_dir (so that
    ``from_pretrained(output_dir)`` is the chosen model)."""
    for path in cell_dir.iterdir():
        if path.name.startswith("checkpoint-") or path.name == "runs":
            continue
        target = out / path.name
        if path.is_dir():
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(path, target)
        else:
            shutil.copyfile(path, target)


def _numbers(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if _is_number(v)}


def _pretty(metrics: dict, task: Task) -> str:
    key = task.metric_for_grid
    return f"{key} = {metrics.get(key, float('nan')):.2f}"


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
    raw = read_raw(task, args)  # every file read and checked before the model loads
    tokenizer = load_tokenizer(args.model)
    if stale:
        with args.training.main_process_first(desc="clear output_dir"):
            if args.training.process_index == 0:
                logger.info("--overwrite_output_dir: removing %s", [p.name for p in stale])
                _remove(stale)
    data = load_data(task, args, tokenizer, raw)
    if args.run.is_grid:
        return run_grid(task, args, tokenizer, data)
    return train_and_evaluate(task, args, tokenizer, data, resume=resume)


def main_for(task_factory: Callable[[], Task]) -> Callable:
    """A script's ``main(argv)`` for a task."""

    def main(argv=None):
        return run(task_factory(), argv)

    return main
