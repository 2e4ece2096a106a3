"""Feature-based use of BERT (paper section 5.3, Table 7).

* :func:`extract_features`: chosen layers' activations per token for given texts, as Google's
  ``extract_features.py`` (``text`` or ``text_a ||| text_b`` per line; layer -1 is the last).
  Written as JSON lines in Google's layout (:func:`write_jsonl`) or as ``.npz`` (:func:`write_npz`).
* :class:`FeatureBasedTagger`: the paper's feature-based NER: the pretrained encoder frozen,
  the concatenation of its last four layers fed to a randomly initialised two-layer
  768-dimensional BiLSTM and a linear classifier. Its ``forward`` takes the usual inputs and
  ``labels`` and returns ``.loss``/``.logits``, so the shared loop
  (:func:`recipes.finetune.train`) trains it unchanged (only the BiLSTM and classifier have
  ``requires_grad``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

from modeling.constants import IGNORE_INDEX

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

    from .finetune import pad_collate

    model.eval()
    num_layers = model.config.num_hidden_layers
    indices = [_layer_index(layer, num_layers) for layer in layers]
    features = encode_texts(tokenizer, texts, max_seq_length)
    device = next(model.parameters()).device
    for start in tqdm(range(0, len(features), batch_size), desc="extract", disable=disable_tqdm):
        chunk = features[start : start + batch_size]
        batch = {k: v.to(device) for k, v in pad_collate(chunk, tokenizer.pad_token_id).items()}
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


# --------------------------------------------------------------------------------------------
# Feature-based NER
# --------------------------------------------------------------------------------------------


class FeatureBasedTagger(nn.Module):
    """Frozen BERT -> concat of the last ``layers`` hidden states -> 2-layer BiLSTM -> linear.

    The encoder stays in eval mode (no dropout) and runs without gradients; the BiLSTM and the
    classifier are randomly initialised and trained. Loss: cross-entropy over labels != -100.
    """

    def __init__(
        self,
        encoder,
        num_labels: int,
        layers: int = 4,
        lstm_hidden_size: int = 768,
        lstm_layers: int = 2,
        dropout: float = 0.1,
        id2label: dict | None = None,
    ):
        super().__init__()
        if not 1 <= layers <= encoder.config.num_hidden_layers:
            raise ValueError(f"layers must be in [1, {encoder.config.num_hidden_layers}]")
        self.encoder = encoder
        self.encoder.requires_grad_(False)
        self.config = encoder.config  # pad_token_id etc. for the shared loop
        self.num_labels, self.layers = num_labels, layers
        self.id2label = dict(id2label or {})
        self.lstm = nn.LSTM(
            layers * encoder.config.hidden_size,
            lstm_hidden_size,
            num_layers=lstm_layers,
            bidirectional=True,
            batch_first=True,
            dropout=dropout if lstm_layers > 1 else 0.0,
        )
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(2 * lstm_hidden_size, num_labels)

    @classmethod
    def from_encoder(cls, model_args, num_labels: int, **kwargs) -> FeatureBasedTagger:
        from modeling import BertModel

        from .finetune import load_model

        encoder = load_model(BertModel, model_args)
        encoder.pooler = None  # unused: token features only
        return cls(encoder, num_labels, **kwargs)

    def train(self, mode: bool = True):
        super().train(mode)
        self.encoder.eval()  # frozen features: never dropout in the encoder
        return self

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None, **unused):
        from transformers.modeling_outputs import TokenClassifierOutput

        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        with torch.no_grad():
            hidden = self.encoder(
                input_ids, attention_mask, token_type_ids, output_hidden_states=True
            ).hidden_states
            features = torch.cat(hidden[-self.layers :], dim=-1)
        lengths = attention_mask.sum(-1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(
            features, lengths, batch_first=True, enforce_sorted=False
        )
        output, _ = self.lstm(packed)
        output, _ = nn.utils.rnn.pad_packed_sequence(
            output, batch_first=True, total_length=input_ids.shape[1]
        )
        logits = self.classifier(self.dropout(output))
        loss = None
        if labels is not None:
            loss = nn.functional.cross_entropy(
                logits.float().view(-1, self.num_labels), labels.view(-1), ignore_index=IGNORE_INDEX
            )
        return TokenClassifierOutput(loss=loss, logits=logits)

    def save_pretrained(self, directory: str | Path) -> None:
        """The trained head (BiLSTM + classifier) and its settings; the encoder is the
        unchanged pretrained checkpoint and is not copied."""
        from safetensors.torch import save_file

        directory = Path(directory)
        head = {
            k: v.contiguous() for k, v in self.state_dict().items() if not k.startswith("encoder.")
        }
        save_file(head, str(directory / "tagger_head.safetensors"))
        settings = {
            "encoder": getattr(self.config, "_name_or_path", None),
            "num_labels": self.num_labels,
            "layers": self.layers,
            "lstm_hidden_size": self.lstm.hidden_size,
            "lstm_layers": self.lstm.num_layers,
            "id2label": {str(k): v for k, v in self.id2label.items()},
        }
        (directory / "tagger_config.json").write_text(json.dumps(settings, indent=2) + "\n")
