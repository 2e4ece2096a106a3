"""GLUE fine-tuning on the shared Trainer runner (:mod:`recipes.runner`).

* :mod:`.tasks`: the task registry (columns, labels, metrics, dev/test files, leaderboard names);
* :mod:`.data`: readers for the official TSVs, CSV/JSON files and the Hub, ``file:line`` errors;
* :mod:`.metrics`: GLUE's metrics in percent and the GLUE score;
* :mod:`.submission`: leaderboard files and the zip to upload;
* :mod:`.recipe`: :class:`GlueRecipe`, the :class:`recipes.runner.Task` behind
  ``scripts/run_glue.py``.
"""

from .data import (
    Example,
    GlueDataArguments,
    GlueDataError,
    load_split,
    read_glue_tsv,
    read_hub_split,
    read_records_file,
)
from .metrics import compute_metrics, glue_score
from .recipe import GlueRecipe, examples_to_records, label_ids, tokenize_batch
from .submission import decode_predictions, missing_files, write_predictions, zip_submission
from .tasks import SUBMISSION_FILES, TASKS, EvalSet, GlueTask, get_task

__all__ = [
    "EvalSet",
    "Example",
    "GlueDataArguments",
    "GlueDataError",
    "GlueRecipe",
    "GlueTask",
    "SUBMISSION_FILES",
    "TASKS",
    "compute_metrics",
    "decode_predictions",
    "examples_to_records",
    "get_task",
    "glue_score",
    "label_ids",
    "load_split",
    "missing_files",
    "read_glue_tsv",
    "read_hub_split",
    "read_records_file",
    "tokenize_batch",
    "write_predictions",
    "zip_submission",
]
