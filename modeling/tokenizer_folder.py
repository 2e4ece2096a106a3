"""Tokenizer folders that load wherever a BERT tokenizer loads.

Every tokenizer folder this project writes (a trained WordPiece tokenizer, the ``tokenizer/``
of pretraining data, the ``model/`` of a checkpoint) goes through :func:`save_tokenizer`, so
that stock ``AutoTokenizer`` in transformers 4.x and 5.x and the slow ``BertTokenizer`` read it:

* a BERT WordPiece pipeline held by the generic class (``PreTrainedTokenizerFast``, saved by
  transformers 5 as ``TokenizersBackend``, a name transformers 4 does not know) is saved as
  ``BertTokenizer``, the name stock BERT folders carry;
* ``vocab.txt`` and ``special_tokens_map.json`` are written beside ``tokenizer.json`` and
  ``tokenizer_config.json`` (transformers 5 writes neither; the slow tokenizer needs the first);
* loading options that ``from_pretrained`` keeps among the init arguments (``local_files_only``
  under ``HF_HUB_OFFLINE``, ``cache_dir``, ``token``...) are left out of
  ``tokenizer_config.json``: they describe one run's machine, not the tokenizer.
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
    (``tokenizer`` itself, or its :func:`as_bert_tokenizer` form)."""
    folder = Path(folder)
    tokenizer = as_bert_tokenizer(tokenizer)
    tokenizer.save_pretrained(str(folder))

    config_file = folder / "tokenizer_config.json"
    config = json.loads(config_file.read_text(encoding="utf-8"))
    clean = {k: v for k, v in config.items() if k not in RUNTIME_KWARGS}
    if clean != config:
        write_json(config_file, clean)

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
