"""SQuAD data: the official JSON files (checked against the schema) -> ``datasets.Dataset``.

One row per question: ``id``, ``title``, ``question``, ``context``, ``answers`` (``{"text": [...],
"answer_start": [...]}``, empty for an unanswerable question) and ``is_impossible``, the columns of
the Hub's ``squad`` / ``squad_v2`` datasets, so ``--dataset_name squad`` gives the same rows.
Rows are written to the ``datasets`` cache by :func:`load_split` (a second launch reads them
back); the cache key holds the file's size and modification time, so an edited file is re-read.

``FILE[a:b]`` (or ``[a:b:step]``) keeps articles a..b-1 of a file. A file that is not UTF-8, not
JSON or not in the official schema is a one-line error naming the file and the field or line.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modeling.cli import UsageError

from ..data_files import read_text

logger = logging.getLogger(__name__)

# saved in a fine-tuned model's config (``squad_window``) for the inference pipeline
WINDOW_KEYS = (
    "max_seq_length",
    "doc_stride",
    "max_query_length",
    "n_best_size",
    "max_answer_length",
)


@dataclass
class SquadArguments:
    """Where the SQuAD data is and how questions become windows."""

    train_file: list[str] = field(
        default_factory=list,
        metadata={
            "help": "official SQuAD JSON file(s); FILE[a:b] or FILE[a:b:step] "
            "selects articles (several files are concatenated)"
        },
    )
    validation_file: str | None = field(
        default=None, metadata={"help": "official SQuAD JSON (FILE[a:b] keeps articles a..b-1)"}
    )
    test_file: str | None = field(
        default=None, metadata={"help": "SQuAD JSON to predict with --do_predict (answers unused)"}
    )
    dataset_name: str | None = field(
        default=None, metadata={"help": "Hub dataset instead of files (squad, squad_v2)"}
    )
    version_2_with_negative: bool = field(
        default=False, metadata={"help": "SQuAD 2.0: questions may have no answer"}
    )
    null_score_diff_threshold: float | None = field(
        default=None,
        metadata={
            "help": "tau: predict '' when null score - best span score > tau "
            "(default: the model config's, else 0.0)"
        },
    )
    max_seq_length: int = field(default=384, metadata={"help": "tokens per window"})
    doc_stride: int = field(
        default=128, metadata={"help": "step between window starts (Google's doc_stride)"}
    )
    max_query_length: int = field(default=64, metadata={"help": "question tokens kept"})
    n_best_size: int = field(default=20, metadata={"help": "start/end candidates per window"})
    max_answer_length: int = field(default=30, metadata={"help": "longest answer, in tokens"})
    train_sample_seed: int = field(
        default=12345, metadata={"help": "shuffle seed for --max_train_samples (Google's 12345)"}
    )

    def __post_init__(self):
        if isinstance(self.train_file, str):
            self.train_file = [self.train_file]
        if self.max_seq_length <= self.max_query_length + 3:
            raise ValueError(
                f"max_seq_length ({self.max_seq_length}) must be greater than "
                f"max_query_length ({self.max_query_length}) + 3"
            )
        if self.doc_stride < 1 or self.n_best_size < 1 or self.max_answer_length < 1:
            raise ValueError("doc_stride, n_best_size and max_answer_length must be >= 1")

    def window(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in WINDOW_KEYS}


class SquadFormatError(UsageError):
    """A SQuAD file that does not follow the official schema; names the file and the field."""


_SLICE = re.compile(r"^(?P<path>.*)\[(?P<start>-?\d*):(?P<stop>-?\d*)(?::(?P<step>\d*))?\]$")


def split_file_spec(spec: str) -> tuple[str, slice]:
    """``"dev.json[0:17]"`` -> ``("dev.json", slice(0, 17))`` (Python slice of the articles,
    ``[a:b:c]`` too); a plain path keeps all articles."""
    match = _SLICE.match(spec)
    if not match:
        return spec, slice(None)
    to_int = lambda s: int(s) if s else None  # noqa: E731
    parts = (to_int(match[k]) for k in ("start", "stop", "step"))
    return match["path"], slice(*parts)


def read_json_object(path: str | Path, what: str) -> dict:
    """A JSON object from ``path``; a missing file, non-UTF-8 bytes, bad JSON (with its line) or
    another JSON type is a one-line error naming the file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} {path} not found")
    text = read_text(path, SquadFormatError)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise SquadFormatError(
            f"{path}: line {err.lineno} column {err.colno}: invalid JSON ({err.msg})"
        ) from None
    if not isinstance(value, dict):
        raise SquadFormatError(f"{path}: expected a JSON object, got {type(value).__name__}")
    return value


def load_squad_file(spec: str) -> tuple[list[dict], str]:
    """Read an official SQuAD JSON file (optionally ``FILE[a:b]``); return (data, version).

    The schema is checked (``data[i].paragraphs[j].qas[k]`` with ``id``, ``question``,
    ``answers[].text`` / ``answer_start``); a violation raises :class:`SquadFormatError` naming
    the file and the field.
    """
    path_str, articles = split_file_spec(spec)
    path = Path(path_str)
    raw = read_json_object(path, "SQuAD file")
    if not isinstance(raw.get("data"), list):
        raise SquadFormatError(f"{path}: expected an object with a 'data' list (official schema)")
    data = raw["data"]
    for i, article in enumerate(data):
        _check_article(path, i, article)
    return data[articles], str(raw.get("version", ""))


def _check_article(path: Path, i: int, article: Any) -> None:
    def fail(where: str, what: str):
        raise SquadFormatError(f"{path}: data[{i}]{where}: {what}")

    if not isinstance(article, dict) or not isinstance(article.get("paragraphs"), list):
        fail("", "expected an object with a 'paragraphs' list")
    for j, para in enumerate(article["paragraphs"]):
        where = f".paragraphs[{j}]"
        if not isinstance(para, dict) or not isinstance(para.get("context"), str):
            fail(where, "missing 'context' (a string)")
        if not isinstance(para.get("qas"), list):
            fail(where, "missing 'qas' (a list)")
        for k, qa in enumerate(para["qas"]):
            w = f"{where}.qas[{k}]"
            if not isinstance(qa, dict):
                fail(w, "expected an object")
            for key, kind in (("id", str), ("question", str), ("answers", list)):
                if not isinstance(qa.get(key), kind):
                    fail(w, f"missing {key!r} ({kind.__name__})")
            for a, ans in enumerate(qa["answers"]):
                if not isinstance(ans, dict) or not isinstance(ans.get("text"), str):
                    fail(f"{w}.answers[{a}]", "missing 'text' (a string)")
                if not isinstance(ans.get("answer_start"), int):
                    fail(f"{w}.answers[{a}]", "missing 'answer_start' (an integer)")


def iter_rows(data: list[dict], is_training: bool, version_2_with_negative: bool):
    """Official ``data`` list -> one row per question (the Hub ``squad`` columns).

    For training, only the first gold answer is kept (Google refuses several), and answers that
    do not occur at their ``answer_start`` are skipped with a warning (Google skips answers it
    cannot recover)."""
    skipped = 0
    for article in data:
        for para in article["paragraphs"]:
            context = para["context"]
            for qa in para["qas"]:
                impossible = bool(qa.get("is_impossible", False)) and version_2_with_negative
                answers = [] if impossible else qa["answers"]
                if is_training and not impossible:
                    if not answers:
                        raise SquadFormatError(
                            f"question {qa['id']!r} has no answer and is not is_impossible "
                            "(is this a v2.0 file without --version_2_with_negative?)"
                        )
                    answers = answers[:1]
                    start, text = answers[0]["answer_start"], answers[0]["text"]
                    if context[start : start + len(text)] != text or not text.strip():
                        skipped += 1
                        continue
                yield {
                    "id": qa["id"],
                    "title": str(article.get("title", "")),
                    "question": qa["question"],
                    "context": context,
                    "answers": {
                        "text": [a["text"] for a in answers],
                        "answer_start": [a["answer_start"] for a in answers],
                    },
                    "is_impossible": impossible,
                }
    if skipped:
        logger.warning("skipped %d training questions whose answer text is not found", skipped)


def filter_dataset(data: list[dict], qids: set[str]) -> list[dict]:
    """The official ``data`` list restricted to the questions ``qids`` (for subset evaluation)."""
    out = []
    for article in data:
        paragraphs = []
        for para in article["paragraphs"]:
            qas = [qa for qa in para["qas"] if qa["id"] in qids]
            if qas:
                paragraphs.append({**para, "qas": qas})
        if paragraphs:
            out.append({**article, "paragraphs": paragraphs})
    return out


def _rows_from_files(specs: list[str], is_training: bool, v2: bool, stamps: list):
    del stamps  # part of the cache key only
    for spec in specs:
        data, _ = load_squad_file(spec)
        yield from iter_rows(data, is_training, v2)


def _file_stamp(spec: str) -> tuple[str, int, int]:
    path = Path(split_file_spec(spec)[0])
    if not path.is_file():
        raise FileNotFoundError(f"SQuAD file {path} not found")
    stat = path.stat()
    return str(path.resolve()), stat.st_size, stat.st_mtime_ns


def load_split(specs: list[str], is_training: bool, v2: bool, cache_dir: str | None = None):
    """Official JSON file(s) -> a ``datasets.Dataset`` of questions, cached on disk.

    The files are checked first (a bad file fails here, in one line, before any training)."""
    import datasets

    for spec in specs:
        _file_stamp(spec)
        data, version = load_squad_file(spec)  # schema errors now, with the file's name
        if version.startswith("v2") and not v2:
            logger.warning("%s is SQuAD %s: did you mean --version_2_with_negative?", spec, version)
        if is_training:
            for _ in iter_rows(data, True, v2):  # a v2.0 file without the flag: one line now
                pass
    return datasets.Dataset.from_generator(
        _rows_from_files,
        gen_kwargs={
            "specs": list(specs),
            "is_training": is_training,
            "v2": v2,
            "stamps": [_file_stamp(s) for s in specs],
        },
        features=row_features(),
        cache_dir=cache_dir,
    )


def row_features():
    import datasets

    return datasets.Features(
        {
            "id": datasets.Value("string"),
            "title": datasets.Value("string"),
            "question": datasets.Value("string"),
            "context": datasets.Value("string"),
            "answers": {
                "text": datasets.Sequence(datasets.Value("string")),
                "answer_start": datasets.Sequence(datasets.Value("int32")),
            },
            "is_impossible": datasets.Value("bool"),
        }
    )


def official_data(dataset) -> list[dict]:
    """The official ``data`` list (one article per title and context) for the metric scripts,
    rebuilt from rows: the same questions and gold answers as the file they came from."""
    articles: dict[str, dict[str, list]] = {}
    for row in dataset:
        paragraphs = articles.setdefault(row["title"], {})
        qas = paragraphs.setdefault(row["context"], [])
        answers = row["answers"]
        qas.append(
            {
                "id": row["id"],
                "question": row["question"],
                "answers": [
                    {"text": t, "answer_start": s}
                    for t, s in zip(answers["text"], answers["answer_start"])
                ],
                "is_impossible": row["is_impossible"],
            }
        )
    return [
        {"title": t, "paragraphs": [{"context": c, "qas": q} for c, q in paras.items()]}
        for t, paras in articles.items()
    ]
