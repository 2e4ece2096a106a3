"""Corpus readers for pretraining data: raw text to documents (lists of sentences).

Formats:

* ``text``          -- Google's format: one sentence per line, a blank line between documents.
* ``wikiextractor`` -- WikiExtractor output: ``<doc id=.. url=.. title=..>`` ... ``</doc>``; the
  first line (the title) is dropped, every other non-empty line is a paragraph that is split
  into sentences.
* ``jsonl``         -- JSON lines, one document per record, text in ``text_field``; paragraphs
  (lines) are split into sentences.
* ``hub``           -- a Hugging Face Hub dataset by name (``name`` or ``name:config``), one
  document per row; needs network access.

Sentence splitter: a small rule-based splitter (``split_sentences``), chosen because it needs no
model download (NLTK's punkt needs data files, spaCy a model; neither is available offline),
is deterministic and fast, and errors matter little here: segments are packed from several
sentences, so a misplaced boundary only moves a segment edge. It splits after ``.``, ``!`` or
``?`` (plus closing quotes/brackets) followed by whitespace and an upper-case letter, digit or
opening quote, except after common abbreviations and single-letter initials.
``sentence_splitter="line"`` keeps each line (paragraph) whole.

Bad input raises :class:`CorpusError` naming the file and line.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "CorpusError",
    "CorpusStats",
    "split_sentences",
    "detect_format",
    "read_documents",
    "FORMATS",
]

FORMATS = ("auto", "text", "wikiextractor", "jsonl", "hub")

_ABBREVIATIONS = frozenset(
    """mr mrs ms dr prof sr jr st mt ft vs etc no nos vol vols fig figs inc ltd co corp
    jan feb mar apr jun jul aug sep sept oct nov dec gen gov lt col sgt capt rev hon
    e.g i.e cf al approx ca est dept univ assn bros op pp ed eds u.s u.k""".split()
)
_BOUNDARY = re.compile(r"[.!?][\"'”’)\]]*\s+(?=[\"'“‘(\[]?[A-Z0-9])")
_LAST_WORD = re.compile(r"(\S+)$")


class CorpusError(ValueError):
    """Unreadable or unusable corpus input (the message names the file and line)."""


@dataclass
class CorpusStats:
    """Counts of what was read and what was skipped (and why)."""

    files: int = 0
    documents: int = 0
    sentences: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str, n: int = 1) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + n


def split_sentences(text: str) -> list[str]:
    """Split a paragraph into sentences with the rules described in the module docstring."""
    text = text.strip()
    if not text:
        return []
    out, start = [], 0
    for m in _BOUNDARY.finditer(text):
        if text[m.start()] == ".":
            word = _LAST_WORD.search(text, start, m.start())
            if word:
                w = word.group(1).lower().lstrip("(\"'“‘")
                # initials ("J. R. R.") and known abbreviations do not end a sentence
                if len(w) == 1 and w.isalpha() or w in _ABBREVIATIONS:
                    continue
        piece = text[start : m.end()].strip()
        if piece:
            out.append(piece)
        start = m.end()
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


def _splitter(name: str) -> Callable[[str], list[str]]:
    if name == "rules":
        return split_sentences
    if name == "line":
        return lambda t: [t.strip()] if t.strip() else []
    raise ValueError(f"unknown sentence_splitter {name!r}; choose 'rules' or 'line'")


def _lines(path: Path, on_decode_error: str, stats: CorpusStats) -> Iterator[tuple[int, str]]:
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                yield lineno, raw.decode("utf-8")
            except UnicodeDecodeError as err:
                if on_decode_error == "skip":
                    stats.skip("non-UTF-8 lines")
                    continue
                raise CorpusError(
                    f"{path}:{lineno}: invalid UTF-8 ({err.reason} at byte {err.start}); "
                    "fix the file or pass on_decode_error='skip' (--on_decode_error skip)"
                ) from None


def detect_format(path: str | Path) -> str:
    """Guess a file's format from its name and first non-empty line."""
    path = Path(path)
    if path.suffix in (".jsonl", ".json"):
        return "jsonl"
    with open(path, "rb") as f:
        for raw in f:
            line = raw.strip()
            if line:
                return "wikiextractor" if line.startswith(b"<doc ") else "text"
    return "text"


def _read_text(path, split, stats, on_decode_error):
    doc: list[str] = []
    for _, line in _lines(path, on_decode_error, stats):
        line = line.strip()
        if not line:
            if doc:
                yield doc
            doc = []
        else:
            doc.append(line)
    if doc:
        yield doc


def _read_wikiextractor(path, split, stats, on_decode_error):
    doc: list[str] | None = None
    title_pending = False
    open_line = 0
    for lineno, line in _lines(path, on_decode_error, stats):
        s = line.strip()
        if s.startswith("<doc ") and s.endswith(">"):
            if doc is not None:
                raise CorpusError(
                    f"{path}:{lineno}: <doc> opened before </doc> of line {open_line}"
                )
            doc, title_pending, open_line = [], True, lineno
        elif s == "</doc>":
            if doc is None:
                raise CorpusError(f"{path}:{lineno}: </doc> without a matching <doc>")
            yield doc
            doc = None
        elif doc is None:
            if s:
                raise CorpusError(f"{path}:{lineno}: text outside <doc> ... </doc>")
        elif s:
            if title_pending:
                title_pending = False
                continue
            doc.extend(split(s))
    if doc is not None:
        raise CorpusError(f"{path}:{open_line}: <doc> not closed before the end of the file")


def _read_jsonl(path, split, stats, on_decode_error, text_field):
    for lineno, line in _lines(path, on_decode_error, stats):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise CorpusError(f"{path}:{lineno}: invalid JSON ({err.msg})") from None
        if not isinstance(record, dict) or text_field not in record:
            raise CorpusError(f"{path}:{lineno}: record has no {text_field!r} field")
        text = record[text_field]
        if not isinstance(text, str):
            raise CorpusError(f"{path}:{lineno}: field {text_field!r} is not a string")
        yield [s for para in text.splitlines() for s in split(para)]


def _read_hub(name, split, text_field, hub_split):
    try:
        import datasets
    except ImportError as err:  # pragma: no cover - datasets is a dependency
        raise CorpusError("reading a Hub dataset needs the 'datasets' package") from err
    repo, _, config = name.partition(":")
    ds = datasets.load_dataset(repo, config or None, split=hub_split)
    if text_field not in ds.column_names:
        raise CorpusError(f"hub dataset {name}: no column {text_field!r} ({ds.column_names})")
    for row in ds:
        yield [s for para in row[text_field].splitlines() for s in split(para)]


def read_documents(
    inputs: list[str | Path],
    input_format: str = "auto",
    sentence_splitter: str = "rules",
    text_field: str = "text",
    hub_split: str = "train",
    on_decode_error: str = "error",
    min_sentences: int = 1,
    stats: CorpusStats | None = None,
    progress: bool = False,
) -> list[list[str]]:
    """Read every input into a list of documents, each a list of sentence strings.

    Empty files and documents with fewer than ``min_sentences`` sentences are counted in
    ``stats.skipped``; malformed input raises :class:`CorpusError`.
    """
    if input_format not in FORMATS:
        raise ValueError(f"unknown input_format {input_format!r}; choose from {FORMATS}")
    if on_decode_error not in ("error", "skip"):
        raise ValueError(f"on_decode_error must be 'error' or 'skip', got {on_decode_error!r}")
    split = _splitter(sentence_splitter)
    stats = stats if stats is not None else CorpusStats()
    documents: list[list[str]] = []
    iterator = inputs
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(inputs, desc="reading", unit="file")
    for source in iterator:
        if input_format == "hub":
            docs = _read_hub(str(source), split, text_field, hub_split)
        else:
            path = Path(source)
            if not path.is_file():
                raise CorpusError(f"{path}: no such file")
            fmt = detect_format(path) if input_format == "auto" else input_format
            if fmt == "text":
                docs = _read_text(path, split, stats, on_decode_error)
            elif fmt == "wikiextractor":
                docs = _read_wikiextractor(path, split, stats, on_decode_error)
            elif fmt == "jsonl":
                docs = _read_jsonl(path, split, stats, on_decode_error, text_field)
            else:
                raise CorpusError(f"{path}: format {fmt!r} needs a dataset name, not a file")
        stats.files += 1
        n_before = len(documents)
        for doc in docs:
            if not doc:
                stats.skip("empty documents")
            elif len(doc) < min_sentences:
                stats.skip(f"documents with fewer than {min_sentences} sentences")
            else:
                documents.append(doc)
                stats.sentences += len(doc)
        if len(documents) == n_before:
            stats.skip("files without documents")
    stats.documents = len(documents)
    return documents
