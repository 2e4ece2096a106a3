"""BERT (Devlin et al., 2018) as a `transformers` `PreTrainedModel`.

Module and parameter names are those of `transformers`' `modeling_bert.py`
(`bert.embeddings.word_embeddings`, `bert.encoder.layer.N.attention.self.query`,
`cls.predictions.transform.dense`, ...), so state dicts move both ways between this package and
stock `transformers`.

What is different is speed, never the math:

* attention goes through `torch.nn.functional.scaled_dot_product_attention` unless the config
  asks for ``_attn_implementation="eager"`` (kept for parity checks and attention weights);
* with ``config.sparse_prediction_head`` (default) and MLM labels, the MLM head (a hidden x hidden
  transform and a hidden x vocab decoder) runs only at the labelled positions, about 15% of
  them; the loss is the same number, and ``prediction_logits`` then holds one row per labelled
  position, in the order of ``labels[labels != -100]``;
* with ``config.unpad_inputs`` the encoder drops padding tokens before the embeddings and runs
  every linear layer and LayerNorm on real tokens only; only the attention product itself is
  done on the padded layout. Outputs at padding positions are then zero instead of the
  meaningless values a padded computation leaves there.

This file is copied into checkpoints saved with ``save_pretrained(..., remote_code=True)``, so
it imports only torch, transformers and its siblings ``configuration.py`` and ``constants.py``.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel
from transformers.activations import ACT2FN
from transformers.modeling_outputs import (
    BaseModelOutputWithPooling,
    MaskedLMOutput,
    MultipleChoiceModelOutput,
    QuestionAnsweringModelOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from transformers.utils import ModelOutput

from .configuration import BertConfig

try:  # transformers >= 5: initialisers that leave loaded weights untouched
    from transformers import initialization as init
except ImportError:  # pragma: no cover - older transformers
    init = nn.init

from .constants import AUTO_MAP, IGNORE_INDEX, REMOTE_CODE_FILES

# --------------------------------------------------------------------------------------------
# Input checks and padding bookkeeping
# --------------------------------------------------------------------------------------------


def _check_inputs(config, input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds):
    """Raise a ValueError naming the offending input before it turns into an index error."""
    if (input_ids is None) == (inputs_embeds is None):
        raise ValueError("pass exactly one of input_ids or inputs_embeds")
    shape = tuple(input_ids.shape) if input_ids is not None else tuple(inputs_embeds.shape[:-1])
    if len(shape) != 2:
        raise ValueError(f"input_ids must have shape (batch, sequence), got {shape}")
    if shape[1] > config.max_position_embeddings:
        raise ValueError(
            f"sequence length {shape[1]} exceeds max_position_embeddings="
            f"{config.max_position_embeddings}; truncate the inputs"
        )
    for name, tensor in (("attention_mask", attention_mask), ("token_type_ids", token_type_ids)):
        if tensor is not None and tuple(tensor.shape) != shape:
            raise ValueError(f"{name} has shape {tuple(tensor.shape)} but input_ids has {shape}")
    if position_ids is not None and position_ids.shape[-1] != shape[1]:
        raise ValueError(f"position_ids has shape {tuple(position_ids.shape)}, expected {shape}")
    if not config.check_inputs:
        return
    for name, tensor, limit, field in (
        ("input_ids", input_ids, config.vocab_size, "vocab_size"),
        ("token_type_ids", token_type_ids, config.type_vocab_size, "type_vocab_size"),
        ("position_ids", position_ids, config.max_position_embeddings, "max_position_embeddings"),
    ):
        if tensor is None or tensor.numel() == 0:
            continue
        low, high = (int(v) for v in torch.aminmax(tensor))
        if low < 0 or high >= limit:
            bad = low if low < 0 else high
            raise ValueError(f"{name} contains {bad}, outside [0, {limit}) ({field}={limit})")


@dataclass
class Padding:
    """Where the real tokens of a padded (batch, seq) layout are, for the unpadded encoder."""

    indices: torch.Tensor  # flat positions of real tokens in batch * seq
    batch_size: int
    seq_len: int

    @classmethod
    def from_mask(cls, attention_mask: torch.Tensor) -> Padding:
        indices = torch.nonzero(attention_mask.reshape(-1), as_tuple=False).flatten()
        return cls(indices, attention_mask.shape[0], attention_mask.shape[1])

    def unpad(self, tensor: torch.Tensor) -> torch.Tensor:
        """(batch, seq, ...) -> (tokens, ...)"""
        return tensor.reshape(self.batch_size * self.seq_len, *tensor.shape[2:])[self.indices]

    def pad(self, tensor: torch.Tensor) -> torch.Tensor:
        """(tokens, ...) -> (batch, seq, ...), zeros at padding."""
        out = tensor.new_zeros(self.batch_size * self.seq_len, *tensor.shape[1:])
        out[self.indices] = tensor
        return out.view(self.batch_size, self.seq_len, *tensor.shape[1:])


def _upcast(logits: torch.Tensor) -> torch.Tensor:
    """Losses in at least fp32 (bf16/fp16 logits lose too much in log-softmax)."""
    return logits.float() if logits.element_size() < 4 else logits


def _additive_mask(attention_mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """(batch, seq) 1/0 mask -> (batch, 1, 1, seq) additive mask, or None when nothing is masked."""
    if attention_mask is None or bool(attention_mask.all()):
        return None
    mask = attention_mask[:, None, None, :].to(dtype)
    return (1.0 - mask) * torch.finfo(dtype).min


# --------------------------------------------------------------------------------------------
# Encoder
# --------------------------------------------------------------------------------------------


class BertEmbeddings(nn.Module):
    """Word + position + token-type embeddings, then LayerNorm and dropout."""

    def __init__(self, config):
        super().__init__()
        self.word_embeddings = nn.Embedding(
            config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id
        )
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        # Not saved; registered under the name stock checkpoints use, so that a checkpoint that
        # does carry it loads without an "unexpected key".
        self.register_buffer(
            "position_ids",
            torch.arange(config.max_position_embeddings).expand((1, -1)),
            persistent=False,
        )

    def forward(self, input_ids, token_type_ids, position_ids, inputs_embeds=None):
        if inputs_embeds is None:
            inputs_embeds = self.word_embeddings(input_ids)
        embeddings = (
            inputs_embeds
            + self.token_type_embeddings(token_type_ids)
            + self.position_embeddings(position_ids)
        )
        return self.dropout(self.LayerNorm(embeddings))


class BertSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.num_heads = config.num_attention_heads
        self.head_size = config.hidden_size // config.num_attention_heads
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)

    def forward(
        self, hidden_states, mask, padding: Padding | None, output_attentions=False, query_rows=None
    ):
        """Self-attention over (batch, seq, hidden), or (tokens, hidden) when ``padding`` is given.

        With ``query_rows`` (row indices into the flattened hidden states, one per sequence),
        only those rows attend (to every key) and the output is (batch, 1, hidden).
        """
        hidden = self.query.in_features
        if query_rows is None:
            # One GEMM for the three projections (the parameters stay three modules, as in
            # transformers, so that state dicts match).
            weight = torch.cat([self.query.weight, self.key.weight, self.value.weight])
            bias = torch.cat([self.query.bias, self.key.bias, self.value.bias])
            qkv = F.linear(hidden_states, weight, bias)
            if padding is not None:
                qkv = padding.pad(qkv)
            q, k, v = qkv.chunk(3, dim=-1)
        else:
            q = self.query(hidden_states.reshape(-1, hidden)[query_rows])[:, None]
            weight = torch.cat([self.key.weight, self.value.weight])
            kv = F.linear(hidden_states, weight, torch.cat([self.key.bias, self.value.bias]))
            if padding is not None:
                kv = padding.pad(kv)
            k, v = kv.chunk(2, dim=-1)
        batch = k.shape[0]
        q, k, v = (
            t.reshape(batch, -1, self.num_heads, self.head_size).transpose(1, 2) for t in (q, k, v)
        )
        dropout = self.dropout.p if self.training else 0.0
        probs = None
        if output_attentions or self.config._attn_implementation == "eager":
            scores = torch.matmul(q, k.transpose(-1, -2)) * (self.head_size**-0.5)
            if mask is not None:
                scores = scores + mask
            probs = torch.softmax(scores, dim=-1)
            context = torch.matmul(self.dropout(probs), v)
        else:
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)
        context = context.transpose(1, 2).reshape(batch, q.shape[2], hidden)
        if padding is not None and query_rows is None:
            context = padding.unpad(context)
        return context, (probs if output_attentions else None)


class BertSelfOutput(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class BertAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertSelfOutput(config)

    def forward(self, hidden_states, mask, padding, output_attentions=False, query_rows=None):
        context, probs = self.self(hidden_states, mask, padding, output_attentions, query_rows)
        if query_rows is not None:
            hidden_states = hidden_states.reshape(-1, hidden_states.shape[-1])[query_rows][:, None]
        return self.output(context, hidden_states), probs


class BertIntermediate(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.intermediate_act_fn = ACT2FN[config.hidden_act]

    def forward(self, hidden_states):
        return self.intermediate_act_fn(self.dense(hidden_states))


class BertOutput(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class BertLayer(nn.Module):
    """One post-LayerNorm transformer block: self-attention, then the feed-forward network."""

    def __init__(self, config):
        super().__init__()
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    def forward(self, hidden_states, mask, padding=None, output_attentions=False, query_rows=None):
        attention_output, probs = self.attention(
            hidden_states, mask, padding, output_attentions, query_rows
        )
        layer_output = self.output(self.intermediate(attention_output), attention_output)
        return layer_output, probs


class BertEncoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(config) for _ in range(config.num_hidden_layers)])
        self.gradient_checkpointing = False

    def forward(
        self,
        hidden_states,
        mask,
        padding=None,
        output_hidden_states=False,
        output_attentions=False,
        last_layer_rows=None,
    ):
        """Run the layers; with ``last_layer_rows`` the last layer computes only those rows (one
        per sequence, e.g. [CLS]) and returns (batch, 1, hidden)."""
        all_hidden = [hidden_states] if output_hidden_states else None
        all_attentions = [] if output_attentions else None
        last = len(self.layer) - 1
        for i, layer in enumerate(self.layer):
            rows = last_layer_rows if i == last else None
            if self.gradient_checkpointing and self.training:
                hidden_states, probs = self._gradient_checkpointing_func(
                    layer.__call__, hidden_states, mask, padding, output_attentions, rows
                )
            else:
                hidden_states, probs = layer(hidden_states, mask, padding, output_attentions, rows)
            if output_hidden_states:
                all_hidden.append(hidden_states)
            if output_attentions:
                all_attentions.append(probs)
        return hidden_states, all_hidden, all_attentions


class BertPooler(nn.Module):
    """tanh(dense(hidden state of [CLS]))."""

    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.Tanh()

    def forward(self, hidden_states):
        return self.activation(self.dense(hidden_states[:, 0]))


# --------------------------------------------------------------------------------------------
# Heads
# --------------------------------------------------------------------------------------------


class BertPredictionHeadTransform(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.transform_act_fn = ACT2FN[config.hidden_act]
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, hidden_states):
        return self.LayerNorm(self.transform_act_fn(self.dense(hidden_states)))


class BertLMPredictionHead(nn.Module):
    """Transform, then a decoder tied to the word embeddings with an output-only bias."""

    def __init__(self, config):
        super().__init__()
        self.transform = BertPredictionHeadTransform(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size, bias=True)
        self.bias = nn.Parameter(
            torch.zeros(config.vocab_size)
        )  # tied to decoder.bias by post_init

    def forward(self, hidden_states):
        return self.decoder(self.transform(hidden_states))


class BertOnlyMLMHead(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.predictions = BertLMPredictionHead(config)

    def forward(self, sequence_output):
        return self.predictions(sequence_output)


class BertPreTrainingHeads(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.predictions = BertLMPredictionHead(config)
        self.seq_relationship = nn.Linear(config.hidden_size, 2)

    def forward(self, sequence_output, pooled_output):
        return self.predictions(sequence_output), self.seq_relationship(pooled_output)


# --------------------------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------------------------


class BertPreTrainedModel(PreTrainedModel):
    """Weight initialisation (truncation-free normal, std=initializer_range) and loading glue."""

    config_class = BertConfig
    base_model_prefix = "bert"
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    _no_split_modules = ["BertEmbeddings", "BertLayer"]

    def _init_weights(self, module):
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            init.normal_(module.weight, mean=0.0, std=std)
            if module.padding_idx is not None and not getattr(
                module.weight, "_is_hf_initialized", False
            ):
                init.zeros_(module.weight[module.padding_idx])
        elif isinstance(module, nn.LayerNorm):
            init.ones_(module.weight)
            init.zeros_(module.bias)
        elif isinstance(module, BertLMPredictionHead):
            init.zeros_(module.bias)
        elif isinstance(module, BertEmbeddings):
            init.copy_(
                module.position_ids, torch.arange(module.position_ids.shape[-1]).expand((1, -1))
            )

    def save_pretrained(self, save_directory, *args, remote_code: bool = False, **kwargs):
        """`PreTrainedModel.save_pretrained`; with ``remote_code=True`` the folder also holds this
        package's modeling source and an ``auto_map``, so that
        ``AutoModel.from_pretrained(folder, trust_remote_code=True)`` picks these classes where
        this package is not installed. ``model_type`` stays ``bert`` either way: without
        ``trust_remote_code`` the folder loads as stock BERT.

        Without ``remote_code`` an ``auto_map`` the config carries from a remote-code folder is
        left out (the source files it names would be missing)."""
        had_map = "auto_map" in self.config.__dict__
        saved_map = self.config.__dict__.get("auto_map")
        if remote_code:
            self.config.auto_map = dict(AUTO_MAP)
        elif saved_map == AUTO_MAP:
            del self.config.auto_map
        try:
            super().save_pretrained(save_directory, *args, **kwargs)
        finally:
            if had_map:
                self.config.auto_map = saved_map
            elif "auto_map" in self.config.__dict__:
                del self.config.auto_map
        if remote_code:
            here = Path(__file__).resolve().parent
            for name in REMOTE_CODE_FILES:
                shutil.copyfile(here / name, Path(save_directory) / name)


class BertModel(BertPreTrainedModel):
    """The bare encoder: embeddings, transformer layers and (optionally) the [CLS] pooler."""

    def __init__(self, config, add_pooling_layer: bool = True):
        super().__init__(config)
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config) if add_pooling_layer else None
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value):
        self.embeddings.word_embeddings = value

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        output_hidden_states=None,
        output_attentions=None,
        return_dict=None,
        cls_only=False,
    ):
        """With ``cls_only`` (used by the pooled-output heads) the last layer is computed at the
        [CLS] position only: ``pooler_output`` is unchanged, ``last_hidden_state`` is then
        (batch, 1, hidden). Ignored when hidden states or attentions are requested."""
        _check_inputs(
            self.config, input_ids, attention_mask, token_type_ids, position_ids, inputs_embeds
        )
        ref = input_ids if input_ids is not None else inputs_embeds[..., 0]
        batch, seq = ref.shape
        device = ref.device
        if token_type_ids is None:
            token_type_ids = torch.zeros(batch, seq, dtype=torch.long, device=device)
        if position_ids is None:
            position_ids = self.embeddings.position_ids[:, :seq]
        position_ids = position_ids.expand(batch, seq)

        padding = None
        if (
            self.config.unpad_inputs
            and attention_mask is not None
            and not bool(attention_mask.all())
        ):
            padding = Padding.from_mask(attention_mask)
            input_ids = padding.unpad(input_ids) if input_ids is not None else None
            inputs_embeds = padding.unpad(inputs_embeds) if inputs_embeds is not None else None
            token_type_ids, position_ids = (
                padding.unpad(token_type_ids),
                padding.unpad(position_ids),
            )

        hidden = self.embeddings(input_ids, token_type_ids, position_ids, inputs_embeds)
        mask = _additive_mask(attention_mask, hidden.dtype)
        cls_rows = None
        if cls_only and not output_hidden_states and not output_attentions:
            if padding is None:
                cls_rows = torch.arange(batch, device=device) * seq
            elif bool(attention_mask[:, 0].all()):  # [CLS] is real: right padding
                cls_rows = torch.searchsorted(
                    padding.indices, torch.arange(batch, device=device) * seq
                )
        sequence_output, all_hidden, all_attentions = self.encoder(
            hidden, mask, padding, bool(output_hidden_states), bool(output_attentions), cls_rows
        )
        if padding is not None and cls_rows is None:
            sequence_output = padding.pad(sequence_output)
            if all_hidden is not None:
                all_hidden = [padding.pad(h) for h in all_hidden]
        pooled_output = self.pooler(sequence_output) if self.pooler is not None else None
        out = BaseModelOutputWithPooling(
            last_hidden_state=sequence_output,
            pooler_output=pooled_output,
            hidden_states=tuple(all_hidden) if all_hidden is not None else None,
            attentions=tuple(all_attentions) if all_attentions is not None else None,
        )
        return out if return_dict is not False else out.to_tuple()


def _mlm_forward(predictions, sequence_output, labels, sparse):
    """MLM logits and loss; with ``sparse``, the head runs only where labels != -100."""
    if labels is None:
        return predictions(sequence_output), None
    if sparse:
        selected = labels != IGNORE_INDEX
        logits = predictions(sequence_output[selected])
        return logits, F.cross_entropy(_upcast(logits), labels[selected])
    logits = predictions(sequence_output)
    loss = F.cross_entropy(
        _upcast(logits).view(-1, logits.shape[-1]), labels.view(-1), ignore_index=IGNORE_INDEX
    )
    return logits, loss


@dataclass
class BertForPreTrainingOutput(ModelOutput):
    """Output of `BertForPreTraining`: ``loss = mlm_loss + nsp_loss`` (NSP only when labelled).

    With MLM labels and ``config.sparse_prediction_head``, ``prediction_logits`` has shape
    (number of labelled positions, vocab) in the order of ``labels[labels != -100]``; otherwise
    (batch, seq, vocab).
    """

    loss: torch.Tensor | None = None
    prediction_logits: torch.Tensor | None = None
    seq_relationship_logits: torch.Tensor | None = None
    hidden_states: tuple[torch.Tensor, ...] | None = None
    attentions: tuple[torch.Tensor, ...] | None = None
    mlm_loss: torch.Tensor | None = None
    nsp_loss: torch.Tensor | None = None


_TIED_DECODER = {
    "cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight",
    "cls.predictions.decoder.bias": "cls.predictions.bias",
}


class BertForPreTraining(BertPreTrainedModel):
    """BERT with the pretraining heads: masked LM (decoder tied to the word embeddings) and NSP."""

    _tied_weights_keys = dict(_TIED_DECODER)

    def __init__(self, config):
        super().__init__(config)
        self.bert = BertModel(config)
        self.cls = BertPreTrainingHeads(config)
        self.post_init()

    def get_output_embeddings(self):
        return self.cls.predictions.decoder

    def set_output_embeddings(self, new_embeddings):
        self.cls.predictions.decoder = new_embeddings
        self.cls.predictions.bias = new_embeddings.bias

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        next_sentence_label=None,
        output_hidden_states=None,
        output_attentions=None,
        return_dict=None,
    ):
        outputs = self.bert(
            input_ids,
            attention_mask,
            token_type_ids,
            position_ids,
            inputs_embeds,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
        )
        sequence_output, pooled_output = outputs.last_hidden_state, outputs.pooler_output
        prediction_logits, mlm_loss = _mlm_forward(
            self.cls.predictions, sequence_output, labels, self.config.sparse_prediction_head
        )
        seq_relationship_logits = self.cls.seq_relationship(pooled_output)
        nsp_loss = None
        if next_sentence_label is not None:
            nsp_loss = F.cross_entropy(
                _upcast(seq_relationship_logits), next_sentence_label.view(-1)
            )
        losses = [x for x in (mlm_loss, nsp_loss) if x is not None]
        out = BertForPreTrainingOutput(
            loss=sum(losses) if losses else None,
            prediction_logits=prediction_logits,
            seq_relationship_logits=seq_relationship_logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
            mlm_loss=mlm_loss,
            nsp_loss=nsp_loss,
        )
        return out if return_dict is not False else out.to_tuple()


class BertForMaskedLM(BertPreTrainedModel):
    """BERT with the masked-LM head only (no pooler), decoder tied to the word embeddings."""

    _tied_weights_keys = dict(_TIED_DECODER)

    def __init__(self, config):
        super().__init__(config)
        self.bert = BertModel(config, add_pooling_layer=False)
        self.cls = BertOnlyMLMHead(config)
        self.post_init()

    def get_output_embeddings(self):
        return self.cls.predictions.decoder

    def set_output_embeddings(self, new_embeddings):
        self.cls.predictions.decoder = new_embeddings
        self.cls.predictions.bias = new_embeddings.bias

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        output_hidden_states=None,
        output_attentions=None,
        return_dict=None,
    ):
        outputs = self.bert(
            input_ids,
            attention_mask,
            token_type_ids,
            position_ids,
            inputs_embeds,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
        )
        logits, loss = _mlm_forward(
            self.cls.predictions,
            outputs.last_hidden_state,
            labels,
            self.config.sparse_prediction_head,
        )
        out = MaskedLMOutput(
            loss=loss,
            logits=logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )
        return out if return_dict is not False else out.to_tuple()


def _classifier_dropout(config):
    p = config.classifier_dropout
    return nn.Dropout(config.hidden_dropout_prob if p is None else p)


class BertForSequenceClassification(BertPreTrainedModel):
    """[CLS] pooled output -> dropout -> linear. Regression (MSE) when ``num_labels == 1``."""

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.bert = BertModel(config)
        self.dropout = _classifier_dropout(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        output_hidden_states=None,
        output_attentions=None,
        return_dict=None,
    ):
        outputs = self.bert(
            input_ids,
            attention_mask,
            token_type_ids,
            position_ids,
            inputs_embeds,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
            cls_only=True,
        )
        logits = self.classifier(self.dropout(outputs.pooler_output))
        loss = None
        if labels is not None:
            problem = self.config.problem_type
            if problem is None:
                if self.num_labels == 1:
                    problem = "regression"
                elif labels.dtype in (torch.long, torch.int):
                    problem = "single_label_classification"
                else:
                    problem = "multi_label_classification"
            if problem == "regression":
                scores = _upcast(logits.squeeze(-1))
                loss = F.mse_loss(scores, labels.to(scores.dtype).view(-1))
            elif problem == "single_label_classification":
                loss = F.cross_entropy(_upcast(logits), labels.view(-1))
            else:
                scores = _upcast(logits)
                loss = F.binary_cross_entropy_with_logits(scores, labels.to(scores.dtype))
        out = SequenceClassifierOutput(
            loss=loss,
            logits=logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )
        return out if return_dict is not False else out.to_tuple()


class BertForMultipleChoice(BertPreTrainedModel):
    """Each (context, choice) pair is one sequence; pooled [CLS] x one vector = its score."""

    def __init__(self, config):
        super().__init__(config)
        self.bert = BertModel(config)
        self.dropout = _classifier_dropout(config)
        self.classifier = nn.Linear(config.hidden_size, 1)
        self.post_init()

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        output_hidden_states=None,
        output_attentions=None,
        return_dict=None,
    ):
        ref = input_ids if input_ids is not None else inputs_embeds[..., 0]
        if ref.dim() != 3:
            raise ValueError(
                f"expected inputs of shape (batch, num_choices, seq), got {tuple(ref.shape)}"
            )
        num_choices = ref.shape[1]

        def flat(t):
            return None if t is None else t.reshape(-1, *t.shape[2:])

        outputs = self.bert(
            flat(input_ids),
            flat(attention_mask),
            flat(token_type_ids),
            flat(position_ids),
            flat(inputs_embeds),
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
            cls_only=True,
        )
        logits = self.classifier(self.dropout(outputs.pooler_output)).view(-1, num_choices)
        loss = F.cross_entropy(_upcast(logits), labels.view(-1)) if labels is not None else None
        out = MultipleChoiceModelOutput(
            loss=loss,
            logits=logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )
        return out if return_dict is not False else out.to_tuple()


class BertForTokenClassification(BertPreTrainedModel):
    """Per-token dropout -> linear, cross-entropy over positions whose label is not -100."""

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.bert = BertModel(config, add_pooling_layer=False)
        self.dropout = _classifier_dropout(config)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        labels=None,
        output_hidden_states=None,
        output_attentions=None,
        return_dict=None,
    ):
        outputs = self.bert(
            input_ids,
            attention_mask,
            token_type_ids,
            position_ids,
            inputs_embeds,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
        )
        logits = self.classifier(self.dropout(outputs.last_hidden_state))
        loss = None
        if labels is not None:
            loss = F.cross_entropy(
                _upcast(logits).view(-1, self.num_labels),
                labels.view(-1),
                ignore_index=IGNORE_INDEX,
            )
        out = TokenClassifierOutput(
            loss=loss,
            logits=logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )
        return out if return_dict is not False else out.to_tuple()


class BertForQuestionAnswering(BertPreTrainedModel):
    """Span extraction: a start and an end logit per token (SQuAD)."""

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.bert = BertModel(config, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        position_ids=None,
        inputs_embeds=None,
        start_positions=None,
        end_positions=None,
        output_hidden_states=None,
        output_attentions=None,
        return_dict=None,
    ):
        outputs = self.bert(
            input_ids,
            attention_mask,
            token_type_ids,
            position_ids,
            inputs_embeds,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
        )
        logits = self.qa_outputs(outputs.last_hidden_state)
        start_logits, end_logits = (t.squeeze(-1).contiguous() for t in logits.split(1, dim=-1))
        loss = None
        if start_positions is not None and end_positions is not None:
            # Positions outside the sequence are ignored, as in transformers.
            ignored = start_logits.shape[1]
            start = start_positions.view(-1).clamp(0, ignored)
            end = end_positions.view(-1).clamp(0, ignored)
            loss = (
                F.cross_entropy(_upcast(start_logits), start, ignore_index=ignored)
                + F.cross_entropy(_upcast(end_logits), end, ignore_index=ignored)
            ) / 2
        out = QuestionAnsweringModelOutput(
            loss=loss,
            start_logits=start_logits,
            end_logits=end_logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )
        return out if return_dict is not False else out.to_tuple()


def forward_flops_per_token(config, seq_len: int, mlm_positions: float = 1.0) -> float:
    """Forward FLOPs per token of `BertForPreTraining` (2 per multiply-add), for MFU estimates.

    ``mlm_positions`` is the share of positions the MLM head runs on (1.0 dense, ~0.15 sparse).
    """
    h, i, n = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    per_layer = 2 * (4 * h * h + 2 * h * i) + 2 * 2 * seq_len * h  # projections, FFN, attention
    head = 2 * (h * h + h * config.vocab_size) * mlm_positions
    return n * per_layer + head
