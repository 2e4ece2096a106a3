"""``QuestionAnsweringPipeline``: question + context of any length -> answer, with the model's tau."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import torch

from . import postprocess as pp
from .data import SquadArguments
from .features import prepare_features


class QuestionAnsweringPipeline:
    """Question + context of any length -> answer, or "" (no answer) with the model's tau.

    ``QuestionAnsweringPipeline.from_pretrained(folder)("Who?", long_text)`` returns a dict with
    ``answer``, ``score`` (best span start + end logit), ``null_odds`` (v2.0), ``start``/``end``
    (character offsets into the context, -1 for no answer) and ``n_best``. Whether no-answer is
    possible, the windows and tau come from the model config (``version_2_with_negative``,
    ``squad_window``, ``null_score_diff_threshold``) unless given.
    """

    def __init__(self, model, tokenizer, data_args: SquadArguments | None = None, **overrides):
        self.model, self.tokenizer = model.eval(), tokenizer
        if data_args is None:
            # the window settings the model was fine-tuned with, when it saved them
            saved = dict(getattr(model.config, "squad_window", None) or {})
            saved["version_2_with_negative"] = bool(
                getattr(model.config, "version_2_with_negative", False)
            )
            data_args = SquadArguments(**{**saved, **overrides})
        else:
            data_args = dataclasses.replace(data_args, **overrides)
        limit = model.config.max_position_embeddings
        if data_args.max_seq_length > limit:
            raise ValueError(f"max_seq_length {data_args.max_seq_length} > the model's {limit}")
        self.args = data_args

    @classmethod
    def from_pretrained(cls, path: str | Path, **overrides) -> QuestionAnsweringPipeline:
        from transformers import AutoTokenizer

        from modeling import BertForQuestionAnswering

        model = BertForQuestionAnswering.from_pretrained(str(path))
        return cls(model, AutoTokenizer.from_pretrained(str(path)), **overrides)

    def tau(self) -> float:
        if self.args.null_score_diff_threshold is not None:
            return float(self.args.null_score_diff_threshold)
        return float(getattr(self.model.config, "null_score_diff_threshold", None) or 0.0)

    @torch.no_grad()
    def __call__(self, question: str, context: str, batch_size: int = 32) -> dict[str, Any]:
        example = {"id": "q", "question": question, "context": context, "is_impossible": False}
        example["answers"] = {"text": [], "answer_start": []}
        batch = {k: [v] for k, v in example.items()}
        window = {k: getattr(self.args, k) for k in ("max_seq_length", "doc_stride")}
        feats = prepare_features(
            batch, self.tokenizer, max_query_length=self.args.max_query_length, **window
        )
        features = [dict(zip(feats, row)) for row in zip(*feats.values())]
        device = next(self.model.parameters()).device
        starts, ends = [], []
        for i in range(0, len(features), batch_size):
            chunk = [
                {k: f[k] for k in ("input_ids", "token_type_ids", "attention_mask")}
                for f in features[i : i + batch_size]
            ]
            inputs = self.tokenizer.pad(chunk, return_tensors="pt").to(device)
            out = self.model(**inputs)
            starts += list(out.start_logits.float().cpu().numpy())
            ends += list(out.end_logits.float().cpu().numpy())
        preds = pp.postprocess(
            [example],
            features,
            starts,
            ends,
            n_best_size=self.args.n_best_size,
            max_answer_length=self.args.max_answer_length,
            version_2_with_negative=self.args.version_2_with_negative,
            null_score_diff_threshold=self.tau(),
        )
        answer, nbest = preds.predictions["q"], preds.nbest["q"]
        best = next((n for n in nbest if n["text"] == answer), nbest[0])
        start, end = preds.spans.get("q", (-1, -1)) if answer else (-1, -1)
        return {
            "answer": answer,
            "score": best["start_logit"] + best["end_logit"],
            "null_odds": preds.null_odds.get("q"),
            "tau": preds.tau,
            "start": start,
            "end": end,
            "n_best": nbest,
        }
