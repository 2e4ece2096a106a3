"""SWAG multiple choice with ``BertForMultipleChoice`` (paper section 4.4).

Each (context, ending) pair is one sequence, as in the paper and the Hugging Face example:
segment A is ``sent1``, segment B is ``sent2 + " " + ending``; the pooled [CLS] vector times one
learned vector scores it, and a softmax over the four endings gives the answer. Inputs are shaped
(batch, 4, seq); :class:`MultipleChoiceCollator` pads over all choices. :class:`SwagRecipe` is the
:class:`recipes.runner.Task` behind ``scripts/run_swag.py`` (transformers.Trainer).

Data: the SWAG CSV files as distributed (``video-id, fold-ind, startphrase, sent1, sent2,
gold-source, ending0..3, label``; the test file has no label), JSON records with the same fields
(the ``datasets`` fixture: concatenated pretty-printed objects), or the Hub dataset ``swag``.
:func:`synthetic_swag` generates a multiple-choice task a model can learn, to check the recipe
where the real SWAG files are absent.
"""

from __future__ import annotations

import csv
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from modeling.cli import UsageError

from .data_files import iter_json_values, open_text, read_text
from .runner import Arguments, Task

logger = logging.getLogger(__name__)

NUM_CHOICES = 4
ENDINGS = tuple(f"ending{i}" for i in range(NUM_CHOICES))


@dataclass
class SwagDataArguments:
    """Where the data is and how examples become model inputs."""

    train_file: str | None = field(default=None, metadata={"help": "SWAG CSV or JSON records"})
    validation_file: str | None = field(default=None, metadata={"help": "dev file (val.csv)"})
    test_file: str | None = field(default=None, metadata={"help": "test file (labels optional)"})
    dataset_name: str | None = field(
        default=None, metadata={"help": "Hub dataset instead of files (swag; needs the Hub)"}
    )
    dataset_config_name: str = field(default="regular", metadata={"help": "Hub config"})
    synthetic_train: int = field(
        default=0, metadata={"help": "generate N training examples of the synthetic task"}
    )
    synthetic_eval: int = field(
        default=0, metadata={"help": "generate N dev examples of the synthetic task"}
    )
    synthetic_task: str = field(
        default="binding",
        metadata={"help": "copy (one object) or binding (two)", "choices": ["copy", "binding"]},
    )
    max_seq_length: int = field(default=128, metadata={"help": "pieces per (context, ending)"})

    def __post_init__(self):
        if self.max_seq_length < 8:
            raise ValueError(f"max_seq_length must be >= 8, got {self.max_seq_length}")


@dataclass
class SwagExample:
    """A context (``sent1``), the start of the next sentence (``sent2``) and four endings."""

    id: str
    context: str
    start: str
    endings: list[str]
    label: int | None = None


# --------------------------------------------------------------------------------------------
# Readers
# --------------------------------------------------------------------------------------------


def _example(record: dict, where: str, default_id: str) -> SwagExample:
    missing = [k for k in ("sent1", "sent2", *ENDINGS) if record.get(k) is None]
    if missing:
        raise UsageError(f"{where}: missing field(s) {', '.join(missing)}")
    label = record.get("label")
    if label in ("", None):
        label = None
    else:
        try:
            label = int(label)
        except (TypeError, ValueError):
            raise UsageError(f"{where}: label {label!r} is not an integer") from None
        if not 0 <= label < NUM_CHOICES:
            raise UsageError(f"{where}: label {label} is not in 0..{NUM_CHOICES - 1}")
    video, fold = record.get("video-id"), record.get("fold-ind")
    return SwagExample(
        id=f"{video}-{fold}" if video is not None and fold is not None else default_id,
        context=str(record["sent1"]),
        start=str(record["sent2"]),
        endings=[str(record[k]) for k in ENDINGS],
        label=label,
    )


def read_swag_csv(path: str | Path) -> list[SwagExample]:
    """The SWAG CSV as distributed (a header row; ``label`` absent in the test file)."""
    path = Path(path)
    with open_text(path) as handle:
        reader = csv.DictReader(handle)
        columns = set(reader.fieldnames or [])
        missing = [c for c in ("sent1", "sent2", *ENDINGS) if c not in columns]
        if missing:
            raise UsageError(f"{path}: missing column(s) {', '.join(missing)} in the header")
        return [
            _example(row, f"{path}:{reader.line_num}", str(number))
            for number, row in enumerate(reader)
        ]


def read_swag_file(path: str | Path) -> list[SwagExample]:
    """CSV or JSON records (JSON lines, a list, or concatenated objects), chosen by the file's
    first non-blank character."""
    if read_text(path).lstrip()[:1] not in ("{", "["):
        return read_swag_csv(path)
    examples = []
    for value, line in iter_json_values(path):
        for record in value if isinstance(value, list) else [value]:
            if not isinstance(record, dict):
                raise UsageError(f"{path}:{line}: expected an object, got {record!r:.60}")
            examples.append(_example(record, f"{path}:{line}", str(len(examples))))
    return examples


def load_hub_swag(name: str, config: str, split: str) -> list[SwagExample]:
    import datasets

    data = datasets.load_dataset(name, config, split=split)
    return [_example(dict(r), f"{name}/{split}[{i}]", str(i)) for i, r in enumerate(data)]


# Generated tasks. "copy": one object and its colour; the right ending repeats the colour
# (reading the endings alone gives 25%). "binding": two objects with colours; which colour does
# the named one have? Picking any colour the context mentions gives 50%; only binding the colour
# to the right object gives 100%.
SYNTHETIC_TASKS = ("copy", "binding")
_NOUNS = (
    "car door ball cup hat box lamp chair bike kite shirt boat bag fence book "
    "bottle coat tent house truck"
).split()
_COLOURS = "red blue green yellow black white orange purple pink brown grey".split()


def synthetic_swag(n: int, seed: int = 0, task: str = "binding") -> list[SwagExample]:
    """binding: ``sent1`` "The car is red and the cup is blue.", ``sent2`` "The cup is"; the
    endings are four colours: the cup's, the car's and two others, in random order.
    copy: ``sent1`` "The cup is blue.", the same ``sent2``, the cup's colour and three others."""
    if task not in SYNTHETIC_TASKS:
        raise ValueError(f"synthetic task must be one of {SYNTHETIC_TASKS}, got {task!r}")
    rng = random.Random(seed)
    examples = []
    for i in range(n):
        first, second = rng.sample(_NOUNS, 2)
        colours = rng.sample(_COLOURS, NUM_CHOICES)  # [asked, other object, two distractors]
        order = list(range(NUM_CHOICES))
        rng.shuffle(order)
        examples.append(
            SwagExample(
                id=f"synthetic-{seed}-{i}",
                context=f"The {second} is {colours[0]}."
                if task == "copy"
                else f"The {first} is {colours[1]} and the {second} is {colours[0]}."
                if rng.random() < 0.5
                else f"The {second} is {colours[0]} and the {first} is {colours[1]}.",
                start=f"The {second} is",
                endings=[f"{colours[k]}." for k in order],
                label=order.index(0),
            )
        )
    return examples


# --------------------------------------------------------------------------------------------
# Features, batches, predictions
# --------------------------------------------------------------------------------------------


def to_record(example: SwagExample) -> dict[str, Any]:
    return {
        "id": example.id,
        "context": example.context,
        "start": example.start,
        "endings": list(example.endings),
        "label": example.label,
    }


def tokenize_batch(batch: dict[str, list], tokenizer, max_seq_length: int = 128) -> dict:
    """Four ``[CLS] sent1 [SEP] sent2 ending [SEP]`` sequences per example, longest-first
    truncation (as Google's ``_truncate_seq_pair``); ``labels`` when every example has one."""
    firsts = [c for c, endings in zip(batch["context"], batch["endings"]) for _ in endings]
    seconds = [
        f"{start} {ending}".strip()
        for start, endings in zip(batch["start"], batch["endings"])
        for ending in endings
    ]
    enc = tokenizer(
        firsts,
        seconds,
        truncation="longest_first",
        max_length=max_seq_length,
        return_token_type_ids=True,
        return_attention_mask=True,
    )
    out: dict[str, list] = {"input_ids": [], "token_type_ids": [], "attention_mask": []}
    for i in range(len(batch["context"])):
        rows = slice(i * NUM_CHOICES, (i + 1) * NUM_CHOICES)
        for key in out:
            out[key].append(enc[key][rows])
    if all(label is not None for label in batch["label"]):
        out["labels"] = batch["label"]
    return out


def build_features(
    examples: Sequence[SwagExample], tokenizer, max_seq_length: int = 128
) -> list[dict]:
    """:func:`tokenize_batch` over examples, one feature dict per example."""
    batch = {k: [to_record(e)[k] for e in examples] for k in to_record(examples[0])}
    columns = tokenize_batch(batch, tokenizer, max_seq_length)
    return [{k: v[i] for k, v in columns.items()} for i in range(len(examples))]


@dataclass
class MultipleChoiceCollator:
    """Pads a batch of (choices x tokens) features to (batch, choices, longest); ``labels``
    optional (the SWAG test file has none)."""

    tokenizer: Any

    def __call__(self, features: list[dict]) -> dict:
        import torch

        keys = ("input_ids", "token_type_ids", "attention_mask")
        num_choices = len(features[0]["input_ids"])
        flat = [{k: f[k][c] for k in keys if k in f} for f in features for c in range(num_choices)]
        batch = self.tokenizer.pad(flat, padding=True, return_tensors="pt")
        batch = {k: v.view(len(features), num_choices, -1) for k, v in batch.items()}
        if "labels" in features[0]:
            batch["labels"] = torch.tensor([int(f["labels"]) for f in features])
        return batch


def accuracy(logits: Sequence[np.ndarray], labels: Sequence[int | None]) -> float:
    """Percent of labelled examples whose highest-scoring ending is the gold one."""
    labelled = [(lg, label) for lg, label in zip(logits, labels) if label is not None]
    if not labelled:
        return float("nan")
    return 100.0 * float(np.mean([int(np.argmax(lg)) == label for lg, label in labelled]))


def write_predictions(path: str | Path, ids: Sequence[str], labels: Sequence, logits) -> None:
    """JSON lines: id, predicted ending, gold label (or null), softmax over the endings."""
    import json

    from modeling import atomic

    with atomic.atomic_open(path, "w", encoding="utf-8") as handle:
        for example_id, label, values in zip(ids, labels, logits, strict=True):
            probs = np.exp(values - values.max())
            probs /= probs.sum()
            record = {
                "id": example_id,
                "prediction": int(np.argmax(values)),
                "label": label,
                "probabilities": [round(float(p), 6) for p in probs],
            }
            handle.write(json.dumps(record) + "\n")


def _load_split(data_args: SwagDataArguments, which: str, seed: int) -> list[SwagExample] | None:
    synthetic = {"train": data_args.synthetic_train, "validation": data_args.synthetic_eval}
    if synthetic.get(which):
        # disjoint seeds: the dev examples are never training examples' twins by construction
        return synthetic_swag(
            synthetic[which],
            seed=seed + (0 if which == "train" else 10_000),
            task=data_args.synthetic_task,
        )
    path = getattr(data_args, f"{which}_file")
    if path:
        return read_swag_file(path)
    if data_args.dataset_name:
        return load_hub_swag(data_args.dataset_name, data_args.dataset_config_name, which)
    return None


# --------------------------------------------------------------------------------------------
# The recipe
# --------------------------------------------------------------------------------------------


class SwagRecipe(Task):
    """SWAG (or the synthetic task) with ``BertForMultipleChoice`` on the Trainer runner."""

    name = "swag"
    description = "Fine-tune BERT for SWAG multiple choice with transformers.Trainer."
    data_args_class = SwagDataArguments
    model_class = "BertForMultipleChoice"
    metric_for_grid = "eval_accuracy"
    output_files = ("dev_predictions.jsonl", "test_predictions.jsonl")

    def load_raw(self, data_args, split: str, args: Arguments) -> dict[str, list[dict]]:
        which = {"train": "train", "eval": "validation", "predict": "test"}[split]
        examples = _load_split(data_args, which, args.training.seed)
        if not examples:
            return {}
        if split != "predict":
            unlabelled = next((e for e in examples if e.label is None), None)
            if unlabelled is not None:
                raise UsageError(f"{which} example {unlabelled.id} has no label")
        return {which: [to_record(e) for e in examples]}

    def featurise(self, batch, tokenizer, data_args, split):
        return tokenize_batch(batch, tokenizer, data_args.max_seq_length)

    def data_collator(self, tokenizer, args: Arguments):
        return MultipleChoiceCollator(tokenizer)

    def compute_metrics(self, eval_pred) -> dict[str, float]:
        logits = eval_pred.predictions
        logits = logits[0] if isinstance(logits, tuple) else logits
        return {"accuracy": accuracy(list(logits), list(eval_pred.label_ids))}

    def _predict(self, trainer, raw, features, args, prefix: str, file: str) -> dict:
        output = trainer.predict(features, metric_key_prefix=prefix)
        metrics = dict(output.metrics, **{f"{prefix}_samples": len(output.predictions)})
        if trainer.is_world_process_zero():
            path = Path(args.training.output_dir) / file
            write_predictions(path, list(raw["id"]), list(raw["label"]), output.predictions)
        return metrics

    def evaluate(self, trainer, name, raw, features, args) -> dict[str, float]:
        metrics = self._predict(trainer, raw, features, args, "eval", "dev_predictions.jsonl")
        trainer.log(metrics)
        return metrics

    def predict(self, trainer, name, raw, features, args) -> dict[str, float]:
        return self._predict(trainer, raw, features, args, "predict", "test_predictions.jsonl")

    def card(self, args: Arguments) -> dict[str, str]:
        synthetic = args.data.synthetic_train or args.data.synthetic_eval
        dataset = f"synthetic-{args.data.synthetic_task}" if synthetic else "swag"
        source = args.data.train_file or args.data.dataset_name or "generated examples"
        return {
            "task": "multiple-choice",
            "dataset": dataset,
            "data": f"{dataset} ({source}); dev accuracy on {args.data.validation_file or dataset}.",
        }
