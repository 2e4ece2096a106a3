"""The CoNLL NER recipe on ``transformers.Trainer`` (fine-tuned or feature-based BiLSTM).

Writes into ``output_dir`` the model and tokenizer (the feature-based tagger: also
``tagger_config.json`` and ``tagger_head.safetensors``), ``dev_predictions.txt`` /
``test_predictions.txt`` (conlleval input), ``train_results.json``, ``eval_results.json``,
``test_results.json``, ``all_results.json``, ``trainer_state.json`` and a ``README.md`` card.
"""

from __future__ import annotations

import logging
from typing import Any

from modeling.cli import UsageError

from . import data as ner_data
from .data import NerDataArguments, label_list, sentences_of

logger = logging.getLogger(__name__)


def _labels(model_args, train_sentences) -> list[str]:
    if train_sentences:
        return label_list(train_sentences)
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_args.model_name_or_path)
    return [config.id2label[i] for i in range(len(config.id2label))]


def build_model(model_args, data_args: NerDataArguments, labels):
    """Fine-tuned ``BertForTokenClassification``, or the feature-based BiLSTM tagger."""
    from ..trainer_setup import load_model

    id2label = dict(enumerate(labels))
    if data_args.feature_based:
        from .tagger import FeatureBasedTagger

        return FeatureBasedTagger.from_encoder(
            model_args,
            num_labels=len(labels),
            layers=data_args.feature_layers,
            lstm_hidden_size=data_args.lstm_hidden_size,
            id2label=id2label,
        )
    from modeling import BertForTokenClassification

    return load_model(
        BertForTokenClassification,
        model_args,
        num_labels=len(labels),
        id2label=id2label,
        label2id={t: i for i, t in id2label.items()},
    )


def run(model_args, data_args: NerDataArguments, training_args) -> dict[str, Any]:
    """Train and/or evaluate (dev and, with ``--do_predict``, test); returns the metrics."""
    from ..trainer_setup import check_output_dir, load_tokenizer, model_card, resume_arg

    check_output_dir(training_args.output_dir)
    args = training_args
    if args.do_train and not (data_args.train_file or data_args.dataset_name):
        raise UsageError("--do_train needs --train_file or --dataset_name")
    # data first: a bad file fails at once, in one line, before the model loads
    with args.main_process_first(desc="CoNLL documents"):
        train_docs = ner_data.load_split(data_args, "train", data_args.max_train_samples)
        dev_docs = ner_data.load_split(data_args, "validation", data_args.max_eval_samples)
        test_docs = ner_data.load_split(data_args, "test", data_args.max_predict_samples)
    train_sents = sentences_of(train_docs) if train_docs is not None and args.do_train else None
    dev_sents = sentences_of(dev_docs) if dev_docs is not None and args.do_eval else None
    test_sents = sentences_of(test_docs) if test_docs is not None and args.do_predict else None
    if args.do_eval and dev_sents is None:
        raise UsageError("--do_eval needs --validation_file or --dataset_name")
    if args.do_predict and test_sents is None:
        raise UsageError("--do_predict needs --test_file or --dataset_name")
    resume = resume_arg(args) if args.do_train else None

    from transformers import DataCollatorForTokenClassification, set_seed

    from .features import featurize
    from .trainer import NerTrainer

    tokenizer = load_tokenizer(model_args)
    labels = _labels(model_args, train_sents)
    for name, split in (("validation", dev_sents), ("test", test_sents)):
        unknown = {t for s in split or [] for t in s.tags} - set(labels)
        if unknown:
            raise UsageError(f"{name} data has tags not seen in training: {sorted(unknown)}")
    eval_context = (
        data_args.document_context
        if data_args.eval_document_context is None
        else data_args.eval_document_context
    )

    def windows(docs, context):
        return featurize(
            docs,
            tokenizer,
            labels,
            data_args.max_seq_length,
            context,
            data_args.label_all_pieces,
            data_args.long_sentence_stride,
            data_args.preprocessing_num_workers,
        )

    with args.main_process_first(desc="NER windows"):
        train = windows(train_docs, data_args.document_context) if train_sents else None
        dev = windows(dev_docs, eval_context) if dev_sents else None
        test = windows(test_docs, eval_context) if test_sents else None
    if train is not None:
        logger.info("train: %d sentences -> %d windows", len(train_sents), len(train))
        train = train.select_columns(["input_ids", "token_type_ids", "attention_mask", "labels"])

    set_seed(args.seed)  # the new head's initialisation
    model = build_model(model_args, data_args, labels)
    trainer = NerTrainer(
        model=model,
        args=args,
        train_dataset=train,
        eval_dataset=dev,
        processing_class=tokenizer,
        data_collator=DataCollatorForTokenClassification(tokenizer),
        labels=labels,
        eval_sentences=dev_sents,
    )
    metrics: dict[str, Any] = {}
    if args.do_train:
        result = trainer.train(resume_from_checkpoint=resume)
        trainer.save_model()
        if data_args.feature_based and trainer.is_world_process_zero():
            trainer.accelerator.unwrap_model(trainer.model).save_pretrained(args.output_dir)
        train_metrics = {**result.metrics, "train_samples": len(train_sents)}
        trainer.log_metrics("train", train_metrics)
        trainer.save_metrics("train", train_metrics)
        trainer.save_state()
        metrics.update(train_metrics)
    for prefix, features, sentences in (("eval", dev, dev_sents), ("test", test, test_sents)):
        if features is None:
            continue
        split_metrics = trainer.evaluate(features, metric_key_prefix=prefix, sentences=sentences)
        trainer.log_metrics(prefix, split_metrics)
        trainer.save_metrics(prefix, split_metrics)
        metrics.update(split_metrics)
    if args.do_train and not data_args.feature_based:
        model_card(
            trainer, model_args, "token-classification", data_args.dataset_name or "conll2003"
        )
    return metrics
