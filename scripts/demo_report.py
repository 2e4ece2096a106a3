#!/usr/bin/env python
"""Summarise the demo (scripts/demo.sh): print what pretraining reached and what it bought
downstream, in plain words; write DEMO_DIR/summary.json and DEMO_DIR/summary.png.

    python scripts/demo_report.py outputs/demo --seeds 1 2 3 [--seconds 180]
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from modeling.cli import UsageError, main_guard

TASK = "dangerous-or-harmless (creatures unseen in fine-tuning)"
METRIC = "accuracy"


def _spread(values: list[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else 0.0


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("demo_dir", type=Path)
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    parser.add_argument("--seconds", type=float, default=None, help="wall time of the demo")
    args = parser.parse_args(argv)
    from modeling import atomic
    from recipes.reproduce import MetricNotFound, read_metric
    from recipes.reproduce.runner import pretraining_curve

    out: Path = args.demo_dir
    curve, info = pretraining_curve(out / "pretrain")
    if not curve or info.get("unigram_baseline") is None:
        raise UsageError(
            f"{out / 'pretrain'}: no held-out evaluation in log.jsonl/train_results.json"
        )
    values: dict[str, list[float]] = {"pretrained": [], "random_init": []}
    for name, folder in (("pretrained", "pretrained"), ("random_init", "random")):
        for seed in args.seeds:
            try:
                values[name].append(read_metric(out / "finetune" / f"{folder}-seed{seed}", METRIC))
            except MetricNotFound as err:
                raise UsageError(str(err)) from None
    world = out / "world" / "task" / "dev.tsv"
    dev_rows = (
        max(0, len(world.read_text(encoding="utf-8").splitlines()) - 1) if world.is_file() else None
    )
    mlm, base = info["heldout_mlm_accuracy"], info["unigram_baseline"]
    med = {k: statistics.median(v) for k, v in values.items()}
    std = {k: _spread(v) for k, v in values.items()}
    gap = med["pretrained"] - med["random_init"]
    noise = max(std.values())
    summary = {
        "mlm_accuracy": mlm,
        "unigram_baseline": base,
        "nsp_accuracy": info.get("heldout_nsp_accuracy"),
        "pretraining_steps": info.get("steps"),
        "pretraining_tokens": info.get("tokens_seen"),
        "task": TASK,
        "metric": METRIC,
        "pretrained": med["pretrained"],
        "random_init": med["random_init"],
        "seeds": args.seeds,
        "pretrained_per_seed": values["pretrained"],
        "random_init_per_seed": values["random_init"],
        "pretrained_std": std["pretrained"],
        "random_init_std": std["random_init"],
        "chance": 50.0,
        "dev_examples": dev_rows,
        "seconds": args.seconds,
    }
    right, probed = knowledge_probe(out / "pretrain" / "model", out / "world")
    random_dir = out / "random-init" / f"seed{args.seeds[0]}"
    right_random = knowledge_probe(random_dir, out / "world")[0] if random_dir.is_dir() else None
    summary["nearest_kind_probe"] = {
        "creatures": probed,
        "pretrained_right": right,
        "random_init_right": right_random,
    }
    atomic.write_json(out / "summary.json", summary)
    _plot(out / "summary.png", curve, base, values)

    def pct(x: float) -> str:
        return f"{100 * x:.1f}%"

    nsp = info.get("heldout_nsp_accuracy")
    lines = [
        "",
        "== what the demo shows",
        f"Pretraining ({info.get('steps')} steps, about {info.get('tokens_seen', 0) / 1e6:.1f} M tokens):",
        f"  held-out masked-word accuracy {pct(mlm)}  vs  unigram baseline {pct(base)}"
        " (always guessing the commonest masked word)",
        "  -> the model predicts hidden words from their context far better than word "
        "frequency alone allows."
        if mlm > 2 * base
        else "  -> barely above word frequency: pretraining did not get far (see the log).",
    ]
    if nsp is not None:
        lines.append(f"  held-out next-sentence accuracy {pct(nsp)} (50% is a coin flip)")
    lines.append(
        "  nearest-kind test, no fine-tuning: a dev creature's name embedding is closer to the"
        f" training creatures of its own kind for {right} of the {probed} dev creatures"
        + (f" (random init: {right_random})" if right_random is not None else "")
    )
    lines += [
        f"Downstream: is the creature named in a sentence dangerous? ({dev_rows} dev sentences about "
        "creatures never seen in fine-tuning; chance 50%)",
        f"  from our checkpoint: {med['pretrained']:.1f}% (median of seeds {args.seeds}: "
        + ", ".join(f"{v:.1f}" for v in values["pretrained"])
        + ")",
        f"  from random init:    {med['random_init']:.1f}% ("
        + ", ".join(f"{v:.1f}" for v in values["random_init"])
        + ")",
        f"  gap {gap:+.1f} points; seed spread (std) {std['pretrained']:.1f} / {std['random_init']:.1f}",
        "  -> the answer is only in the pretraining corpus: a model from random init has never "
        "read about the dev creatures, so it guesses; the pretrained one has, and carries it over."
        if gap > max(3 * noise, 5.0)
        else "  -> NO clear gap: pretraining did not transfer in this run.",
        f"Files: {out / 'summary.json'}, {out / 'summary.png'}, checkpoint {out / 'pretrain' / 'model'}",
    ]
    if args.seconds is not None:
        lines.append(f"Whole demo: {args.seconds:.0f} s.")
    print("\n".join(lines))
    return summary


def knowledge_probe(model_dir: Path, world_dir: Path) -> tuple[int, int]:
    """Nearest-kind test on the DEV creatures, without any fine-tuning: is a dev creature's
    name embedding closer (mean cosine similarity) to the TRAINING creatures of its own kind
    (dangerous or harmless) than to those of the other kind? This is what lets fine-tuning on
    the training creatures carry over. Returns (right, creatures)."""
    import csv

    import torch
    from transformers import AutoTokenizer

    from modeling import BertModel

    with open(world_dir / "world.tsv", encoding="utf-8") as fh:
        truth = {r["name"]: r["dangerous"] == "1" for r in csv.DictReader(fh, delimiter="\t")}

    def names(split: str) -> list[str]:
        with open(world_dir / "task" / f"{split}.tsv", encoding="utf-8") as fh:
            words = {
                w.strip(".")
                for r in csv.DictReader(fh, delimiter="\t")
                for w in r["sentence"].split()
            }
        return sorted(words & set(truth))

    train, dev = names("train"), names("dev")
    if not train or not dev:
        return 0, 0
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    table = BertModel.from_pretrained(model_dir).get_input_embeddings().weight.detach()

    def vectors(group: list[str]) -> torch.Tensor:
        # a name split into several pieces is the mean of its pieces
        rows = [table[tokenizer(n, add_special_tokens=False)["input_ids"]].mean(0) for n in group]
        return torch.nn.functional.normalize(torch.stack(rows), dim=-1)

    sims = vectors(dev) @ vectors(train).T
    kind = torch.tensor([truth[n] for n in train])
    to_danger, to_harmless = sims[:, kind].mean(1), sims[:, ~kind].mean(1)
    guess = (to_danger > to_harmless).tolist()
    return sum(g == truth[n] for g, n in zip(guess, dev)), len(dev)


def _plot(path: Path, curve: list[dict], baseline: float, values: dict[str, list[float]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    xs = [c["tokens"] / 1e6 for c in curve]
    a.plot(xs, [100 * c["mlm_accuracy"] for c in curve], "o-", label="held-out MLM accuracy")
    nsp = [(x, c["nsp_accuracy"]) for x, c in zip(xs, curve) if c.get("nsp_accuracy") is not None]
    if nsp:
        a.plot([p[0] for p in nsp], [100 * p[1] for p in nsp], "s-", label="held-out NSP accuracy")
    a.axhline(100 * baseline, color="gray", linestyle="--", label="unigram baseline (MLM)")
    a.set_xlabel("tokens seen (millions)")
    a.set_ylabel("%")
    a.set_title("pretraining BERT-tiny on the demo world")
    a.legend(fontsize=8)
    names = list(values)
    for i, name in enumerate(names):
        b.bar(i, statistics.median(values[name]), 0.6, alpha=0.6, color=f"C{i}")
        b.plot([i] * len(values[name]), values[name], "k.", markersize=8)
    b.axhline(50, color="gray", linestyle="--", label="chance")
    b.set_xticks(range(len(names)))
    b.set_xticklabels(["from our checkpoint", "from random init"])
    b.set_ylabel("dev accuracy (%)")
    b.set_ylim(0, 100)
    b.set_title("dangerous or harmless? (unseen creatures)")
    b.legend(fontsize=8)
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=90)
    plt.close(fig)
    tmp.replace(path)


if __name__ == "__main__":
    main_guard(main)
