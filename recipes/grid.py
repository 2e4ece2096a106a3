"""The paper's protocol as repeated Trainer runs: every (learning rate, batch size, epochs, seed)
cell in its own folder, chosen on dev (best median over seeds, its best restart reported),
``grid_results.json`` with best / median / std per setting; cells resumable."""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import shutil
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modeling.cli import UsageError

from .card import _is_number, push_to_hub

if TYPE_CHECKING:
    from .featurise import Data
    from .runner import Arguments, Task

logger = logging.getLogger(__name__)


def grid_cells(args: Arguments) -> list[dict[str, Any]]:
    """Every (learning rate, batch size, epochs, seed) of the grid, grids defaulting to the
    single values of the training arguments."""
    t, r = args.training, args.run
    axes = {
        "learning_rate": r.learning_rate_grid or [t.learning_rate],
        "per_device_train_batch_size": r.batch_size_grid or [t.per_device_train_batch_size],
        "num_train_epochs": r.num_train_epochs_grid or [t.num_train_epochs],
        "seed": r.seeds or [t.seed],
    }
    return [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())]


def cell_name(cell: dict[str, Any]) -> str:
    return (
        "lr{learning_rate:g}_bs{per_device_train_batch_size}_ep{num_train_epochs:g}_seed{seed}"
    ).format(**cell)


def summarise_grid(rows: list[dict], metric: str, greater_is_better: bool = True) -> dict:
    """Per setting (all but the seed): best, median, std over seeds; the setting with the best
    median wins (chosen on dev), and its best restart is the run reported (as the paper)."""
    settings: dict[tuple, dict] = {}
    for row in rows:
        key = (row["learning_rate"], row["per_device_train_batch_size"], row["num_train_epochs"])
        settings.setdefault(key, {"runs": []})["runs"].append(row)
    summary_settings = []
    for (lr, bs, ep), entry in settings.items():
        scores = [r[metric] for r in entry["runs"]]
        summary_settings.append(
            {
                "learning_rate": lr,
                "per_device_train_batch_size": bs,
                "num_train_epochs": ep,
                f"{metric}_best": max(scores) if greater_is_better else min(scores),
                f"{metric}_median": statistics.median(scores),
                f"{metric}_std": statistics.pstdev(scores) if len(scores) > 1 else 0.0,
                "n": len(scores),
            }
        )
    pick = max if greater_is_better else min
    best = pick(summary_settings, key=lambda s: s[f"{metric}_median"])
    chosen = pick(
        (
            r
            for r in rows
            if (r["learning_rate"], r["per_device_train_batch_size"], r["num_train_epochs"])
            == (
                best["learning_rate"],
                best["per_device_train_batch_size"],
                best["num_train_epochs"],
            )
        ),
        key=lambda r: r[metric],
    )
    return {
        "metric": metric,
        "best_setting": best,
        "chosen_run": chosen,
        "settings": summary_settings,
        "runs": rows,
    }


def run_grid(task: Task, args: Arguments, tokenizer, data: Data) -> dict:
    """One Trainer run per cell in ``output_dir/<cell>``; a cell whose ``all_results.json``
    exists is reused, a cell with checkpoints resumes from its latest (when resuming)."""
    from transformers.trainer_utils import get_last_checkpoint

    from .runner import train_and_evaluate

    if not args.training.do_eval:
        raise UsageError("a grid search chooses on dev: it needs --do_eval")
    out = Path(args.training.output_dir)
    resuming = bool(args.training.resume_from_checkpoint)
    rows = []
    for cell in grid_cells(args):
        cell_dir = out / cell_name(cell)
        done = cell_dir / "all_results.json"
        if resuming and done.is_file():
            metrics = json.loads(done.read_text())
            logger.info("%s: done earlier, %s", cell_name(cell), _pretty(metrics, task))
        else:
            resume = None
            if resuming and cell_dir.is_dir() and get_last_checkpoint(str(cell_dir)):
                resume = True
            training_args = dataclasses.replace(
                args.training, output_dir=str(cell_dir), resume_from_checkpoint=None, **cell
            )
            training_args.push_to_hub = False
            cell_args = dataclasses.replace(args, training=training_args)
            metrics = train_and_evaluate(task, cell_args, tokenizer, data, resume=resume)
        rows.append({**cell, "output_dir": str(cell_dir), **_numbers(metrics)})
        logger.info("%s: %s", cell_name(cell), _pretty(metrics, task))
    summary = summarise_grid(rows, task.metric_for_grid)
    if args.training.process_index == 0:
        from modeling import atomic

        atomic.write_json(out / "grid_results.json", summary)
        _promote(Path(summary["chosen_run"]["output_dir"]), out)
        task.after_grid(args, Path(summary["chosen_run"]["output_dir"]))
        if args.training.push_to_hub:
            push_to_hub(args)
    return summary


def _promote(cell_dir: Path, out: Path) -> None:
    """Copy the chosen run's model, results and card to the grid's output_dir (so that
    ``from_pretrained(output_dir)`` is the chosen model)."""
    for path in cell_dir.iterdir():
        if path.name.startswith("checkpoint-") or path.name == "runs":
            continue
        target = out / path.name
        if path.is_dir():
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(path, target)
        else:
            shutil.copyfile(path, target)


def _numbers(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if _is_number(v)}


def _pretty(metrics: dict, task: Task) -> str:
    key = task.metric_for_grid
    return f"{key} = {metrics.get(key, float('nan')):.2f}"
