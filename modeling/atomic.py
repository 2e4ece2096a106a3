"""Atomic writes: a file or folder appears under its final name only once it is complete.

Checkpoints, data shards and prediction files are written under a temporary name in the same
folder and renamed at the end, so a crash never leaves something that looks finished. When the
target already exists it is replaced only after the new version is complete.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_dir(target: str | Path) -> Iterator[Path]:
    """Yield a temporary folder beside ``target``; on success it replaces ``target``.

    On an exception the temporary folder is removed and ``target`` is left as it was.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = target.parent / f".{target.name}.old-{os.getpid()}"
    if target.exists():
        target.rename(old)
    tmp.rename(target)
    _fsync_dir(target.parent)
    if old.exists():
        shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def atomic_open(target: str | Path, mode: str = "w", **kwargs: Any):
    """Open a temporary file beside ``target``; it replaces ``target`` when closed cleanly."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}"
    try:
        with open(tmp, mode, **kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text(target: str | Path, text: str) -> None:
    with atomic_open(target, "w", encoding="utf-8") as handle:
        handle.write(text)


def write_json(target: str | Path, data: Any, indent: int | None = 2) -> None:
    write_text(target, json.dumps(data, indent=indent, ensure_ascii=False) + "\n")
