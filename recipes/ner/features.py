"""CoNLL NER windows, as a ``datasets.map(batched=True)`` function over documents.

The first WordPiece of each word carries its label, the other pieces -100 (the paper's setup;
``label_all_pieces`` labels them too, ``B-X`` becoming ``I-X``). With ``document_context`` each
sentence is encoded inside the surrounding text of its document up to ``max_seq_length``, and
only its own words are scored. A sentence longer than the window is cut into several windows
(each word is scored in exactly one, with the rest of the text around it as context), so every
word gets a prediction whatever the limit. :func:`decode_predictions` maps window logits back to
one tag per word.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from modeling.constants import IGNORE_INDEX

from .data import Sentence

# bump when the features change meaning: part of the datasets cache key
FEATURES_VERSION = 1
MODEL_COLUMNS = ("input_ids", "token_type_ids", "attention_mask", "labels")


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

    ``features``: rows with ``sentence_index``, ``word_ids`` and ``positions`` (a ``Dataset`` or
    a list of dicts); ``logits``: one array per feature, possibly padded past its length.
    Raises ``ValueError`` if a word got no prediction or two (a feature-building bug)."""
    if hasattr(features, "column_names"):
        features = features.select_columns(["sentence_index", "word_ids", "positions"])
    predicted: list[list[str | None]] = [[None] * len(s.words) for s in sentences]
    for feature, values in zip(features, logits):
        row = predicted[feature["sentence_index"]]
        best = np.asarray(values)[feature["positions"]].argmax(-1)
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


def prepare_features(
    batch: dict[str, list],
    tokenizer,
    label2id: dict[str, int],
    max_seq_length: int = 128,
    document_context: bool = False,
    label_all_pieces: bool = False,
    long_sentence_stride: int = 0,
) -> dict[str, list]:
    """A batch of document rows (:func:`recipes.ner.data.load_split`) -> windows
    (:func:`build_features`), ``sentence_index`` counted over the whole split."""
    sentences, global_index = [], []
    for doc, first, words, tags in zip(
        batch["document"], batch["first_sentence"], batch["words"], batch["tags"]
    ):
        for j, (w, t) in enumerate(zip(words, tags)):
            sentences.append(Sentence(w, t, doc))
            global_index.append(first + j)
    features = build_features(
        sentences,
        tokenizer,
        label2id,
        max_seq_length,
        document_context,
        label_all_pieces,
        long_sentence_stride,
    )
    for f in features:
        f["sentence_index"] = global_index[f["sentence_index"]]
    columns = (*MODEL_COLUMNS, "sentence_index", "word_ids", "positions")
    return {key: [f[key] for f in features] for key in columns}


def feature_types():
    import datasets

    ints = datasets.Sequence(datasets.Value("int32"))
    small = datasets.Sequence(datasets.Value("int8"))
    return datasets.Features(
        {
            "input_ids": ints,
            "token_type_ids": small,
            "attention_mask": small,
            "labels": datasets.Sequence(datasets.Value("int64")),
            "sentence_index": datasets.Value("int32"),
            "word_ids": ints,
            "positions": ints,
        }
    )


def featurize(
    dataset,
    tokenizer,
    labels: Sequence[str],
    max_seq_length: int,
    document_context: bool,
    label_all_pieces: bool,
    long_sentence_stride: int,
    num_proc: int | None = None,
):
    """``dataset.map(prepare_features, batched=True)`` over documents, cached on disk by
    ``datasets`` (a second launch with the same data, tokenizer and settings reads the cache)."""
    from datasets.fingerprint import Hasher

    settings = {
        "label2id": {t: i for i, t in enumerate(labels)},
        "max_seq_length": max_seq_length,
        "document_context": document_context,
        "label_all_pieces": label_all_pieces,
        "long_sentence_stride": long_sentence_stride,
    }
    fingerprint = Hasher.hash(
        (
            dataset._fingerprint,
            FEATURES_VERSION,
            settings,
            tokenizer.__class__.__name__,
            sorted(tokenizer.get_vocab().items()),
            tokenizer.init_kwargs.get("do_lower_case"),
        )
    )
    return dataset.map(
        prepare_features,
        batched=True,
        batch_size=100,  # documents
        num_proc=num_proc,
        remove_columns=dataset.column_names,
        fn_kwargs={"tokenizer": tokenizer, **settings},
        features=feature_types(),
        new_fingerprint=fingerprint,
        desc="NER windows",
    )
