"""Reading a run's metric, and writing a study's results.json, RESULTS.md and PNG.

:func:`read_metric` is the one place that knows what the fine-tuning scripts write: transformers'
layout, ``all_results.json`` / ``eval_results.json`` with flat ``eval_<metric>`` keys, which this
project's scripts write in percent.
"""

from __future__ import annotations

import json
import math
import os
import statistics
from pathlib import Path
from typing import Any

RESULT_FILES = ("all_results.json", "eval_results.json")
ALIASES = {"exact_match": ("exact_match", "exact"), "exact": ("exact", "exact_match")}


class MetricNotFound(LookupError):
    """The run folder holds no result for the metric (not run yet, or killed before the end)."""


def _load(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    return float(value)


def read_metric(output_dir: str | Path, metric: str) -> float:
    """``eval_<metric>`` of the run in ``output_dir``, in percent; :class:`MetricNotFound` if
    absent (not run yet, killed before the end, or an unreadable file)."""
    out = Path(output_dir)
    names = ALIASES.get(metric, (metric,))
    for file in RESULT_FILES:
        data = _load(out / file) or {}
        for name in names:
            value = _number(data.get(f"eval_{name}"))
            if value is not None:
                return value
    raise MetricNotFound(f"{out}: no eval_{metric} in {' or '.join(RESULT_FILES)}")


def read_train_runtime(output_dir: str | Path) -> float | None:
    """``train_runtime`` as the script reports it (None when it does not)."""
    out = Path(output_dir)
    for file in ("all_results.json", "train_results.json"):
        value = _number((_load(out / file) or {}).get("train_runtime"))
        if value is not None:
            return value
    return None


# --------------------------------------------------------------------------------------------
# Summaries
# --------------------------------------------------------------------------------------------


def spread(values: list[float]) -> float:
    """Sample standard deviation (0 for a single value)."""
    return statistics.stdev(values) if len(values) > 1 else 0.0


def summarise(records: list[dict]) -> dict[tuple[str, str], dict]:
    """Per (task, init): the reported runs' median, std, best, n and the chosen hyper-parameters."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in records:
        if r.get("reported"):
            groups.setdefault((r["task"], r["init"]), []).append(r)
    out = {}
    for key, runs in groups.items():
        values = [r["value"] for r in runs]
        out[key] = {
            "median": statistics.median(values),
            "std": spread(values),
            "best": max(values),
            "n": len(values),
            "values": values,
            "learning_rate": runs[0]["hparams"].get("learning_rate"),
            "metric": runs[0]["metric"],
        }
    return out


def pretraining_gap(summary: dict, task: str, ours: str = "ours", baseline: str = "random"):
    """(margin, noise, verdict) for ours vs baseline: margin = difference of medians, noise =
    the larger of the two seed spreads; None when either is missing."""
    a, b = summary.get((task, ours)), summary.get((task, baseline))
    if a is None or b is None:
        return None
    margin = a["median"] - b["median"]
    noise = max(a["std"], b["std"])
    return margin, noise, margin > noise


def _fmt(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def relative_to_cwd(text: str) -> str:
    """``text`` with the working directory's prefix removed from paths inside it, so tables and
    records do not carry one machine's folders."""
    return text.replace(os.getcwd().rstrip("/") + "/", "")


def write_results_json(path: str | Path, records: list[dict]) -> None:
    from modeling import atomic

    shown = [
        {k: relative_to_cwd(v) if isinstance(v, str) else v for k, v in r.items()} for r in records
    ]
    atomic.write_json(Path(path), shown)


def write_results_md(
    path: str | Path,
    suite,
    records: list[dict],
    stages: dict[str, dict],
    commands: list[str],
    pretraining: dict | None = None,
    partial: bool = False,
) -> str:
    """The study's table (median +- std over seeds per task and init, references beside) and how
    it was made; ``partial``: the study has not finished (a report of the runs done so far).
    Returns the text."""
    from modeling import atomic

    summary = summarise(records)
    inits = list(suite.inits)
    lines = [f"# Reproduction suite `{suite.name}`", ""]
    if suite.description:
        lines += [suite.description.strip(), ""]
    if partial:
        lines += [
            f"**Partial results: the study has not finished** ({len(records)} runs done so far; "
            "a cell shows once its learning-rate grid has run; rerun the command to continue).",
            "",
        ]
    chosen = "median over the grid seeds" if suite.selection == "median" else "best run"
    lines += [
        f"Values in percent on the dev sets: median ± std over seeds (n = runs), learning rate "
        f"picked on dev per task and init ({chosen}). Generated by `scripts/reproduce.py "
        f"--suite {suite.path}` from `results.json`.",
        "",
    ]
    header = ["task", "metric"] + [suite.inits[i].label or i for i in inits]  # one column per init
    has_gap = {"ours", "random"} <= set(inits)
    if has_gap:
        header.append("ours - random (noise)")
    header.append("reference")
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, task in suite.tasks.items():
        row = [name, task.metric]
        for i in inits:
            s = summary.get((name, i))
            row.append(
                "-"
                if s is None
                else f"{_fmt(s['median'])} ± {_fmt(s['std'])} (n={s['n']}, lr {s['learning_rate']:g})"
            )
        if has_gap:
            gap = pretraining_gap(summary, name)
            row.append(
                "-"
                if gap is None
                else f"{gap[0]:+.1f} ({gap[1]:.1f}) {'beats' if gap[2] else 'NOT above noise'}"
            )
        row.append(", ".join(f"{k}: {v:g}" for k, v in task.reference.items()) or "-")
        lines.append("| " + " | ".join(row) + " |")
    if pretraining:
        lines += ["", "## Pretraining", ""]
        lines += [f"- {k}: {_fmt_pretraining(k, v)}" for k, v in pretraining.items()]
    if stages:
        lines += ["", "## Time per stage", "", "| stage | seconds | runs |", "|---|---|---|"]
        for name, info in stages.items():
            lines.append(f"| {name} | {info.get('seconds', 0):.0f} | {info.get('runs', 1)} |")
    lines += ["", "## Commands", "", "```bash"] + commands + ["```", ""]
    text = "\n".join(lines)
    atomic.write_text(Path(path), text)
    return text


def _fmt_pretraining(key: str, value) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return str(value)
    if key.endswith(("accuracy", "baseline")):
        return f"{100 * value:.1f}%"
    if key.startswith("tokens"):
        return f"{value / 1e6:.1f} M"
    if key.endswith("seconds"):
        return f"{value:,.0f} s ({value / 60:.0f} min)"
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def write_plot(
    path: str | Path,
    suite,
    records: list[dict],
    curve: list[dict] | None = None,
    baseline: float | None = None,
) -> None:
    """Left: the pretraining curve (held-out MLM and NSP accuracy against tokens seen, the
    unigram baseline dashed) when there is one; right: each task's runs per init."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = summarise(records)
    panels = 2 if curve else 1
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels + 2, 4.5), squeeze=False)
    axes = axes[0]
    if curve:
        ax = axes[0]
        xs = [c["tokens"] / 1e6 for c in curve]
        ax.plot(xs, [100 * c["mlm_accuracy"] for c in curve], "o-", label="held-out MLM accuracy")
        if any(c.get("nsp_accuracy") is not None for c in curve):
            pts = [
                (x, c["nsp_accuracy"])
                for x, c in zip(xs, curve)
                if c.get("nsp_accuracy") is not None
            ]
            ax.plot(
                [p[0] for p in pts], [100 * p[1] for p in pts], "s-", label="held-out NSP accuracy"
            )
        if baseline is not None:
            ax.axhline(100 * baseline, color="gray", linestyle="--", label="unigram baseline (MLM)")
        ax.set_xlabel("tokens seen (millions)")
        ax.set_ylabel("%")
        ax.set_title("pretraining")
        ax.legend(fontsize=8)
    ax = axes[-1]
    tasks = list(suite.tasks)
    inits = list(suite.inits)
    width = 0.8 / max(1, len(inits))
    for j, init in enumerate(inits):
        for t, task in enumerate(tasks):
            s = summary.get((task, init))
            if s is None:
                continue
            x = t + (j - (len(inits) - 1) / 2) * width
            ax.bar(
                x,
                s["median"],
                width,
                color=f"C{j}",
                alpha=0.6,
                label=(suite.inits[init].label or init) if t == 0 else None,
            )
            ax.plot([x] * len(s["values"]), s["values"], "k.", markersize=4)
    ax.set_xticks(range(len(tasks)))
    ax.set_xticklabels([f"{t}\n({suite.tasks[t].metric})" for t in tasks], fontsize=8)
    ax.set_ylabel("dev metric (%)")
    ax.set_title("fine-tuning: median over seeds (bars), each seed (dots)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(path).with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=90)
    plt.close(fig)
    tmp.replace(path)
