"""CoNLL-2003 data: readers, tag schemes, and the ``datasets.Dataset`` of documents.

Data: the original CoNLL files (``token POS chunk NER`` per line, blank lines between sentences,
``-DOCSTART-`` lines between documents, IOB1 tags), the ``datasets`` JSON fixture format
(``{"words": [...], "ner": [...]}`` records), or a Hub dataset. Tags of any scheme (IOB1, IOB2,
IOBES, BILOU) are converted to IOB2. A malformed, binary or non-UTF-8 file is a one-line error
naming the file and line, before any training.

:func:`load_split` gives one row per document (``document``, ``first_sentence``, ``words`` and
``tags``: a list per sentence), written to the ``datasets`` cache (keyed by the file's size and
modification time) so that a second launch reads it back.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from modeling.cli import UsageError

from ..data_files import iter_json_values, read_text

logger = logging.getLogger(__name__)

TAG_SCHEMES = ("iob1", "iob2", "iobes", "bilou")
_PREFIXES = {"iob1": "BI", "iob2": "BI", "iobes": "BIES", "bilou": "BILU"}


@dataclass
class NerDataArguments:
    """Where the data is and how sentences become model inputs."""

    train_file: str | None = field(
        default=None, metadata={"help": "CoNLL file (eng.train) or JSON records"}
    )
    validation_file: str | None = field(default=None, metadata={"help": "dev file (eng.testa)"})
    test_file: str | None = field(default=None, metadata={"help": "test file (eng.testb)"})
    dataset_name: str | None = field(
        default=None, metadata={"help": "Hub dataset instead of files (e.g. conll2003; online)"}
    )
    tag_scheme: str = field(
        default="iob1",
        metadata={
            "help": "tag scheme of the files; converted to IOB2 (iob1 also reads IOB2)",
            "choices": TAG_SCHEMES,
        },
    )
    tag_column: int = field(default=-1, metadata={"help": "column of the NER tag in CoNLL files"})
    max_seq_length: int = field(default=128, metadata={"help": "pieces per window incl. CLS/SEP"})
    document_context: bool = field(
        default=False,
        metadata={"help": "encode each sentence with its document's neighbouring sentences"},
    )
    eval_document_context: bool | None = field(
        default=None, metadata={"help": "document context at evaluation (default: as training)"}
    )
    label_all_pieces: bool = field(
        default=False, metadata={"help": "label every piece of a word, not only the first"}
    )
    long_sentence_stride: int = field(
        default=0,
        metadata={"help": "pieces scored per window when a sentence exceeds the window (0: half)"},
    )
    feature_based: bool = field(
        default=False,
        metadata={"help": "frozen encoder, last 4 layers concatenated -> 2-layer BiLSTM (Table 7)"},
    )
    feature_layers: int = field(default=4, metadata={"help": "last N layers concatenated"})
    lstm_hidden_size: int = field(default=768, metadata={"help": "BiLSTM size per direction"})

    def __post_init__(self):
        if self.max_seq_length < 8:
            raise ValueError(f"max_seq_length must be >= 8, got {self.max_seq_length}")
        if self.tag_scheme not in TAG_SCHEMES:
            raise ValueError(f"tag_scheme must be one of {TAG_SCHEMES}, got {self.tag_scheme!r}")


@dataclass
class Sentence:
    """One sentence: words, IOB2 tags and the index of its document."""

    words: list[str]
    tags: list[str]
    document: int = 0


# --------------------------------------------------------------------------------------------
# Tag schemes
# --------------------------------------------------------------------------------------------


def check_tag(tag: str, scheme: str) -> None:
    """Raise ``ValueError`` unless ``tag`` is ``O`` or ``<prefix>-<TYPE>`` for ``scheme``."""
    if tag == "O":
        return
    prefix, _, kind = tag.partition("-")
    if not kind or prefix not in _PREFIXES[scheme]:
        allowed = ", ".join(f"{p}-TYPE" for p in _PREFIXES[scheme])
        raise ValueError(f"tag {tag!r} is not valid {scheme.upper()} (O, {allowed})")


def to_iob2(tags: Sequence[str], scheme: str = "iob1") -> list[str]:
    """Convert one sentence's tags to IOB2 (every entity starts with ``B-``).

    IOB1 (CoNLL-2003): ``I-X`` starts an entity unless the previous tag has type X; ``B-X``
    only separates two adjacent entities of the same type. IOB2 input goes through the same rule
    (a stray ``I-X`` after ``O`` becomes ``B-X``). IOBES/BILOU: ``S-``/``U-`` -> ``B-``,
    ``E-``/``L-`` -> ``I-``.
    """
    for tag in tags:
        check_tag(tag, scheme)
    if scheme in ("iobes", "bilou"):
        table = {"S": "B", "U": "B", "E": "I", "L": "I", "B": "B", "I": "I"}
        return [t if t == "O" else f"{table[t[0]]}{t[1:]}" for t in tags]
    out = []
    previous_type = None
    for tag in tags:
        if tag == "O":
            out.append(tag)
            previous_type = None
            continue
        prefix, kind = tag.split("-", 1)
        out.append(f"B-{kind}" if prefix == "B" or previous_type != kind else tag)
        previous_type = kind
    return out


# --------------------------------------------------------------------------------------------
# Readers
# --------------------------------------------------------------------------------------------


def read_conll(path: str | Path, tag_scheme: str = "iob1", tag_column: int = -1) -> list[Sentence]:
    """Read a CoNLL file: one ``token ... tag`` line per word, blank lines end sentences,
    ``-DOCSTART-`` lines separate documents. Tags are converted to IOB2.

    A malformed line raises ``UsageError`` naming the file and line number.
    """
    path = Path(path)
    sentences: list[Sentence] = []
    document, words, tags, columns = 0, [], [], None
    doc_has_sentences = False

    def flush():
        nonlocal words, tags, doc_has_sentences
        if words:
            sentences.append(Sentence(words, to_iob2(tags, tag_scheme), document))
            doc_has_sentences = True
        words, tags = [], []

    for lineno, line in enumerate(read_text_lines(path), 1):
        parts = line.split()
        if not parts:
            flush()
            continue
        if parts[0] == "-DOCSTART-":
            flush()
            if doc_has_sentences:
                document += 1
                doc_has_sentences = False
            continue
        if len(parts) < 2:
            raise UsageError(
                f"{path}:{lineno}: expected 'token ... tag' columns, got {line.rstrip()!r}"
            )
        if columns is None:
            columns = len(parts)
        elif len(parts) != columns:
            raise UsageError(
                f"{path}:{lineno}: {len(parts)} columns, but earlier lines have {columns}"
            )
        try:
            check_tag(parts[tag_column], tag_scheme)
        except (ValueError, IndexError) as err:
            raise UsageError(f"{path}:{lineno}: {err}") from None
        words.append(parts[0])
        tags.append(parts[tag_column])
    flush()
    if not sentences:
        raise UsageError(f"{path}: no sentences found")
    return sentences


def read_json_records(path: str | Path) -> list[dict]:
    """Read JSON records: JSON lines, a JSON list, or concatenated pretty-printed objects (the
    ``datasets`` fixtures). Raises ``UsageError`` naming the file and the line of a bad record."""
    records = []
    for value, _ in iter_json_values(path):
        records.extend(value if isinstance(value, list) else [value])
    for number, record in enumerate(records):
        if not isinstance(record, dict):
            raise UsageError(f"{path}: record {number} is not a JSON object")
    return records


def read_json_ner(
    path: str | Path, tag_scheme: str = "iob1", words_key: str = "words", tags_key: str = "ner"
) -> list[Sentence]:
    """JSON records with a word list and a tag list (tags as strings); one document each."""
    sentences = []
    for number, record in enumerate(read_json_records(path)):
        words = record.get(words_key, record.get("tokens"))
        tags = record.get(tags_key, record.get("ner_tags"))
        if not isinstance(words, list) or not isinstance(tags, list) or len(words) != len(tags):
            raise UsageError(
                f"{path}: record {number}: needs '{words_key}' and '{tags_key}' lists of equal "
                "length"
            )
        try:
            sentences.append(Sentence(list(words), to_iob2(tags, tag_scheme), number))
        except ValueError as err:
            raise UsageError(f"{path}: record {number}: {err}") from None
    return sentences


def is_json_file(path: str | Path) -> bool:
    """Whether the file holds JSON records (its first non-blank character is ``{`` or ``[``);
    ``FileNotFoundError`` when it does not exist."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found")
    with open(path, "rb") as handle:
        return (
            handle.read(4096).lstrip().startswith((b"{", b"[", b"\xef\xbb\xbf{", b"\xef\xbb\xbf["))
        )


def read_ner_file(path: str | Path, tag_scheme: str = "iob1", tag_column: int = -1):
    """CoNLL text or JSON records, chosen by the file's first non-blank character."""
    if is_json_file(path):
        return read_json_ner(path, tag_scheme)
    return read_conll(path, tag_scheme, tag_column)


def load_hub_ner(name: str, split: str) -> list[Sentence]:
    """A Hub dataset with ``tokens`` and ``ner_tags`` (class ids, IOB2), e.g. ``conll2003``."""
    import datasets

    data = datasets.load_dataset(name, split=split)
    names = data.features["ner_tags"].feature.names
    return [
        Sentence(list(r["tokens"]), to_iob2([names[t] for t in r["ner_tags"]], "iob2"), i)
        for i, r in enumerate(data)
    ]


def label_list(sentences: Iterable[Sentence]) -> list[str]:
    """``O`` first, then the other tags sorted by type and B before I."""
    tags = {t for s in sentences for t in s.tags} - {"O"}
    for tag in list(tags):  # both B- and I- of every type, so label_all_pieces always has I-X
        kind = tag.split("-", 1)[1]
        tags |= {f"B-{kind}", f"I-{kind}"}
    return ["O", *sorted(tags, key=lambda t: (t.split("-", 1)[1], t))]


def read_text_lines(path: str | Path) -> list[str]:
    """The lines of a UTF-8 text file; binary content or bytes that are not UTF-8 are a
    ``UsageError`` naming the file and the line (:func:`recipes.data_files.read_text`)."""
    return read_text(path).split("\n")


def documents(sentences: Sequence[Sentence]) -> Iterable[dict]:
    """Sentences -> one row per document (consecutive sentences with the same ``document``)."""
    row = None
    for index, s in enumerate(sentences):
        if row is None or row["document"] != s.document:
            if row is not None:
                yield row
            row = {"document": s.document, "first_sentence": index, "words": [], "tags": []}
        row["words"].append(list(s.words))
        row["tags"].append(list(s.tags))
    if row is not None:
        yield row


def sentences_of(dataset) -> list[Sentence]:
    """The sentences of a documents ``Dataset``, in order."""
    out = []
    for row in dataset:
        for words, tags in zip(row["words"], row["tags"]):
            out.append(Sentence(words, tags, row["document"]))
    return out


def _rows(path: str, tag_scheme: str, tag_column: int, stamp):
    del stamp  # part of the cache key only
    yield from documents(read_ner_file(path, tag_scheme, tag_column))


def load_split(
    data_args: NerDataArguments, which: str, limit: int | None = None, cache_dir: str | None = None
):
    """``{which}_file`` (or ``--dataset_name``) -> a documents ``Dataset`` (``None`` if not
    given); ``limit`` keeps the first sentences. The file is read and checked first (a bad file
    fails here, in one line)."""
    import datasets

    path = getattr(data_args, f"{which}_file")
    if path:
        read_ner_file(path, data_args.tag_scheme, data_args.tag_column)  # errors now, one line
        stat = Path(path).stat()
        stamp = (str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns)
        dataset = datasets.Dataset.from_generator(
            _rows,
            gen_kwargs={
                "path": str(path),
                "tag_scheme": data_args.tag_scheme,
                "tag_column": data_args.tag_column,
                "stamp": stamp,
            },
            features=document_features(),
            cache_dir=cache_dir,
        )
    elif data_args.dataset_name:
        sentences = load_hub_ner(data_args.dataset_name, which)
        dataset = datasets.Dataset.from_list(list(documents(sentences)), document_features())
    else:
        return None
    if limit is not None:
        dataset = _first_sentences(dataset, limit)
    return dataset


def _first_sentences(dataset, limit: int):
    """The first ``limit`` sentences (a document cut at the limit keeps its head)."""
    keep, rows = 0, []
    for i, row in enumerate(dataset):
        if row["first_sentence"] >= limit:
            break
        keep = i + 1
    dataset = dataset.select(range(keep))
    if keep and dataset[keep - 1]["first_sentence"] + len(dataset[keep - 1]["words"]) > limit:
        last = dataset[keep - 1]
        n = limit - last["first_sentence"]
        rows = [{**last, "words": last["words"][:n], "tags": last["tags"][:n]}]
        import datasets

        dataset = datasets.concatenate_datasets(
            [dataset.select(range(keep - 1)), datasets.Dataset.from_list(rows, dataset.features)]
        )
    return dataset


def document_features():
    import datasets

    words = datasets.Sequence(datasets.Sequence(datasets.Value("string")))
    return datasets.Features(
        {
            "document": datasets.Value("int32"),
            "first_sentence": datasets.Value("int32"),
            "words": words,
            "tags": words,
        }
    )
