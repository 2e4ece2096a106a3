"""GLUE fine-tuning: the task registry, loaders, features, metrics and leaderboard files.

* :data:`TASKS` names each task's columns (in the official TSVs and on the Hub), its label list
  (the order of google-research/bert's processors; ``None`` = regression for STS-B), its metrics,
  its dev/test files and its leaderboard file name.
* :func:`load_split` reads the official GLUE TSVs as distributed (CoLA train/dev without a header,
  the UTF-8 BOM in MRPC, label names per task), CSV/JSON files, or a Hub dataset; a malformed row
  is reported as ``file:line: what is wrong``.
* :func:`compute_metrics` gives the numbers GLUE reports (CoLA Matthews correlation; accuracy;
  F1 of class 1 for MRPC/QQP; Pearson/Spearman for STS-B) plus the task ``score`` the leaderboard
  uses; :func:`glue_score` averages task scores into the GLUE score.
* :func:`write_predictions` / :func:`zip_submission` write the leaderboard files
  (``index<TAB>prediction``) and the zip to upload.
* :func:`run` is the recipe behind ``scripts/run_glue.py``: one fine-tuning run, or the paper's
  protocol (learning-rate grid chosen on dev, random restarts, best/median/std) through
  :func:`recipes.finetune.grid_search`.
"""

from __future__ import annotations

import csv
import dataclasses
import logging
import shutil
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modeling import atomic
from modeling.cli import UsageError

from .arguments import ModelArguments, TrainingArguments
from .data_files import iter_json_values

logger = logging.getLogger(__name__)

csv.field_size_limit(1 << 24)


class GlueDataError(UsageError):
    """A GLUE data file that cannot be read; the message names the file and line."""


# --------------------------------------------------------------------------------------------
# Task registry
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EvalSet:
    """One dev or test file of a task: its split name, TSV file, Hub split, leaderboard file."""

    name: str
    tsv: str
    hub_split: str
    submission: str | None = None
    task_dir: str | None = None  # another task's folder (AX is predicted by the MNLI model)


@dataclass(frozen=True)
class GlueTask:
    """Where a GLUE task's text and labels are, and how it is scored."""

    name: str
    folder: str
    text_columns: tuple[str, str | None]  # TSV header names
    hub_columns: tuple[str, str | None]  # column names of the Hub dataset nyu-mll/glue
    label_column: str | None
    labels: tuple[str, ...] | None  # None: regression
    metrics: tuple[str, ...]
    dev: tuple[EvalSet, ...]
    test: tuple[EvalSet, ...]
    label_aliases: dict[str, str] = field(default_factory=dict)
    headerless_columns: tuple[str, ...] | None = None  # CoLA train/dev have no header
    index_column: str = "index"

    @property
    def is_regression(self) -> bool:
        return self.labels is None

    @property
    def num_labels(self) -> int:
        return 1 if self.labels is None else len(self.labels)

    @property
    def main_metric(self) -> str:
        return "score"


def _sets(folder: str, submission: str) -> tuple[tuple[EvalSet, ...], tuple[EvalSet, ...]]:
    return (
        (EvalSet("validation", "dev.tsv", "validation"),),
        (EvalSet("test", "test.tsv", "test", submission),),
    )


_BINARY = ("0", "1")
_NLI2 = ("entailment", "not_entailment")
_MNLI = ("contradiction", "entailment", "neutral")  # google-research/bert's order

TASKS: dict[str, GlueTask] = {
    "cola": GlueTask(
        "cola",
        "CoLA",
        ("sentence", None),
        ("sentence", None),
        "label",
        _BINARY,
        ("matthews_correlation",),
        *_sets("CoLA", "CoLA.tsv"),
        label_aliases={"unacceptable": "0", "acceptable": "1"},
        headerless_columns=("source", "label", "original_label", "sentence"),
    ),
    "sst2": GlueTask(
        "sst2",
        "SST-2",
        ("sentence", None),
        ("sentence", None),
        "label",
        _BINARY,
        ("accuracy",),
        *_sets("SST-2", "SST-2.tsv"),
        label_aliases={"negative": "0", "positive": "1"},
    ),
    "mrpc": GlueTask(
        "mrpc",
        "MRPC",
        ("#1 String", "#2 String"),
        ("sentence1", "sentence2"),
        "Quality",
        _BINARY,
        ("f1", "accuracy"),
        *_sets("MRPC", "MRPC.tsv"),
        label_aliases={"not_equivalent": "0", "equivalent": "1"},
    ),
    "stsb": GlueTask(
        "stsb",
        "STS-B",
        ("sentence1", "sentence2"),
        ("sentence1", "sentence2"),
        "score",
        None,
        ("pearson", "spearmanr"),
        *_sets("STS-B", "STS-B.tsv"),
    ),
    "qqp": GlueTask(
        "qqp",
        "QQP",
        ("question1", "question2"),
        ("question1", "question2"),
        "is_duplicate",
        _BINARY,
        ("f1", "accuracy"),
        *_sets("QQP", "QQP.tsv"),
        label_aliases={"not_duplicate": "0", "duplicate": "1"},
        index_column="id",
    ),
    "mnli": GlueTask(
        "mnli",
        "MNLI",
        ("sentence1", "sentence2"),
        ("premise", "hypothesis"),
        "gold_label",
        _MNLI,
        ("accuracy",),
        (
            EvalSet("validation_matched", "dev_matched.tsv", "validation_matched"),
            EvalSet("validation_mismatched", "dev_mismatched.tsv", "validation_mismatched"),
        ),
        (
            EvalSet("test_matched", "test_matched.tsv", "test_matched", "MNLI-m.tsv"),
            EvalSet("test_mismatched", "test_mismatched.tsv", "test_mismatched", "MNLI-mm.tsv"),
            EvalSet("ax", "test.tsv", "test", "AX.tsv", task_dir="AX"),
        ),
    ),
    "qnli": GlueTask(
        "qnli",
        "QNLI",
        ("question", "sentence"),
        ("question", "sentence"),
        "label",
        _NLI2,
        ("accuracy",),
        *_sets("QNLI", "QNLI.tsv"),
    ),
    "rte": GlueTask(
        "rte",
        "RTE",
        ("sentence1", "sentence2"),
        ("sentence1", "sentence2"),
        "label",
        _NLI2,
        ("accuracy",),
        *_sets("RTE", "RTE.tsv"),
    ),
    "wnli": GlueTask(
        "wnli",
        "WNLI",
        ("sentence1", "sentence2"),
        ("sentence1", "sentence2"),
        "label",
        _BINARY,
        ("accuracy",),
        *_sets("WNLI", "WNLI.tsv"),
        label_aliases={"not_entailment": "0", "entailment": "1"},
    ),
    # the diagnostic set: test only, predicted with an MNLI model (labels as MNLI)
    "ax": GlueTask(
        "ax",
        "AX",
        ("sentence1", "sentence2"),
        ("premise", "hypothesis"),
        None,
        _MNLI,
        (),
        (),
        (EvalSet("test", "test.tsv", "test", "AX.tsv"),),
    ),
}

# leaderboard file -> the split it is made from, for checking a submission folder
SUBMISSION_FILES = [s.submission for t in TASKS.values() for s in t.test if t.name != "ax"]


def get_task(name: str) -> GlueTask:
    key = name.lower().replace("-", "").replace("_", "")
    key = {"sts": "stsb", "sst": "sst2"}.get(key, key)
    if key not in TASKS:
        raise UsageError(f"unknown GLUE task {name!r}; choose from {', '.join(TASKS)}")
    return TASKS[key]


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------


@dataclass
class Example:
    """One GLUE example; ``label`` is a label name (classification), a float or ``None``."""

    index: str
    text_a: str
    text_b: str | None
    label: str | float | None
    where: str = ""


def _label(task: GlueTask, raw: Any, where: str) -> str | float | None:
    """A raw label (TSV string, CSV/JSON value, Hub class name) as the task's label."""
    if raw is None or raw == "" or raw == -1:
        return None
    if task.is_regression:
        try:
            return float(raw)
        except (TypeError, ValueError):
            raise GlueDataError(f"{where}: score {raw!r} is not a number") from None
    if isinstance(raw, float) and raw.is_integer():
        raw = int(raw)
    value = task.label_aliases.get(str(raw), str(raw))
    if value not in task.labels:
        raise GlueDataError(
            f"{where}: label {raw!r} is not one of {task.name}'s labels {list(task.labels)}"
        )
    return value


def _make_example(task: GlueTask, record: dict, columns, index: str, where: str) -> Example:
    texts = []
    for column in columns:
        if column is None:
            texts.append(None)
            continue
        if column not in record:
            raise GlueDataError(f"{where}: no column {column!r} (has {sorted(record)})")
        text = record[column]
        if not isinstance(text, str) or not text.strip():
            raise GlueDataError(f"{where}: empty or non-text {column!r}: {text!r}")
        texts.append(text)
    raw = record.get(task.label_column, record.get("label")) if task.label_column else None
    return Example(index, texts[0], texts[1], _label(task, raw, where), where)


def read_glue_tsv(task: GlueTask, path: str | Path, labelled: bool | None = None) -> list[Example]:
    """Read an official GLUE TSV file (quirks included). ``labelled=True`` requires labels."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"GLUE file {path} not found")
    examples = []
    # utf-8-sig: MRPC's header starts with a byte-order mark; QUOTE_NONE as the reference code
    with open(path, encoding="utf-8-sig", newline="") as handle:
        rows = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = None
        for line_no, row in enumerate(rows, start=1):
            where = f"{path}:{line_no}"
            if header is None:
                names = set(row)
                text_a = task.text_columns[0]
                if task.headerless_columns and text_a not in names:
                    header = list(task.headerless_columns)  # CoLA train/dev: data from line 1
                else:
                    if text_a not in names:
                        raise GlueDataError(
                            f"{where}: header {row} lacks the {task.name} column {text_a!r}"
                        )
                    header = row
                    continue
            if not row or row == [""]:
                continue
            if len(row) != len(header):
                raise GlueDataError(
                    f"{where}: malformed row, {len(row)} tab-separated fields where the header "
                    f"has {len(header)}"
                )
            record = dict(zip(header, row))
            index = record.get(task.index_column, str(len(examples)))
            examples.append(_make_example(task, record, task.text_columns, index, where))
    _check_labels(examples, path, labelled)
    return examples


def _check_labels(examples: list[Example], source, labelled: bool | None) -> None:
    if not examples:
        raise GlueDataError(f"{source}: no examples")
    if labelled:
        missing = next((e for e in examples if e.label is None), None)
        if missing is not None:
            raise GlueDataError(f"{missing.where}: no label")


def _columns_for(task: GlueTask, names: Sequence[str]) -> tuple[str, str | None]:
    """Text columns of a CSV/JSON file: the Hub names, the TSV names, or sentence1/sentence2."""
    for candidate in (task.hub_columns, task.text_columns):
        if candidate[0] in names and (candidate[1] is None or candidate[1] in names):
            return candidate
    raise GlueDataError(
        f"columns {list(names)} have neither {list(task.hub_columns)} nor "
        f"{list(task.text_columns)} for task {task.name}"
    )


def read_records_file(task: GlueTask, path: str | Path, labelled: bool | None = None):
    """Read a CSV (header row), JSON lines, a JSON list, or concatenated JSON objects."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"data file {path} not found")
    records: list[tuple[dict, str]] = []
    if path.suffix == ".csv":
        with open(path, encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            for record in reader:
                if None in record or None in record.values():
                    raise GlueDataError(f"{path}:{reader.line_num}: wrong number of fields")
                records.append((record, f"{path}:{reader.line_num}"))
    elif path.suffix in (".json", ".jsonl"):
        for value, line in iter_json_values(path, GlueDataError):
            items = value if isinstance(value, list) else value.get("data", [value])
            for item in items:
                if not isinstance(item, dict):
                    raise GlueDataError(f"{path}:{line}: expected an object, got {item!r:.60}")
                records.append((item, f"{path}:{line}"))
    elif path.suffix == ".tsv":
        return read_glue_tsv(task, path, labelled)
    else:
        raise GlueDataError(f"{path}: unknown data format (use .tsv, .csv, .json or .jsonl)")
    if not records:
        raise GlueDataError(f"{path}: no examples")
    columns = _columns_for(task, list(records[0][0]))
    examples = [
        _make_example(task, rec, columns, str(rec.get("idx", rec.get("index", i))), where)
        for i, (rec, where) in enumerate(records)
    ]
    _check_labels(examples, path, labelled)
    return examples


def read_hub_split(task: GlueTask, dataset_name: str, split: str) -> list[Example]:
    """A split of a Hub dataset laid out as ``nyu-mll/glue`` (integer labels with names)."""
    import datasets

    data = datasets.load_dataset(dataset_name, task.name, split=split)
    names = getattr(data.features.get("label"), "names", None)
    columns = _columns_for(task, data.column_names)
    examples = []
    for i, row in enumerate(data):
        row = dict(row)
        if names is not None and row.get("label", -1) != -1:
            row["label"] = names[row["label"]]
        where = f"{dataset_name}/{task.name}[{split}][{i}]"
        examples.append(_make_example(task, row, columns, str(row.get("idx", i)), where))
    return examples


@dataclass
class GlueDataArguments:
    """Which GLUE task and where its data is."""

    task_name: str = field(
        default=None, metadata={"help": f"one of {', '.join(TASKS)}", "choices": list(TASKS)}
    )
    data_dir: str | None = field(
        default=None, metadata={"help": "an official GLUE task folder (e.g. glue/RTE) of TSVs"}
    )
    train_file: str | None = field(default=None, metadata={"help": "CSV/JSON/TSV training file"})
    validation_file: str | None = field(default=None, metadata={"help": "CSV/JSON/TSV dev file"})
    test_file: str | None = field(default=None, metadata={"help": "CSV/JSON/TSV test file"})
    dataset_name: str | None = field(
        default=None, metadata={"help": "Hub dataset laid out as nyu-mll/glue (online users)"}
    )
    max_seq_length: int = field(default=128, metadata={"help": "truncate pairs longest-first"})
    submission_dir: str | None = field(
        default=None,
        metadata={
            "help": "leaderboard files go here (+ <dir>.zip); default <output_dir>/submission"
        },
    )

    def __post_init__(self):
        if not self.task_name:
            raise ValueError("--task_name is required")
        sources = [self.data_dir, self.dataset_name, self.train_file or self.validation_file]
        if sum(bool(s) for s in sources) != 1 and not (self.test_file and not any(sources)):
            raise ValueError(
                "give exactly one of --data_dir, --dataset_name or --train_file/--validation_file"
            )
        if self.max_seq_length < 8:
            raise ValueError(f"max_seq_length must be >= 8, got {self.max_seq_length}")


def load_split(task: GlueTask, data: GlueDataArguments, split: str) -> list[tuple[EvalSet, list]]:
    """``split`` in train/dev/test -> [(EvalSet, examples)] (MNLI has two dev and three test
    sets). Files that are absent from a data folder are skipped for test sets only."""
    if split == "train":
        sets = [EvalSet("train", "train.tsv", "train")]
    else:
        sets = list(task.dev if split == "dev" else task.test)
    labelled = split != "test"
    out = []
    if data.data_dir:
        folder = Path(data.data_dir)
        if not folder.is_dir():
            raise FileNotFoundError(f"GLUE data folder {folder} not found")
        for s in sets:
            path = folder.parent / s.task_dir / s.tsv if s.task_dir else folder / s.tsv
            if split == "test" and not path.is_file():
                logger.warning("no %s: skipping %s", path, s.name)
                continue
            reader_task = TASKS[s.task_dir.lower()] if s.task_dir else task
            out.append((s, read_glue_tsv(reader_task, path, labelled)))
    elif data.dataset_name:
        for s in sets:
            reader_task = TASKS[s.task_dir.lower()] if s.task_dir else task
            out.append((s, read_hub_split(reader_task, data.dataset_name, s.hub_split)))
    else:
        path = {"train": data.train_file, "dev": data.validation_file, "test": data.test_file}[
            split
        ]
        if path:
            out.append((sets[0], read_records_file(task, path, labelled)))
    return out


# --------------------------------------------------------------------------------------------
# Features
# --------------------------------------------------------------------------------------------


def label_ids(task: GlueTask) -> dict[str, int]:
    return {name: i for i, name in enumerate(task.labels or ())}


def tokenize_examples(
    examples: Sequence[Example], tokenizer, task: GlueTask, max_seq_length: int = 128
) -> list[dict]:
    """[CLS] A [SEP] (B [SEP]), truncated longest-first to ``max_seq_length`` as the reference
    ``_truncate_seq_pair``; no padding (batches are padded dynamically). Adds ``labels``."""
    texts_a = [e.text_a for e in examples]
    texts_b = [e.text_b for e in examples] if examples and examples[0].text_b is not None else None
    encoded = tokenizer(
        texts_a,
        texts_b,
        truncation="longest_first" if texts_b else True,
        max_length=max_seq_length,
        return_token_type_ids=True,
    )
    ids = label_ids(task)
    features = []
    for i, example in enumerate(examples):
        feature = {
            "input_ids": encoded["input_ids"][i],
            "token_type_ids": encoded["token_type_ids"][i],
            "attention_mask": encoded["attention_mask"][i],
        }
        if example.label is not None:
            feature["labels"] = float(example.label) if task.is_regression else ids[example.label]
        features.append(feature)
    return features


# --------------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------------


def compute_metrics(task: GlueTask, predictions, references) -> dict[str, float]:
    """GLUE's metrics for ``task`` (fractions, not percentages) plus ``score``: the task's
    leaderboard score (the mean of its metrics when it has two: MRPC, QQP, STS-B)."""
    import numpy as np

    preds = np.asarray(predictions)
    refs = np.asarray(references)
    if len(preds) != len(refs) or len(preds) == 0:
        raise ValueError(f"{len(preds)} predictions for {len(refs)} references")
    out: dict[str, float] = {}
    for metric in task.metrics:
        if metric == "accuracy":
            out[metric] = float(np.mean(preds == refs))
        elif metric == "f1":
            from sklearn.metrics import f1_score

            out[metric] = float(f1_score(refs, preds, pos_label=1, average="binary"))
        elif metric == "matthews_correlation":
            from sklearn.metrics import matthews_corrcoef

            out[metric] = float(matthews_corrcoef(refs, preds))
        elif metric == "pearson":
            from scipy.stats import pearsonr

            out[metric] = float(pearsonr(preds, refs)[0])
        elif metric == "spearmanr":
            from scipy.stats import spearmanr

            out[metric] = float(spearmanr(preds, refs)[0])
        else:
            raise ValueError(f"unknown metric {metric}")
    out["score"] = float(np.mean([out[m] for m in task.metrics]))
    return out


def glue_score(task_scores: dict[str, dict[str, float] | float]) -> float:
    """The GLUE score as the leaderboard computes it: the mean over tasks of each task's score,
    where a task with two metrics (MRPC/QQP F1 and accuracy, STS-B Pearson and Spearman, MNLI
    matched and mismatched) counts as the mean of the two. AX is not part of it. Values are
    whatever scale they come in (fractions or percentages).

    ``task_scores`` maps a task name to a float (its score) or to a metrics dict; for MNLI a
    dict with ``accuracy`` and ``accuracy_mm`` (or ``mnli-m``/``mnli-mm`` given as two tasks).
    """
    scores: dict[str, float] = {}
    for name, value in task_scores.items():
        key = name.lower().replace("_", "-")
        if key in ("mnli-m", "mnli-mm"):
            scores.setdefault("mnli", [])
            scores["mnli"].append(float(value if not isinstance(value, dict) else value["score"]))
            continue
        task = get_task(key)
        if task.name == "ax":
            continue
        if isinstance(value, dict):
            if task.name == "mnli":
                value = (value["accuracy"] + value["accuracy_mm"]) / 2
            else:
                value = sum(value[m] for m in task.metrics) / len(task.metrics)
        scores[task.name] = float(value)
    if isinstance(scores.get("mnli"), list):
        scores["mnli"] = sum(scores["mnli"]) / len(scores["mnli"])
    if not scores:
        raise ValueError("no GLUE task scores given")
    return sum(scores.values()) / len(scores)


# --------------------------------------------------------------------------------------------
# Predictions and leaderboard files
# --------------------------------------------------------------------------------------------


def decode_predictions(task: GlueTask, logits: Sequence, id2label: dict | None = None) -> list:
    """Logits -> label names (classification) or floats (STS-B)."""
    import numpy as np

    array = np.stack([np.asarray(x, dtype=np.float32) for x in logits])
    if task.is_regression:
        return [float(x) for x in array.reshape(len(array), -1)[:, 0]]
    names = task.labels
    if id2label and set(map(str, id2label.values())) == set(task.labels):
        # a model fine-tuned elsewhere (e.g. a stock MNLI model): trust its own label order
        names = [str(id2label[i]) for i in sorted(id2label, key=int)]
    return [names[int(i)] for i in array.argmax(-1)]


def write_predictions(path: str | Path, indices: Sequence, predictions: Sequence) -> Path:
    """A GLUE leaderboard file: header ``index<TAB>prediction``, then one row per example
    (label names for text-label tasks, 0/1 for CoLA/SST-2/MRPC/QQP/WNLI, floats for STS-B)."""
    lines = ["index\tprediction"]
    for index, prediction in zip(indices, predictions, strict=True):
        value = f"{prediction:.3f}" if isinstance(prediction, float) else str(prediction)
        lines.append(f"{index}\t{value}")
    atomic.write_text(path, "\n".join(lines) + "\n")
    return Path(path)


def zip_submission(submission_dir: str | Path) -> Path:
    """Zip every leaderboard file in ``submission_dir`` into ``<submission_dir>.zip`` (files at
    the top level of the archive, as the GLUE site expects)."""
    folder = Path(submission_dir)
    files = sorted(p for p in folder.glob("*.tsv") if p.name in {*SUBMISSION_FILES, "AX.tsv"})
    if not files:
        raise ValueError(f"no leaderboard files in {folder}")
    target = folder.parent / f"{folder.name}.zip"
    with atomic.atomic_open(target, "wb") as handle:
        with zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for path in files:
                archive.write(path, arcname=path.name)
    return target


# --------------------------------------------------------------------------------------------
# The recipe
# --------------------------------------------------------------------------------------------


def _truncate(items: list, limit: int | None) -> list:
    return items if limit is None else items[:limit]


def _predict(task, model, tokenizer, examples, data_args, args, limit) -> tuple[list, list]:
    """(examples kept, decoded predictions) for the first ``limit`` examples."""
    from .finetune import predict

    examples = _truncate(examples, limit)
    features = tokenize_examples(examples, tokenizer, task, data_args.max_seq_length)
    logits = predict(
        model, features, args.per_device_eval_batch_size, disable_tqdm=args.disable_tqdm
    )["logits"]
    return examples, decode_predictions(task, logits, getattr(model.config, "id2label", None))


def evaluate(task, model, tokenizer, eval_sets, data_args, args) -> tuple[dict, dict]:
    """Dev metrics (MNLI's mismatched set gets the suffix ``_mm``) and dev predictions."""
    metrics: dict[str, float] = {}
    predictions: dict[str, tuple[list, list]] = {}
    for eval_set, examples in eval_sets:
        examples, preds = _predict(
            task, model, tokenizer, examples, data_args, args, args.max_eval_samples
        )
        if task.is_regression:
            refs, hyps = [e.label for e in examples], preds
        else:
            ids = label_ids(task)
            refs, hyps = [ids[e.label] for e in examples], [ids[p] for p in preds]
        suffix = "_mm" if eval_set.name.endswith("mismatched") else ""
        for key, value in compute_metrics(task, hyps, refs).items():
            metrics[key + suffix] = value
        metrics["eval_samples" + suffix] = len(examples)
        predictions[eval_set.name] = ([e.index for e in examples], preds)
    if "accuracy_mm" in metrics:
        metrics["score"] = (metrics["score"] + metrics["score_mm"]) / 2
    return metrics, predictions


def predict_test_sets(task, model, tokenizer, test_sets, data_args, args, out_dir) -> list[Path]:
    """Predict each test set and write its leaderboard file into ``out_dir``."""
    written = []
    for eval_set, examples in test_sets:
        examples, preds = _predict(
            task, model, tokenizer, examples, data_args, args, args.max_predict_samples
        )
        path = Path(out_dir) / eval_set.submission
        written.append(write_predictions(path, [e.index for e in examples], preds))
    return written


def build_model(task: GlueTask, model_args: ModelArguments):
    from modeling import BertForSequenceClassification

    from .finetune import load_model

    overrides: dict[str, Any] = {"num_labels": task.num_labels}
    if task.labels:
        overrides["id2label"] = dict(enumerate(task.labels))
        overrides["label2id"] = label_ids(task)
    return load_model(BertForSequenceClassification, model_args, **overrides)


def run(
    model_args: ModelArguments, data_args: GlueDataArguments, args: TrainingArguments
) -> dict[str, Any]:
    """Fine-tune / evaluate / predict one GLUE task; with grids, the paper's protocol.

    Each run writes ``eval_results.json`` (metric names as keys) and ``eval_predictions.tsv``
    (index and prediction per dev example) in its output folder; with ``do_predict`` the
    leaderboard files of the best run go to ``submission_dir`` and ``<submission_dir>.zip``.
    """
    from .finetune import grid_search, load_tokenizer, save_model, train, write_results

    task = get_task(data_args.task_name)
    if task.name == "ax" and (args.do_train or args.do_eval):
        raise UsageError(
            "task ax has no training or dev data: predict it with a fine-tuned MNLI model "
            "(--do_train false --do_eval false --do_predict) or run mnli with --do_predict"
        )
    # read every file first: a bad row fails before any model or tokenizer loads
    train_examples = load_split(task, data_args, "train") if args.do_train else []
    eval_sets = load_split(task, data_args, "dev") if args.do_eval else []
    test_sets = load_split(task, data_args, "test") if args.do_predict else []
    if args.do_train and not train_examples:
        raise UsageError(f"--do_train: no training data for {task.name} (give --train_file)")
    if args.do_eval and not eval_sets:
        raise UsageError(f"--do_eval: no dev data for {task.name} (give --validation_file)")
    if args.do_predict and not test_sets:
        raise UsageError(f"--do_predict: no test data for {task.name} (give --test_file)")
    tokenizer = load_tokenizer(model_args)
    train_features = None
    if args.do_train:
        ((_, train_examples),) = train_examples
        train_examples = _truncate(train_examples, args.max_train_samples)
        train_features = tokenize_examples(
            train_examples, tokenizer, task, data_args.max_seq_length
        )
        lengths = [len(f["input_ids"]) for f in train_features]
        logger.info(
            "%s train: %d examples, mean length %.1f tokens, %d truncated to %d",
            task.name,
            len(train_features),
            sum(lengths) / len(lengths),
            sum(n >= data_args.max_seq_length for n in lengths),
            data_args.max_seq_length,
        )

    def run_one(run_args: TrainingArguments) -> dict[str, float]:
        out_dir = Path(run_args.output_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        model = build_model(task, model_args)
        metrics: dict[str, float] = {}
        if train_features is not None:
            result = train(model, train_features, run_args)
            metrics.update(result.summary(), train_samples=len(train_features))
            write_results(out_dir, "train_results.json", dataclasses.asdict(result))
        model = getattr(model, "module", model)
        if eval_sets:
            eval_metrics, eval_preds = evaluate(
                task, model, tokenizer, eval_sets, data_args, run_args
            )
            metrics.update(eval_metrics)
            for name, (indices, preds) in eval_preds.items():
                suffix = "_mismatched" if name.endswith("mismatched") else ""
                write_predictions(out_dir / f"eval_predictions{suffix}.tsv", indices, preds)
            write_results(out_dir, "eval_results.json", metrics)
            logger.info("%s dev: %s", task.name, {k: round(v, 4) for k, v in eval_metrics.items()})
        if test_sets:
            predict_test_sets(
                task, model, tokenizer, test_sets, data_args, run_args, out_dir / "test"
            )
        if run_args.save_model and train_features is not None:
            save_model(model, tokenizer, out_dir / "model")
        return metrics

    if args.learning_rate_grid or args.batch_size_grid or args.num_train_epochs_grid or args.seeds:
        if not args.do_eval:
            raise UsageError("a grid search picks on dev: it needs --do_eval")
        summary = grid_search(args, run_one, task.main_metric)
        best = summary["best_setting"]
        runs = [
            r
            for r in summary["runs"]
            if all(r[k] == best[k] for k in ("learning_rate", "per_device_train_batch_size"))
            and r["num_train_epochs"] == best["num_train_epochs"]
        ]
        chosen = max(runs, key=lambda r: r[task.main_metric])  # the paper keeps the best restart
        summary["chosen_run"] = chosen
        write_results(args.output_dir, "grid_results.json", summary)
        final_dir = Path(chosen["output_dir"])
        outcome = {"grid": summary, "metrics": chosen}
    else:
        outcome = {"metrics": run_one(args)}
        final_dir = Path(args.output_dir)
    if test_sets:
        submission = Path(data_args.submission_dir or Path(args.output_dir) / "submission")
        submission.mkdir(parents=True, exist_ok=True)
        for path in sorted((final_dir / "test").glob("*.tsv")):
            shutil.copyfile(path, submission / path.name)
        outcome["submission_zip"] = str(zip_submission(submission))
        logger.info("leaderboard files in %s, zipped to %s", submission, outcome["submission_zip"])
    return outcome
