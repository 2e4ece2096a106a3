"""SWAG multiple choice with ``BertForMultipleChoice`` (paper section 4.4).

Each (context, ending) pair is one sequence, as in the paper and the Hugging Face example:
segment A is ``sent1``, segment B is ``sent2 + " " + ending``; the pooled [CLS] vector times one
learned vector scores it, and a softmax over the four endings gives the answer. Inputs are shaped
(batch, 4, seq); :func:`recipes.finetune.pad_collate` pads over all choices.

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

import numpy as np

from modeling.cli import UsageError

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
    with open(path, encoding="utf-8", newline="") as handle:
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
    """CSV or JSON records, chosen by the file's first non-blank character."""
    from .ner import is_json_file, read_json_records

    if is_json_file(path):
        return [
            _example(record, f"{path}: record {number}", str(number))
            for number, record in enumerate(read_json_records(path))
        ]
    return read_swag_csv(path)


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
# Features, metric, predictions
# --------------------------------------------------------------------------------------------


def build_features(
    examples: Sequence[SwagExample], tokenizer, max_seq_length: int = 128
) -> list[dict]:
    """Four ``[CLS] sent1 [SEP] sent2 ending [SEP]`` sequences per example, longest-first
    truncation (as Google's ``_truncate_seq_pair``); ``labels`` when the example has one."""
    firsts = [e.context for e in examples for _ in e.endings]
    seconds = [f"{e.start} {ending}".strip() for e in examples for ending in e.endings]
    enc = tokenizer(
        firsts,
        seconds,
        truncation="longest_first",
        max_length=max_seq_length,
        return_token_type_ids=True,
        return_attention_mask=True,
    )
    features = []
    for i, example in enumerate(examples):
        rows = slice(i * NUM_CHOICES, (i + 1) * NUM_CHOICES)
        feature = {
            "input_ids": enc["input_ids"][rows],
            "token_type_ids": enc["token_type_ids"][rows],
            "attention_mask": enc["attention_mask"][rows],
            "example_index": i,
        }
        if example.label is not None:
            feature["labels"] = example.label
        features.append(feature)
    return features


def accuracy(logits: Sequence[np.ndarray], examples: Sequence[SwagExample]) -> float:
    labelled = [(lg, e.label) for lg, e in zip(logits, examples) if e.label is not None]
    if not labelled:
        return float("nan")
    return 100.0 * float(np.mean([int(np.argmax(lg)) == label for lg, label in labelled]))


def write_predictions(path: str | Path, examples: Sequence[SwagExample], logits) -> None:
    """JSON lines: id, predicted ending, gold label (or null), softmax over the endings."""
    import json

    from modeling import atomic

    with atomic.atomic_open(path, "w", encoding="utf-8") as handle:
        for example, values in zip(examples, logits):
            probs = np.exp(values - values.max())
            probs /= probs.sum()
            record = {
                "id": example.id,
                "prediction": int(np.argmax(values)),
                "label": example.label,
                "probabilities": [round(float(p), 6) for p in probs],
            }
            handle.write(json.dumps(record) + "\n")


# --------------------------------------------------------------------------------------------
# The recipe
# --------------------------------------------------------------------------------------------


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


def run(model_args, data_args: SwagDataArguments, train_args) -> dict:
    """Train (over the grid if given), report dev accuracy, write predictions; each run writes
    ``eval_results.json`` and ``{dev,test}_predictions.jsonl`` in its output folder."""
    splits = {}  # data first: a bad file fails at once, before torch and transformers load
    for which, limit in (
        ("train", train_args.max_train_samples),
        ("validation", train_args.max_eval_samples),
        ("test", train_args.max_predict_samples),
    ):
        examples = _load_split(data_args, which, train_args.seed)
        splits[which] = examples[:limit] if examples is not None and limit else examples
    if train_args.do_train and not splits["train"]:
        raise UsageError("--do_train needs --train_file, --dataset_name or --synthetic_train")
    if train_args.do_train and any(e.label is None for e in splits["train"]):
        raise UsageError("the training data has examples without a label")

    from modeling import BertForMultipleChoice

    from .finetune import (
        grid_search,
        load_model,
        load_tokenizer,
        predict,
        save_model,
        set_seed,
        train,
        write_results,
    )

    tokenizer = load_tokenizer(model_args)
    features = {
        k: build_features(v, tokenizer, data_args.max_seq_length) if v else None
        for k, v in splits.items()
    }

    def run_one(args) -> dict:
        set_seed(args.seed)  # the new head's initialisation too
        model = load_model(BertForMultipleChoice, model_args)
        results: dict = {}
        if args.do_train:
            trained = train(model, features["train"], args)
            results["train"] = {
                "train_loss": trained.train_loss,
                "train_runtime": trained.train_runtime,
                "steps": trained.steps,
                "train_examples": len(features["train"]),
            }
            if args.save_model:
                save_model(model, tokenizer, Path(args.output_dir) / "model")
        for name, which, wanted in (
            ("dev", "validation", args.do_eval),
            ("test", "test", args.do_predict),
        ):
            if not wanted or not splits[which]:
                continue
            logits = predict(
                model,
                features[which],
                args.per_device_eval_batch_size,
                disable_tqdm=args.disable_tqdm,
            )["logits"]
            results[name] = {
                "accuracy": accuracy(logits, splits[which]),
                "examples": len(logits),
            }
            write_predictions(
                Path(args.output_dir) / f"{name}_predictions.jsonl", splits[which], logits
            )
            logger.info("%s accuracy: %.2f%%", name, results[name]["accuracy"])
        write_results(args.output_dir, "eval_results.json", results)
        out = {"accuracy": results.get("dev", {}).get("accuracy", float("nan"))}
        if "train" in results:
            out["train_runtime"] = results["train"]["train_runtime"]
        return out

    return grid_search(train_args, run_one, metric="accuracy")
