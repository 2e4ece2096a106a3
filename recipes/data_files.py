"""Reading helpers shared by the task recipes."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from modeling.cli import UsageError


def read_text(path: str | Path, error: type[Exception] = UsageError) -> str:
    """The text of a UTF-8 file (a byte-order mark is dropped). A binary or non-UTF-8 file
    raises ``error`` naming the file and the line of the first bad byte."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"data file {path} not found")
    data = path.read_bytes()
    if b"\x00" in data[:65536]:
        line = data[: data.index(b"\x00")].count(b"\n") + 1
        raise error(f"{path}:{line}: binary data (NUL byte), not a text file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise error(
            f"{path}:{line}: not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start})"
        ) from None


def open_text(path: str | Path, error: type[Exception] = UsageError) -> io.StringIO:
    """:func:`read_text` as a file object (for ``csv`` readers)."""
    return io.StringIO(read_text(path, error), newline="")


def iter_json_values(
    path: str | Path, error: type[Exception] = UsageError
) -> Iterator[tuple[Any, int]]:
    """Yield ``(value, line)`` for each top-level JSON value of a file, ``line`` being where the
    value starts: JSON lines, one JSON document, or concatenated pretty-printed objects (the
    ``datasets`` fixtures). Invalid JSON raises ``error`` naming the file and line. A UTF-8 byte
    order mark is accepted."""
    path = Path(path)
    text = read_text(path, error)
    decoder, pos, line = json.JSONDecoder(), 0, 1
    while True:
        while pos < len(text) and text[pos].isspace():
            line += text[pos] == "\n"
            pos += 1
        if pos >= len(text):
            return
        try:
            value, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as err:
            raise error(f"{path}:{err.lineno}: invalid JSON ({err.msg})") from None
        yield value, line
        line += text.count("\n", pos, end)
        pos = end
