"""CoNLL-2003 named-entity recognition with ``BertForTokenClassification`` (paper section 5.3).

Data: the original CoNLL files (``token POS chunk NER`` per line, blank lines between sentences,
``-DOCSTART-`` lines between documents, IOB1 tags), the ``datasets`` JSON fixture format
(``{"words": [...], "ner": [...]}`` records), or a Hub dataset. Tags of any scheme (IOB1, IOB2,
IOBES, BILOU) are converted to IOB2.

Features: the first WordPiece of each word carries its label, the other pieces -100 (the
paper's setup; ``label_all_pieces`` labels them too, ``B-X`` becoming ``I-X``). With
``document_context`` each sentence is encoded inside the surrounding text of its document up to
``max_seq_length``, and only its own words are scored. A sentence longer than the window is cut
into several windows (each word is scored in exactly one, with the rest of the text around it as
context), so every word gets a prediction whatever the limit. Predictions map back to words and
are scored with :mod:`recipes.ner_metrics` (conlleval).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from modeling.cli import UsageError
from modeling.constants import IGNORE_INDEX

from .data_files import iter_json_values

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

    with open(path, encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, 1):
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
    with open(path, encoding="utf-8") as handle:
        return handle.read(4096).lstrip().startswith(("{", "["))


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


# --------------------------------------------------------------------------------------------
# Features
# --------------------------------------------------------------------------------------------


def word_pieces(tokenizer, sentences: Sequence[Sentence], max_pieces: int) -> list[list[list[int]]]:
    """WordPiece ids of every word, tokenised alone (as BERT's basic tokenizer splits on spaces
    anyway). A word with no pieces (e.g. a lone control character) becomes [UNK], so every word
    can be labelled; a word is cut to ``max_pieces`` pieces."""
    vocabulary = sorted({w for s in sentences for w in s.words})
    encoded = tokenizer(vocabulary, add_special_tokens=False)["input_ids"]
    pieces = {
        w: (ids[:max_pieces] or [tokenizer.unk_token_id]) for w, ids in zip(vocabulary, encoded)
    }
    return [[pieces[w] for w in s.words] for s in sentences]


def _groups(sentences: Sequence[Sentence], document_context: bool) -> list[list[int]]:
    """Indices of sentences encoded together: runs of one document, or each sentence alone."""
    if not document_context:
        return [[i] for i in range(len(sentences))]
    groups: list[list[int]] = []
    for i, sentence in enumerate(sentences):
        if groups and sentences[groups[-1][-1]].document == sentence.document:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def _spans(lengths: Sequence[int], limit: int) -> list[tuple[int, int]]:
    """Cut words (with these piece counts) into consecutive spans of at most ``limit`` pieces
    (a single longer word makes a span of its own)."""
    spans, start, total = [], 0, 0
    for i, n in enumerate(lengths):
        if i > start and total + n > limit:
            spans.append((start, i))
            start, total = i, 0
        total += n
    spans.append((start, len(lengths)))
    return spans


def build_features(
    sentences: Sequence[Sentence],
    tokenizer,
    label2id: dict[str, int] | None,
    max_seq_length: int = 128,
    document_context: bool = False,
    label_all_pieces: bool = False,
    long_sentence_stride: int = 0,
) -> list[dict]:
    """Turn sentences into model windows.

    Each feature is ``[CLS] left-context scored-words right-context [SEP]``, at most
    ``max_seq_length`` pieces; ``labels`` are -100 except at the scored words' first pieces (all
    their pieces with ``label_all_pieces``). Context is the rest of the sentence and, with
    ``document_context``, the neighbouring sentences of the same document, shared evenly left
    and right. Bookkeeping fields: ``sentence_index``, ``word_ids`` (scored words) and
    ``positions`` (their first piece in the window). Every word of every sentence is scored in
    exactly one feature.
    """
    room = max_seq_length - 2
    stride = long_sentence_stride or max(1, room // 2)
    pieces = word_pieces(tokenizer, sentences, room)
    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    features = []
    for group in _groups(sentences, document_context):
        flat: list[int] = []
        starts: dict[int, list[int]] = {}
        for s in group:
            starts[s] = []
            for word in pieces[s]:
                starts[s].append(len(flat))
                flat.extend(word)
        for s in group:
            lengths = [len(w) for w in pieces[s]]
            limit = room if sum(lengths) <= room else min(stride, room)
            for a, b in _spans(lengths, limit):
                begin, end = starts[s][a], starts[s][b - 1] + lengths[b - 1]
                budget = room - (end - begin)
                left = min(begin, budget // 2)
                right = min(len(flat) - end, budget - left)
                left = min(begin, budget - right)
                offset = begin - left
                window = flat[offset : end + right]
                input_ids = [cls_id, *window, sep_id]
                labels = [IGNORE_INDEX] * len(input_ids)
                positions = [1 + starts[s][w] - offset for w in range(a, b)]
                if label2id is not None:
                    for w, pos in zip(range(a, b), positions):
                        tag = sentences[s].tags[w]
                        labels[pos] = label2id[tag]
                        if label_all_pieces and lengths[w] > 1:
                            inner = label2id.get("I" + tag[1:], label2id[tag]) if tag != "O" else 0
                            labels[pos + 1 : pos + lengths[w]] = [inner] * (lengths[w] - 1)
                features.append(
                    {
                        "input_ids": input_ids,
                        "token_type_ids": [0] * len(input_ids),
                        "attention_mask": [1] * len(input_ids),
                        "labels": labels,
                        "sentence_index": s,
                        "word_ids": list(range(a, b)),
                        "positions": positions,
                    }
                )
    return features


def decode_predictions(
    features: Sequence[dict],
    logits: Sequence[np.ndarray],
    sentences: Sequence[Sentence],
    id2label: dict[int, str],
) -> list[list[str]]:
    """Argmax at each scored word's first piece -> one IOB2 tag per word of every sentence.

    Raises ``ValueError`` if a word got no prediction or two (a feature-building bug)."""
    predicted: list[list[str | None]] = [[None] * len(s.words) for s in sentences]
    for feature, values in zip(features, logits):
        row = predicted[feature["sentence_index"]]
        best = values[feature["positions"]].argmax(-1)
        for w, label in zip(feature["word_ids"], best):
            if row[w] is not None:
                raise ValueError(f"sentence {feature['sentence_index']} word {w} predicted twice")
            row[w] = id2label[int(label)]
    for i, row in enumerate(predicted):
        missing = [w for w, tag in enumerate(row) if tag is None]
        if missing:
            raise ValueError(f"sentence {i}: words {missing} got no prediction")
    return predicted  # type: ignore[return-value]


def write_conll_predictions(
    path: str | Path, sentences: Sequence[Sentence], predicted: Sequence[Sequence[str]]
) -> None:
    """``token gold predicted`` per line, a blank line after each sentence (conlleval input)."""
    from modeling import atomic

    with atomic.atomic_open(path, "w", encoding="utf-8") as handle:
        for sentence, tags in zip(sentences, predicted):
            for word, gold, guess in zip(sentence.words, sentence.tags, tags):
                handle.write(f"{word} {gold} {guess}\n")
            handle.write("\n")


# --------------------------------------------------------------------------------------------
# The recipe
# --------------------------------------------------------------------------------------------


def _load_split(data_args: NerDataArguments, which: str) -> list[Sentence] | None:
    path = getattr(data_args, f"{which}_file")
    if path:
        return read_ner_file(path, data_args.tag_scheme, data_args.tag_column)
    if data_args.dataset_name:
        return load_hub_ner(data_args.dataset_name, which)
    return None


def _truncate(sentences, limit):
    return sentences if limit is None or sentences is None else sentences[:limit]


def build_model(model_args, data_args: NerDataArguments, labels: Sequence[str]):
    """Fine-tuned ``BertForTokenClassification``, or the feature-based BiLSTM tagger."""
    id2label = dict(enumerate(labels))
    label2id = {t: i for i, t in id2label.items()}
    if data_args.feature_based:
        from .features import FeatureBasedTagger

        return FeatureBasedTagger.from_encoder(
            model_args,
            num_labels=len(labels),
            layers=data_args.feature_layers,
            lstm_hidden_size=data_args.lstm_hidden_size,
            id2label=id2label,
        )
    from modeling import BertForTokenClassification

    from .finetune import load_model

    return load_model(
        BertForTokenClassification,
        model_args,
        num_labels=len(labels),
        id2label=id2label,
        label2id=label2id,
    )


def evaluate(
    model,
    sentences: Sequence[Sentence],
    tokenizer,
    labels: Sequence[str],
    data_args: NerDataArguments,
    batch_size: int,
    document_context: bool,
    disable_tqdm: bool = False,
) -> tuple[dict, list[list[str]]]:
    """Predict every word of ``sentences``; conlleval metrics and the predicted tags."""
    from .finetune import predict
    from .ner_metrics import conlleval

    label2id = {t: i for i, t in enumerate(labels)}
    features = build_features(
        sentences,
        tokenizer,
        label2id,
        data_args.max_seq_length,
        document_context,
        data_args.label_all_pieces,
        data_args.long_sentence_stride,
    )
    start = time.perf_counter()
    logits = predict(model, features, batch_size, disable_tqdm=disable_tqdm)["logits"]
    runtime = time.perf_counter() - start
    predicted = decode_predictions(features, logits, sentences, dict(enumerate(labels)))
    metrics = conlleval([s.tags for s in sentences], predicted)
    metrics.update(
        runtime=runtime,
        windows=len(features),
        sentences=len(sentences),
        document_context=document_context,
    )
    return metrics, predicted


def run(model_args, data_args: NerDataArguments, train_args) -> dict:
    """Train (over the learning-rate/batch/epoch grid if given) and evaluate; write
    ``eval_results.json`` and ``{dev,test}_predictions.txt`` in each run's output folder.
    Returns the grid summary (or the single run's results)."""
    import dataclasses

    # data first: a bad file fails at once, before torch and transformers load
    train_sents = _truncate(_load_split(data_args, "train"), train_args.max_train_samples)
    dev_sents = _truncate(_load_split(data_args, "validation"), train_args.max_eval_samples)
    test_sents = _truncate(_load_split(data_args, "test"), train_args.max_predict_samples)
    if train_args.do_train and not train_sents:
        raise UsageError("--do_train needs --train_file or --dataset_name")

    from .finetune import (
        grid_search,
        load_tokenizer,
        save_model,
        set_seed,
        train,
        write_results,
    )
    from .ner_metrics import format_report

    tokenizer = load_tokenizer(model_args)
    if train_sents:
        labels = label_list(train_sents)
    else:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(model_args.model_name_or_path)
        labels = [config.id2label[i] for i in range(len(config.id2label))]
    label2id = {t: i for i, t in enumerate(labels)}
    for name, split in (("validation", dev_sents), ("test", test_sents)):
        unknown = {t for s in split or [] for t in s.tags} - set(labels)
        if unknown:
            raise UsageError(f"{name} data has tags not seen in training: {sorted(unknown)}")
    eval_context = (
        data_args.document_context
        if data_args.eval_document_context is None
        else data_args.eval_document_context
    )
    train_features = None
    if train_args.do_train:
        train_features = build_features(
            train_sents,
            tokenizer,
            label2id,
            data_args.max_seq_length,
            data_args.document_context,
            data_args.label_all_pieces,
            data_args.long_sentence_stride,
        )
        logger.info(
            "%d training sentences -> %d windows, %d pieces",
            len(train_sents),
            len(train_features),
            sum(len(f["input_ids"]) for f in train_features),
        )

    def run_one(args) -> dict:
        set_seed(args.seed)  # the new head's initialisation too
        model = build_model(model_args, data_args, labels)
        results: dict = {"labels": labels, "settings": dataclasses.asdict(data_args)}
        if args.do_train:
            trained = train(model, train_features, args)
            results["train"] = {
                **trained.summary(),
                "steps": trained.steps,
                "train_windows": len(train_features),
                "train_sentences": len(train_sents),
            }
            if args.save_model:
                save_model(model, tokenizer, Path(args.output_dir) / "model")
        splits = [("dev", dev_sents, args.do_eval), ("test", test_sents, args.do_predict)]
        for name, sentences, wanted in splits:
            if not wanted or not sentences:
                continue
            metrics, predicted = evaluate(
                model,
                sentences,
                tokenizer,
                labels,
                data_args,
                args.per_device_eval_batch_size,
                eval_context,
                args.disable_tqdm,
            )
            results[name] = metrics
            write_conll_predictions(
                Path(args.output_dir) / f"{name}_predictions.txt", sentences, predicted
            )
            logger.info("%s:\n%s", name, format_report(metrics))
        write_results(args.output_dir, "eval_results.json", results)
        return {"f1": results.get("dev", {}).get("f1", float("nan")), **_flat(results)}

    return grid_search(train_args, run_one, metric="f1")


def _flat(results: dict) -> dict:
    """Headline numbers of one run for the grid summary."""
    out = {}
    for split in ("dev", "test"):
        if split in results:
            out[f"{split}_f1"] = results[split]["f1"]
    if "train" in results:
        out["train_runtime"] = results["train"]["train_runtime"]
    return out
