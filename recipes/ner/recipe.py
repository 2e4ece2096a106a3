"""CoNLL NER on the shared Trainer runner (:mod:`recipes.runner`), as transformers' ``run_ner.py``.

Fine-tuned ``BertForTokenClassification``, or with ``--feature_based`` the paper's frozen-encoder
BiLSTM tagger (:mod:`recipes.ner.tagger`). Writes into ``output_dir``, beside the runner's files
(model, tokenizer, ``train_results.json``, ``eval_results.json``, ``predict_results.json``,
``all_results.json``, ``trainer_state.json``, ``README.md``): ``dev_predictions.txt`` and
``test_predictions.txt`` (``token gold predicted``, conlleval's input); the tagger also
``tagger_config.json`` and ``tagger_head.safetensors``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from modeling.cli import UsageError

from ..runner import Arguments, Task
from . import data as ner_data
from .data import NerDataArguments, label_list, sentences_of
from .features import FEATURES_VERSION, feature_types, prepare_features

logger = logging.getLogger(__name__)

_FILES = {"train": "train", "eval": "validation", "predict": "test"}


class NerRecipe(Task):
    name = "ner"
    description = "Fine-tune BERT for CoNLL-2003 NER with transformers.Trainer (conlleval)."
    data_args_class = NerDataArguments
    model_class = "BertForTokenClassification"
    metric_for_grid = "eval_f1"
    output_files = ("dev_predictions.txt", "test_predictions.txt", "tagger_*")

    def __init__(self):
        self.labels: list[str] | None = None
        self.sentences: dict[str, list] = {}

    @property
    def feature_version(self) -> str:
        # label ids are part of the features: another label set is another cache entry
        labels = hashlib.sha256(json.dumps(self.labels).encode()).hexdigest()[:8]
        return f"{FEATURES_VERSION}-{labels}"

    def check(self, args: Arguments) -> None:
        d, t = args.data, args.training
        for split, on in (("train", t.do_train), ("eval", t.do_eval), ("predict", t.do_predict)):
            if on and not (getattr(d, f"{_FILES[split]}_file") or d.dataset_name):
                raise UsageError(f"--do_{split} needs --{_FILES[split]}_file or --dataset_name")

    # ---------------------------------------------------------------------------- data

    def load_raw(self, data_args: NerDataArguments, split: str, args: Arguments) -> dict:
        limit = getattr(args.run, f"max_{split}_samples")
        with args.training.main_process_first(desc=f"CoNLL {split} documents"):
            docs = ner_data.load_split(data_args, _FILES[split], limit, args.model.cache_dir)
        sentences = sentences_of(docs)
        self.sentences[split] = sentences
        if split == "train":
            self.labels = label_list(sentences)
        elif self.labels is None:  # evaluation only: the fine-tuned model's labels
            self.labels = _config_labels(args)
        unknown = {t for s in sentences for t in s.tags} - set(self.labels)
        if unknown:
            raise UsageError(
                f"{_FILES[split]} data has tags not seen in training: {sorted(unknown)}"
            )
        return {"conll": docs}

    def featurise(self, batch, tokenizer, data_args: NerDataArguments, split: str) -> dict:
        context = data_args.document_context
        if split != "train" and data_args.eval_document_context is not None:
            context = data_args.eval_document_context
        return prepare_features(
            batch,
            tokenizer,
            {t: i for i, t in enumerate(self.labels)},
            data_args.max_seq_length,
            context,
            data_args.label_all_pieces,
            data_args.long_sentence_stride,
        )

    def features(self, data_args, split: str):
        return feature_types()

    # ---------------------------------------------------------------------------- model

    def model_kwargs(self, data_args) -> dict[str, Any]:
        id2label = dict(enumerate(self.labels))
        return {
            "num_labels": len(self.labels),
            "id2label": id2label,
            "label2id": {t: i for i, t in id2label.items()},
        }

    def load_model(self, args: Arguments):
        if not args.data.feature_based:
            return super().load_model(args)
        from .tagger import FeatureBasedTagger

        return FeatureBasedTagger.from_encoder(
            args.model,
            num_labels=len(self.labels),
            layers=args.data.feature_layers,
            lstm_hidden_size=args.data.lstm_hidden_size,
            id2label=dict(enumerate(self.labels)),
        )

    def data_collator(self, tokenizer, args: Arguments):
        from transformers import DataCollatorForTokenClassification

        return DataCollatorForTokenClassification(tokenizer)

    def trainer_class(self):
        from .trainer import NerTrainer

        return NerTrainer

    def trainer_kwargs(self, args: Arguments) -> dict[str, Any]:
        return {"labels": self.labels, "eval_sentences": self.sentences.get("eval")}

    # ---------------------------------------------------------------------------- metrics

    def evaluate(self, trainer, name, raw, features, args: Arguments) -> dict[str, float]:
        return trainer.evaluate(
            features, metric_key_prefix="eval", sentences=self.sentences["eval"]
        )

    def predict(self, trainer, name, raw, features, args: Arguments) -> dict[str, float]:
        return trainer.evaluate(
            features, metric_key_prefix="predict", sentences=self.sentences["predict"]
        )

    def card(self, args: Arguments) -> dict[str, str]:
        return {"task": "token-classification", "dataset": args.data.dataset_name or "conll2003"}


def _config_labels(args: Arguments) -> list[str]:
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(args.model.model_name_or_path)
    except (OSError, ValueError) as err:
        raise UsageError(
            f"{args.model.model_name_or_path}: no labels without training data "
            f"({str(err).splitlines()[0]})"
        ) from None
    return [config.id2label[i] for i in range(len(config.id2label))]
