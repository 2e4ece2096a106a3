"""GLUE's metrics (percentages, as the paper's tables) and the GLUE score."""

from __future__ import annotations

from .tasks import GlueTask, get_task


def compute_metrics(task: GlueTask, predictions, references) -> dict[str, float]:
    """GLUE's metrics for ``task`` in percent (accuracy, F1 of class 1 for MRPC/QQP, CoLA's
    Matthews correlation, STS-B's Pearson/Spearman, all x 100), plus ``combined_score`` (their
    mean, the task's leaderboard score) when the task has two, as transformers' run_glue."""
    import numpy as np

    preds = np.asarray(predictions)
    refs = np.asarray(references)
    if len(preds) != len(refs) or len(preds) == 0:
        raise ValueError(f"{len(preds)} predictions for {len(refs)} references")
    out: dict[str, float] = {}
    for metric in task.metrics:
        if metric == "accuracy":
            out[metric] = 100.0 * float(np.mean(preds == refs))
        elif metric == "f1":
            from sklearn.metrics import f1_score

            out[metric] = 100.0 * float(f1_score(refs, preds, pos_label=1, average="binary"))
        elif metric == "matthews_correlation":
            from sklearn.metrics import matthews_corrcoef

            out[metric] = 100.0 * float(matthews_corrcoef(refs, preds))
        elif metric == "pearson":
            from scipy.stats import pearsonr

            out[metric] = 100.0 * float(pearsonr(preds, refs)[0])
        elif metric == "spearmanr":
            from scipy.stats import spearmanr

            out[metric] = 100.0 * float(spearmanr(preds, refs)[0])
        else:
            raise ValueError(f"unknown metric {metric}")
    if len(task.metrics) > 1:
        out["combined_score"] = float(np.mean([out[m] for m in task.metrics]))
    return out


def glue_score(task_scores: dict[str, dict[str, float] | float]) -> float:
    """The GLUE score as the leaderboard computes it: the mean over tasks of each task's score,
    where a task with two metrics (MRPC/QQP F1 and accuracy, STS-B Pearson and Spearman, MNLI
    matched and mismatched) counts as the mean of the two. AX is not part of it. Values are
    whatever scale they come in (fractions or percentages).

    ``task_scores`` maps a task name to a float (its score) or to a metrics dict; for MNLI a
    dict with ``accuracy`` and ``accuracy_mm`` (or ``mnli-m``/``mnli-mm`` given as two tasks).
    """
    scores: dict[str, float] = {}
    for name, value in task_scores.items():
        key = name.lower().replace("_", "-")
        if key in ("mnli-m", "mnli-mm"):
            scores.setdefault("mnli", [])
            scores["mnli"].append(
                float(value if not isinstance(value, dict) else value["accuracy"])
            )
            continue
        task = get_task(key)
        if task.name == "ax":
            continue
        if isinstance(value, dict):
            if task.name == "mnli":
                value = (value["accuracy"] + value["accuracy_mm"]) / 2
            else:
                value = sum(value[m] for m in task.metrics) / len(task.metrics)
        scores[task.name] = float(value)
    if isinstance(scores.get("mnli"), list):
        scores["mnli"] = sum(scores["mnli"]) / len(scores["mnli"])
    if not scores:
        raise ValueError("no GLUE task scores given")
    return sum(scores.values()) / len(scores)
