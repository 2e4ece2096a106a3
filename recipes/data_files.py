"""Reading helpers shared by the task recipes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from modeling.cli import UsageError


def iter_json_values(
    path: str | Path, error: type[Exception] = UsageError
) -> Iterator[tuple[Any, int]]:
    """Yield ``(value, line)`` for each top-level JSON value of a file, ``line`` being where the
    value starts: JSON lines, one JSON document, or concatenated pretty-printed objects (the
    ``datasets`` fixtures). Invalid JSON raises ``error`` naming the file and line. A UTF-8 byte
    order mark is accepted."""
    path = Path(path)
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise error(
            f"{path}:{line}: not UTF-8 text (byte {raw[err.start]:#04x} at offset {err.start})"
        ) from None
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
