"""The paper's feature-based NER (section 5.3, Table 7), trained with ``transformers.Trainer``.

The pretrained encoder frozen, the concatenation of its last four layers fed to a randomly
initialised two-layer 768-dimensional BiLSTM and a linear classifier. ``forward`` takes the usual
inputs and ``labels`` and returns ``.loss``/``.logits``, so Trainer trains it unchanged (only the
BiLSTM and the classifier have ``requires_grad``; Trainer's checkpoints hold the whole state, so
``--resume_from_checkpoint`` works). :meth:`FeatureBasedTagger.save_pretrained` writes the head
and its settings (``tagger_head.safetensors``, ``tagger_config.json``).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from modeling.constants import IGNORE_INDEX


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
        self.config = encoder.config  # pad_token_id etc. for Trainer
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

        encoder = BertModel.from_pretrained(
            model_args.model_name_or_path,
            unpad_inputs=model_args.unpad_inputs,
            attn_implementation=model_args.attn_implementation,
            cache_dir=model_args.cache_dir,
        )
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

    @classmethod
    def from_pretrained(
        cls, directory: str | Path, encoder: str | None = None
    ) -> FeatureBasedTagger:
        """A tagger saved by :meth:`save_pretrained`: the encoder from ``encoder`` (default: the
        path it was trained from), the head from ``tagger_head.safetensors``."""
        from safetensors.torch import load_file

        from modeling import BertModel

        directory = Path(directory)
        settings = json.loads((directory / "tagger_config.json").read_text())
        bert = BertModel.from_pretrained(encoder or settings["encoder"], add_pooling_layer=False)
        tagger = cls(
            bert,
            settings["num_labels"],
            layers=settings["layers"],
            lstm_hidden_size=settings["lstm_hidden_size"],
            lstm_layers=settings["lstm_layers"],
            id2label={int(k): v for k, v in settings["id2label"].items()},
        )
        missing, unexpected = tagger.load_state_dict(
            load_file(str(directory / "tagger_head.safetensors")), strict=False
        )
        if unexpected or any(not k.startswith("encoder.") for k in missing):
            raise ValueError(f"{directory}: head weights do not match ({missing}, {unexpected})")
        return tagger
