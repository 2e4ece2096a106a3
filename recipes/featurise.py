"""Data for the fine-tuning runner: raw sets read and checked, then featurised with
``datasets.Dataset.map(batched=True)`` on the main process first and cached on disk under a key
of (task, split, raw content, tokenizer, data arguments): a second launch re-tokenises nothing."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modeling.cli import UsageError

if TYPE_CHECKING:
    from .runner import Arguments, ModelArguments, Task

logger = logging.getLogger(__name__)


def tokenizer_fingerprint(tokenizer) -> str:
    """A hash of what the tokenizer does (vocabulary, normaliser, pre-tokeniser, special
    tokens), not of its truncation state, which changes as it is used."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        spec = json.loads(backend.to_str())
        spec.pop("truncation", None)
        spec.pop("padding", None)
        text = json.dumps(spec, sort_keys=True)
    else:
        text = json.dumps(sorted(tokenizer.get_vocab().items()))
    text += repr((type(tokenizer).__name__, tokenizer.all_special_tokens))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cache_root(model_args: ModelArguments) -> Path:
    if model_args.cache_dir:
        return Path(model_args.cache_dir) / "features"
    import datasets

    return Path(datasets.config.HF_DATASETS_CACHE) / "bert_toolkit_features"


def _as_dataset(raw):
    import datasets

    if isinstance(raw, datasets.Dataset):
        return raw
    return datasets.Dataset.from_list(list(raw))


def _cap(raw, limit: int | None):
    if limit is None or len(raw) <= limit:
        return raw
    return raw.select(range(limit)) if hasattr(raw, "select") else raw[:limit]


def featurise(task: Task, split: str, name: str, raw, tokenizer, args: Arguments):
    """``raw`` examples -> features through ``Dataset.map(batched=True)``, cached on disk under a
    key of (task, split, raw content, tokenizer, data arguments). A cache hit loads the Arrow
    file memory-mapped without calling :meth:`Task.featurise`."""
    import datasets

    dataset = _as_dataset(raw)
    key = hashlib.sha256(
        json.dumps(
            [
                task.name,
                task.feature_version,
                split,
                name,
                dataset._fingerprint,
                len(dataset),
                tokenizer_fingerprint(tokenizer),
                dataclasses.asdict(args.data),
            ],
            sort_keys=True,
            default=str,
        ).encode()
    ).hexdigest()[:20]
    root = cache_root(args.model)
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{task.name}-{split}-{name}-{key}.arrow"
    if path.is_file() and not args.run.overwrite_cache:
        logger.info("%s %s: cached features %s", task.name, name, path)
        return datasets.Dataset.from_file(str(path))
    return dataset.map(
        task.featurise,
        batched=True,
        fn_kwargs={"tokenizer": tokenizer, "data_args": args.data, "split": split},
        remove_columns=dataset.column_names,
        features=task.features(args.data, split),
        cache_file_name=str(path),
        load_from_cache_file=False,
        desc=f"featurise {task.name} {name}",
    )


@dataclass
class Data:
    """Raw sets and their features, per split: ``{split: {name: (raw, features)}}``."""

    sets: dict[str, dict[str, tuple[Any, Any]]]

    def get(self, split: str) -> dict[str, tuple[Any, Any]]:
        return self.sets.get(split, {})


def read_raw(task: Task, args: Arguments) -> dict[str, dict[str, Any]]:
    """Every raw set the run needs, read, validated and capped (``--max_*_samples``): a bad
    file fails here, before the model loads."""
    wanted = {
        "train": (args.training.do_train, args.run.max_train_samples),
        "eval": (args.training.do_eval, args.run.max_eval_samples),
        "predict": (args.training.do_predict, args.run.max_predict_samples),
    }
    out = {}
    for split, (on, limit) in wanted.items():
        if not on:
            continue
        raw_sets = task.load_raw(args.data, split, args) or {}
        if not raw_sets:
            raise UsageError(f"--do_{split}: no {split} data for {task.name}")
        out[split] = {name: _cap(raw, limit) for name, raw in raw_sets.items()}
    return out


def load_data(task: Task, args: Arguments, tokenizer, raw: dict[str, dict[str, Any]]) -> Data:
    """Featurise every raw set, on the main process first (the others load its cache)."""
    sets: dict[str, dict[str, tuple[Any, Any]]] = {}
    with args.training.main_process_first(desc="featurise"):
        for split, raw_sets in raw.items():
            sets[split] = {}
            for name, raw_set in raw_sets.items():
                raw_set = _as_dataset(raw_set)
                sets[split][name] = (
                    raw_set,
                    featurise(task, split, name, raw_set, tokenizer, args),
                )
    return Data(sets)
