"""The GLUE task registry: each task's columns, labels, metrics, dev/test files and leaderboard
file (labels in the order of google-research/bert's processors; ``None`` = regression, STS-B)."""

from __future__ import annotations

from dataclasses import dataclass, field

from modeling.cli import UsageError


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
        """The metric a grid chooses on: the mean of two metrics, or the only one."""
        return "combined_score" if len(self.metrics) > 1 else self.metrics[0]


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

# the 11 files of a complete GLUE submission (AX included)
SUBMISSION_FILES = [s.submission for t in TASKS.values() for s in t.test if t.name != "ax"]


def get_task(name: str) -> GlueTask:
    key = name.lower().replace("-", "").replace("_", "")
    key = {"sts": "stsb", "sst": "sst2"}.get(key, key)
    if key not in TASKS:
        raise UsageError(f"unknown GLUE task {name!r}; choose from {', '.join(TASKS)}")
    return TASKS[key]
