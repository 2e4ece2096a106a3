"""Leaderboard files: ``index<TAB>prediction`` per test set, zipped for upload."""

from __future__ import annotations

import logging
import zipfile
from collections.abc import Sequence
from pathlib import Path

from modeling import atomic

from .tasks import SUBMISSION_FILES, GlueTask

logger = logging.getLogger(__name__)


def decode_predictions(task: GlueTask, logits: Sequence, id2label: dict | None = None) -> list:
    """Logits -> label names (classification) or floats (STS-B)."""
    import numpy as np

    array = np.stack([np.asarray(x, dtype=np.float32) for x in logits])
    if task.is_regression:
        return [float(x) for x in array.reshape(len(array), -1)[:, 0]]
    names = task.labels
    if id2label and set(map(str, id2label.values())) == set(task.labels):
        # a model fine-tuned elsewhere (e.g. a stock MNLI model): trust its own label order
        names = [str(id2label[i]) for i in sorted(id2label, key=int)]
    return [names[int(i)] for i in array.argmax(-1)]


def write_predictions(path: str | Path, indices: Sequence, predictions: Sequence) -> Path:
    """A GLUE leaderboard file: header ``index<TAB>prediction``, then one row per example
    (label names for text-label tasks, 0/1 for CoLA/SST-2/MRPC/QQP/WNLI, floats for STS-B)."""
    lines = ["index\tprediction"]
    for index, prediction in zip(indices, predictions, strict=True):
        value = f"{prediction:.3f}" if isinstance(prediction, float) else str(prediction)
        lines.append(f"{index}\t{value}")
    atomic.write_text(path, "\n".join(lines) + "\n")
    return Path(path)


def missing_files(submission_dir: str | Path) -> list[str]:
    """The leaderboard files of a complete GLUE submission (11, AX included) not in the folder."""
    folder = Path(submission_dir)
    return [name for name in SUBMISSION_FILES if not (folder / name).is_file()]


def zip_submission(submission_dir: str | Path) -> Path:
    """Zip every leaderboard file in ``submission_dir`` into ``<submission_dir>.zip`` (files at
    the top level of the archive, as the GLUE site expects); warn, by name, about each of the 11
    benchmark files still missing (the site rejects an incomplete upload)."""
    folder = Path(submission_dir)
    files = sorted(p for p in folder.glob("*.tsv") if p.name in SUBMISSION_FILES)
    if not files:
        raise ValueError(f"no leaderboard files in {folder}")
    missing = missing_files(folder)
    if missing:
        logger.warning(
            "%s: %d of the %d GLUE leaderboard files missing: %s (the GLUE site needs all)",
            folder,
            len(missing),
            len(SUBMISSION_FILES),
            ", ".join(missing),
        )
    target = folder.parent / f"{folder.name}.zip"
    with atomic.atomic_open(target, "wb") as handle:
        with zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for path in files:
                archive.write(path, arcname=path.name)
    return target
