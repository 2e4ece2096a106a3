"""BERT (Devlin et al., 2018), compatible with Hugging Face `transformers`.

``import modeling`` is cheap (command-line tools parse their flags before torch and
transformers load). The model classes load on first use, e.g. ``from modeling import
BertForPreTraining``, and that first use also registers the config and the models with the
`transformers` Auto classes under the model type ``bert_toolkit``. Call
:func:`register_auto_classes` to register without touching a class.
"""

from __future__ import annotations

import importlib

_MODEL_EXPORTS = {
    "BertConfig": "configuration",
    "BertModel": "modeling",
    "BertForPreTraining": "modeling",
    "BertForPreTrainingOutput": "modeling",
    "BertForMaskedLM": "modeling",
    "BertForSequenceClassification": "modeling",
    "BertForQuestionAnswering": "modeling",
    "BertForMultipleChoice": "modeling",
    "BertForTokenClassification": "modeling",
    "BertPreTrainedModel": "modeling",
    "forward_flops_per_token": "modeling",
}

__all__ = [*_MODEL_EXPORTS, "register_auto_classes"]

_registered = False


def register_auto_classes() -> None:
    """Register ``bert_toolkit`` with AutoConfig and the models with the AutoModel* classes."""
    global _registered
    if _registered:
        return
    import transformers

    from .configuration import BertConfig
    from .modeling import (
        BertForMaskedLM,
        BertForMultipleChoice,
        BertForPreTraining,
        BertForQuestionAnswering,
        BertForSequenceClassification,
        BertForTokenClassification,
        BertModel,
    )

    transformers.AutoConfig.register(BertConfig.model_type, BertConfig, exist_ok=True)
    for auto, model in (
        (transformers.AutoModel, BertModel),
        (transformers.AutoModelForPreTraining, BertForPreTraining),
        (transformers.AutoModelForMaskedLM, BertForMaskedLM),
        (transformers.AutoModelForSequenceClassification, BertForSequenceClassification),
        (transformers.AutoModelForQuestionAnswering, BertForQuestionAnswering),
        (transformers.AutoModelForMultipleChoice, BertForMultipleChoice),
        (transformers.AutoModelForTokenClassification, BertForTokenClassification),
    ):
        auto.register(BertConfig, model, exist_ok=True)
    _registered = True


def __getattr__(name: str):
    if name in _MODEL_EXPORTS:
        module = importlib.import_module(f".{_MODEL_EXPORTS[name]}", __name__)
        register_auto_classes()
        value = getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_MODEL_EXPORTS])
