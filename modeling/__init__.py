"""BERT (Devlin et al., 2018), compatible with Hugging Face `transformers`.

``import modeling`` is cheap (command-line tools parse their flags before torch and
transformers load). The model classes load on first use, e.g. ``from modeling import
BertForPreTraining``, and that first use also calls :func:`register_auto_classes`.

Our checkpoints are saved with ``model_type: "bert"`` and stock architecture names, so stock
``transformers`` loads them as its own BERT (see ``modeling.configuration``). The registration
below is deliberately narrow, so that a process that imported this package still gets stock
behaviour from stock names:

* our ``BertConfig`` *class* maps to our model classes in the ``AutoModel*`` tables (an entry
  keyed by the class object): ``AutoModel.from_config(modeling.BertConfig(...))`` builds ours,
  while a config read by ``AutoConfig`` (``transformers.BertConfig``) still builds stock
  models. Nothing is registered under the model type ``bert`` with ``AutoConfig``: that would
  replace stock BERT for every caller in the process.
* the former model type ``bert_toolkit`` (checkpoints written by earlier versions) maps to our
  ``BertConfig``, so ``AutoConfig``/``AutoTokenizer``/``AutoModel*`` keep reading them.
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
    """Map our config class to our models in the AutoModel* tables, and the legacy model type
    ``bert_toolkit`` to our config (idempotent; stock ``bert`` entries are left untouched)."""
    global _registered
    if _registered:
        return
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    from .configuration import LEGACY_MODEL_TYPE, BertConfig
    from .modeling import (
        BertForMaskedLM,
        BertForMultipleChoice,
        BertForPreTraining,
        BertForQuestionAnswering,
        BertForSequenceClassification,
        BertForTokenClassification,
        BertModel,
    )

    # An alias, not AutoConfig.register (which requires the class's own model_type): configs
    # saved as "bert_toolkit" are read into our BertConfig, whose model_type is "bert".
    CONFIG_MAPPING.register(LEGACY_MODEL_TYPE, BertConfig, exist_ok=True)
    for auto, model in (
        (transformers.AutoModel, BertModel),
        (transformers.AutoModelForPreTraining, BertForPreTraining),
        (transformers.AutoModelForMaskedLM, BertForMaskedLM),
        (transformers.AutoModelForSequenceClassification, BertForSequenceClassification),
        (transformers.AutoModelForQuestionAnswering, BertForQuestionAnswering),
        (transformers.AutoModelForMultipleChoice, BertForMultipleChoice),
        (transformers.AutoModelForTokenClassification, BertForTokenClassification),
    ):
        # exist_ok: the class is named BertConfig like stock's; the entry is keyed by our class
        # object, so stock configs keep resolving to stock models.
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
