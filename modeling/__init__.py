"""BERT (Devlin et al., 2018), compatible with Hugging Face `transformers`.

Importing this package registers the config and models with the `transformers` Auto classes
under the model type ``bert_toolkit``.
"""

from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForMaskedLM,
    AutoModelForMultipleChoice,
    AutoModelForPreTraining,
    AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
)

from .configuration import BertConfig
from .modeling import (
    BertForMaskedLM,
    BertForMultipleChoice,
    BertForPreTraining,
    BertForPreTrainingOutput,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
    BertPreTrainedModel,
    forward_flops_per_token,
)

__all__ = [
    "BertConfig",
    "BertForMaskedLM",
    "BertForMultipleChoice",
    "BertForPreTraining",
    "BertForPreTrainingOutput",
    "BertForQuestionAnswering",
    "BertForSequenceClassification",
    "BertForTokenClassification",
    "BertModel",
    "BertPreTrainedModel",
    "forward_flops_per_token",
]

AutoConfig.register(BertConfig.model_type, BertConfig, exist_ok=True)
for _auto, _model in (
    (AutoModel, BertModel),
    (AutoModelForPreTraining, BertForPreTraining),
    (AutoModelForMaskedLM, BertForMaskedLM),
    (AutoModelForSequenceClassification, BertForSequenceClassification),
    (AutoModelForQuestionAnswering, BertForQuestionAnswering),
    (AutoModelForMultipleChoice, BertForMultipleChoice),
    (AutoModelForTokenClassification, BertForTokenClassification),
):
    _auto.register(BertConfig, _model, exist_ok=True)
