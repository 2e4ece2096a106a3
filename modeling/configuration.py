"""BERT configuration with the field names and defaults of `transformers.BertConfig`.

The model type is ``bert``, that of stock BERT, and the architecture names in ``config.json``
are stock names (``BertForPreTraining``, ...): a folder we save is a stock BERT checkpoint, so
``transformers``' Auto classes, pipelines and every tool built on them load it without this
package and without a model-type warning, and our classes load any ``bert`` checkpoint.
Checkpoints saved before this change carry ``model_type: "bert_toolkit"``; they are read as
``bert`` (see :meth:`BertConfig.get_config_dict` and ``modeling.register_auto_classes``).

Why not a model type of our own: the weights are plain BERT (identical state-dict names and
math), so a distinct type would only make stock tools refuse checkpoints they can run. Our
faster classes stay one flag away through ``auto_map`` (``save_pretrained(..., remote_code=True)``
and ``trust_remote_code=True``).

Three fields are ours and only change speed, never math; stock ``transformers`` keeps them as
extra attributes and ignores them:

* `unpad_inputs`: run the encoder on the non-padding tokens only (see `modeling.BertEncoder`).
* `sparse_prediction_head`: when MLM labels are given, compute the MLM head only at the
  labelled positions.
* `check_inputs`: validate token ids, shapes and lengths with a clear error before the forward
  pass (costs one small reduction per call; turn off for the last microsecond).

This file is copied next to `modeling.py` into checkpoints saved with remote code, so it must
not import anything from this package.
"""

from __future__ import annotations

from transformers import PretrainedConfig

# The model type this package wrote before it wrote ``bert`` (still read).
LEGACY_MODEL_TYPE = "bert_toolkit"


class BertConfig(PretrainedConfig):
    """Configuration of the BERT models in this package.

    Field names and defaults are those of `transformers.BertConfig` (BERT-base, uncased vocab),
    plus ``unpad_inputs``, ``sparse_prediction_head`` and ``check_inputs`` (see the module
    docstring).
    """

    model_type = "bert"

    def __init__(
        self,
        vocab_size: int = 30522,
        hidden_size: int = 768,
        num_hidden_layers: int = 12,
        num_attention_heads: int = 12,
        intermediate_size: int = 3072,
        hidden_act: str = "gelu",
        hidden_dropout_prob: float = 0.1,
        attention_probs_dropout_prob: float = 0.1,
        max_position_embeddings: int = 512,
        type_vocab_size: int = 2,
        initializer_range: float = 0.02,
        layer_norm_eps: float = 1e-12,
        pad_token_id: int = 0,
        position_embedding_type: str = "absolute",
        use_cache: bool = True,
        classifier_dropout: float | None = None,
        unpad_inputs: bool = False,
        sparse_prediction_head: bool = True,
        check_inputs: bool = True,
        **kwargs,
    ):
        kwargs.pop("model_type", None)  # a class attribute; "bert_toolkit" in legacy dicts
        kwargs.setdefault("tie_word_embeddings", True)
        super().__init__(pad_token_id=pad_token_id, **kwargs)
        if hidden_size % num_attention_heads != 0:
            raise ValueError(
                f"hidden_size ({hidden_size}) is not a multiple of num_attention_heads "
                f"({num_attention_heads})"
            )
        if position_embedding_type != "absolute":
            raise ValueError(
                f"position_embedding_type={position_embedding_type!r} is not supported; "
                "BERT uses 'absolute' learned position embeddings"
            )
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.position_embedding_type = position_embedding_type
        self.use_cache = use_cache
        self.classifier_dropout = classifier_dropout
        self.unpad_inputs = unpad_inputs
        self.sparse_prediction_head = sparse_prediction_head
        self.check_inputs = check_inputs

    @classmethod
    def get_config_dict(cls, pretrained_model_name_or_path, **kwargs):
        """Checkpoints saved with the former model type ``bert_toolkit`` are read as ``bert``
        (same fields, same weights), without a model-type warning."""
        config_dict, kwargs = super().get_config_dict(pretrained_model_name_or_path, **kwargs)
        if config_dict.get("model_type") == LEGACY_MODEL_TYPE:
            config_dict = {**config_dict, "model_type": cls.model_type}
        return config_dict, kwargs
