"""Tokenizer folders that load wherever a BERT tokenizer loads.

Every tokenizer folder this project writes (a trained WordPiece tokenizer, the ``tokenizer/``
of pretraining data, the ``model/`` of a checkpoint, a fine-tuned ``output_dir``) goes through :func:`save_tokenizer`, so
that stock ``AutoTokenizer`` in transformers 4.x and 5.x and the slow ``BertTokenizer`` read it:

* a BERT WordPiece pipeline held by the generic class (``PreTrainedTokenizerFast``, saved by
  transformers 5 as ``TokenizersBackend``, a name transformers 4 does not know) is saved as
  ``BertTokenizer``, the name stock BERT folders carry;
* ``vocab.txt`` and ``special_tokens_map.json`` are written beside ``tokenizer.json`` and
  ``tokenizer_config.json`` (transformers 5 writes neither; the slow tokenizer needs the first);
* loading options that ``from_pretrained`` keeps among the init arguments (``local_files_only``
  under ``HF_HUB_OFFLINE``, ``cache_dir``, ``token``...) are left out of
  ``tokenizer_config.json``: they describe one run's machine, not the tokenizer.
  :func:`drop_runtime_kwargs` removes them from a loaded tokenizer, so that folders written by
  others (``transformers.Trainer``'s ``checkpoint-*/``) leave them out too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .atomic import write_json, write_text

# ``from_pretrained`` arguments that end up in ``init_kwargs`` and so in tokenizer_config.json.
RUNTIME_KWARGS = (
    "local_files_only",
    "is_local",
    "cache_dir",
    "force_download",
    "resume_download",
    "proxies",
    "token",
    "use_auth_token",
    "revision",
    "subfolder",
    "trust_remote_code",
    "user_agent",
    "use_fast",
    "_from_auto",
    "_from_pipeline",
    "_commit_hash",
)
SPECIAL_TOKEN_NAMES = ("unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


def drop_runtime_kwargs(tokenizer: Any) -> Any:
    """Remove the :data:`RUNTIME_KWARGS` from ``tokenizer.init_kwargs`` (in place), so that
    any later ``save_pretrained`` leaves them out of tokenizer_config.json; return ``tokenizer``."""
    init_kwargs = getattr(tokenizer, "init_kwargs", None)
    if isinstance(init_kwargs, dict):
        for key in RUNTIME_KWARGS:
            init_kwargs.pop(key, None)
    return tokenizer


def as_bert_tokenizer(tokenizer: Any) -> Any:
    """``tokenizer`` as transformers' ``BertTokenizer`` when it is a BERT WordPiece pipeline
    (WordPiece with ``##`` pieces, BERT normalizer and pre-tokenizer) held by a generic class;
    any other tokenizer comes back unchanged."""
    from transformers import BertTokenizer

    special = {name: getattr(tokenizer, name, None) for name in SPECIAL_TOKEN_NAMES}
    if (
        isinstance(tokenizer, BertTokenizer)
        or not hasattr(tokenizer, "backend_tokenizer")
        or None in special.values()
    ):
        return tokenizer
    spec = json.loads(tokenizer.backend_tokenizer.to_str())
    model = spec.get("model") or {}
    normalizer = spec.get("normalizer") or {}
    pre_tokenizer = spec.get("pre_tokenizer") or {}
    if (
        model.get("type") != "WordPiece"
        or model.get("continuing_subword_prefix") != "##"
        or model.get("max_input_chars_per_word", 100) != 100
        or normalizer.get("type") != "BertNormalizer"
        or not normalizer.get("clean_text", True)
        or pre_tokenizer.get("type") != "BertPreTokenizer"
    ):
        return tokenizer
    bert = BertTokenizer(
        vocab=dict(model["vocab"]),
        do_lower_case=normalizer["lowercase"],
        strip_accents=normalizer["strip_accents"],
        tokenize_chinese_chars=normalizer["handle_chinese_chars"],
        model_max_length=tokenizer.model_max_length,
        **{name: str(token) for name, token in special.items()},
    )
    if bert.get_vocab() != tokenizer.get_vocab():  # e.g. added tokens beyond the WordPiece vocab
        return tokenizer
    return bert


def save_tokenizer(tokenizer: Any, folder: str | Path) -> Any:
    """Save ``tokenizer`` into ``folder`` as a stock-loadable folder; return what was saved
    (``tokenizer`` itself, or its :func:`as_bert_tokenizer` form; either way without the
    :data:`RUNTIME_KWARGS` in its ``init_kwargs``)."""
    folder = Path(folder)
    tokenizer = drop_runtime_kwargs(as_bert_tokenizer(tokenizer))
    tokenizer.save_pretrained(str(folder))

    # Written every time: a stale file from an earlier save into this folder must not survive.
    if type(tokenizer).__name__ == "BertTokenizer":
        vocab = tokenizer.backend_tokenizer.get_vocab(with_added_tokens=False)
        by_id = sorted((i, t) for t, i in vocab.items())
        if [i for i, _ in by_id] != list(range(len(by_id))):
            raise ValueError(f"{folder}: tokenizer ids are not 0..{len(by_id) - 1}, no vocab.txt")
        write_text(folder / "vocab.txt", "".join(f"{t}\n" for _, t in by_id))
    special = {name: getattr(tokenizer, name, None) for name in SPECIAL_TOKEN_NAMES}
    write_json(
        folder / "special_tokens_map.json",
        {name: str(token) for name, token in special.items() if token is not None},
    )
    return tokenizer
