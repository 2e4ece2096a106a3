#!/usr/bin/env python
"""Write chosen layers' activations per token for given texts (like Google's extract_features.py).

    python scripts/extract_features.py --model_name_or_path MODEL --input_file texts.txt \
        --output_file features.jsonl --layers -1 -2 -3 -4

One text per line of ``input_file``; ``text_a ||| text_b`` makes a sentence pair. Layer -1 is
the last encoder layer. ``.jsonl`` output uses Google's layout (``linex_index``, per token
``token`` and ``layers`` [{``index``, ``values``}]); ``.npz`` output holds ``features_<i>``
(layers, tokens, hidden) float32 and ``tokens_<i>`` per line.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from modeling.cli import UsageError, main_guard, parse_args


@dataclass
class ExtractArguments:
    model_name_or_path: str = field(default=None, metadata={"help": "BERT checkpoint folder"})
    input_file: str = field(default=None, metadata={"help": "one text (or 'A ||| B') per line"})
    output_file: str = field(default=None, metadata={"help": "features .jsonl or .npz"})
    layers: list[int] = field(
        default_factory=lambda: [-1, -2, -3, -4], metadata={"help": "layers; -1 is the last"}
    )
    max_seq_length: int = field(default=128, metadata={"help": "pieces per text (truncated)"})
    batch_size: int = field(default=32, metadata={"help": "texts per forward pass"})
    disable_tqdm: bool = field(default=False, metadata={"help": "no progress bar"})

    def __post_init__(self):
        for name in ("model_name_or_path", "input_file", "output_file"):
            if not getattr(self, name):
                raise ValueError(f"--{name} is required")
        if not self.output_file.endswith((".jsonl", ".json", ".npz")):
            raise ValueError(f"--output_file must end in .jsonl or .npz: {self.output_file}")


def main(argv=None):
    (args,) = parse_args([ExtractArguments], argv, description=__doc__)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    from pathlib import Path

    path = Path(args.input_file)
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found")
    texts = [line.rstrip("\n") for line in path.read_text(encoding="utf-8").splitlines()]
    texts = [t for t in texts if t.strip()]
    if not texts:
        raise UsageError(f"{path}: no texts")

    import time

    from modeling import BertModel
    from recipes.features import extract_features, write_jsonl, write_npz
    from recipes.runner import ModelArguments, load_tokenizer

    model_args = ModelArguments(model_name_or_path=args.model_name_or_path)
    tokenizer = load_tokenizer(model_args)
    model = BertModel.from_pretrained(args.model_name_or_path, add_pooling_layer=False)
    try:
        items = extract_features(
            model,
            tokenizer,
            texts,
            args.layers,
            args.max_seq_length,
            args.batch_size,
            args.disable_tqdm,
        )
        writer = write_npz if args.output_file.endswith(".npz") else write_jsonl
        start = time.perf_counter()
        count = writer(args.output_file, items, args.layers)
    except ValueError as err:
        raise UsageError(str(err)) from None
    elapsed = time.perf_counter() - start
    print(f"wrote {count} texts to {args.output_file} ({count / elapsed:.1f} texts/s)")


if __name__ == "__main__":
    main_guard(main)
