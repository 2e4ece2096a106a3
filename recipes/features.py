"""Feature-based use of BERT (paper section 5.3, Table 7).

* :func:`extract_features`: chosen layers' activations per token for given texts, as Google's
  ``extract_features.py`` (``text`` or ``text_a ||| text_b`` per line; layer -1 is the last).
  Written as JSON lines in Google's layout (:func:`write_jsonl`) or as ``.npz`` (:func:`write_npz`).
* the feature-based NER tagger (frozen encoder, last four layers -> BiLSTM) is
  :class:`recipes.ner.tagger.FeatureBasedTagger`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch

# --------------------------------------------------------------------------------------------
# Activation extraction
# --------------------------------------------------------------------------------------------


def encode_texts(tokenizer, texts: Sequence[str], max_seq_length: int) -> list[dict]:
    """``text`` or ``text_a ||| text_b`` -> [CLS] A [SEP] (B [SEP]) features, truncated."""
    features = []
    for text in texts:
        a, sep, b = text.partition(" ||| ")
        enc = tokenizer(
            a,
            b if sep else None,
            truncation=True,
            max_length=max_seq_length,
            return_token_type_ids=True,
        )
        features.append(
            {
                "input_ids": enc["input_ids"],
                "token_type_ids": enc["token_type_ids"],
                "attention_mask": enc["attention_mask"],
            }
        )
    return features


def _layer_index(layer: int, num_layers: int) -> int:
    """Google's layer numbering: -1 is the last encoder layer; 0..L-1 count from the first.
    Returns the index into ``hidden_states`` (whose entry 0 is the embedding output)."""
    if not -num_layers <= layer < num_layers:
        raise ValueError(f"layer {layer} out of range for {num_layers} layers")
    return layer % num_layers + 1


@torch.no_grad()
def extract_features(
    model,
    tokenizer,
    texts: Sequence[str],
    layers: Sequence[int] = (-1, -2, -3, -4),
    max_seq_length: int = 128,
    batch_size: int = 32,
    disable_tqdm: bool = False,
) -> Iterator[tuple[list[str], np.ndarray]]:
    """Yield, per text in order, its tokens and an array ``(len(layers), tokens, hidden)``."""
    from tqdm.auto import tqdm

    model.eval()
    num_layers = model.config.num_hidden_layers
    indices = [_layer_index(layer, num_layers) for layer in layers]
    features = encode_texts(tokenizer, texts, max_seq_length)
    device = next(model.parameters()).device
    for start in tqdm(range(0, len(features), batch_size), desc="extract", disable=disable_tqdm):
        chunk = features[start : start + batch_size]
        batch = tokenizer.pad(chunk, return_tensors="pt").to(device)
        hidden = model(**batch, output_hidden_states=True).hidden_states
        stacked = torch.stack([hidden[i] for i in indices], 1).float().cpu().numpy()
        for row, feature in enumerate(chunk):
            n = len(feature["input_ids"])
            yield tokenizer.convert_ids_to_tokens(feature["input_ids"]), stacked[row, :, :n]


def write_jsonl(path: str | Path, items, layers: Sequence[int]) -> int:
    """Google's JSON lines: ``{"linex_index", "features": [{"token", "layers": [{"index",
    "values"}]}]}``, values rounded to 6 decimals. Returns the number of lines."""
    from modeling import atomic

    count = 0
    with atomic.atomic_open(path, "w", encoding="utf-8") as handle:
        for index, (tokens, values) in enumerate(items):
            record = {
                "linex_index": index,
                "features": [
                    {
                        "token": token,
                        "layers": [
                            {"index": layer, "values": [round(float(x), 6) for x in values[j, t]]}
                            for j, layer in enumerate(layers)
                        ],
                    }
                    for t, token in enumerate(tokens)
                ],
            }
            handle.write(json.dumps(record) + "\n")
            count += 1
    return count


def write_npz(path: str | Path, items, layers: Sequence[int]) -> int:
    """One ``.npz``: ``features_<i>`` (layers, tokens, hidden) float32 and ``tokens_<i>`` per
    text, plus ``layers``. Returns the number of texts."""
    from modeling import atomic

    arrays: dict[str, np.ndarray] = {"layers": np.asarray(layers)}
    for index, (tokens, values) in enumerate(items):
        arrays[f"features_{index}"] = values.astype(np.float32)
        arrays[f"tokens_{index}"] = np.asarray(tokens)
    with atomic.atomic_open(path, "wb") as handle:
        np.savez(handle, **arrays)
    return len(arrays) // 2
