"""GLUE data: the official TSVs as distributed (CoLA train/dev without a header, the UTF-8 BOM in
MRPC, label names per task), CSV/JSON files, or a Hub dataset laid out as ``nyu-mll/glue``. A
malformed row or an undecodable file is reported as ``file:line: what is wrong``."""

from __future__ import annotations

import csv
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modeling.cli import UsageError

from ..data_files import iter_json_values, open_text
from .tasks import TASKS, EvalSet, GlueTask

logger = logging.getLogger(__name__)

csv.field_size_limit(1 << 24)


class GlueDataError(UsageError):
    """A GLUE data file that cannot be read; the message names the file and line."""


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
    with open_text(path, GlueDataError) as handle:
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
        with open_text(path, GlueDataError) as handle:
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
