"""Command-line plumbing shared by every script: YAML recipes overridden by flags, one-line errors.

``parse_args(MyArgs)`` builds an argparse parser from dataclasses (one flag per field, help from
the field's ``metadata["help"]``). ``--config recipe.yaml`` supplies values for any field; flags
given on the command line win. An unknown YAML key or a value of the wrong type is an error that
names the file and the key. ``main_guard`` turns expected errors into one line and exit code 2,
and ends a multi-process run without the interpreter teardown that can abort it (see
:func:`exit_distributed_run`).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import dataclasses
import json
import os
import sys
import time
import types
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


class UsageError(ValueError):
    """A bad configuration or input that the user can fix; printed as one line."""


def _field_type(dc, field: dataclasses.Field):
    hint = typing.get_type_hints(dc)[field.name]
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        hint = args[0] if len(args) == 1 else str
        origin = typing.get_origin(hint)
    if origin in (list, tuple):
        (inner, *_) = typing.get_args(hint) or (str,)
        return list, inner
    return hint, None


def _str2bool(value: str) -> bool:
    if isinstance(value, bool):
        return value
    lowered = value.lower()
    if lowered in ("1", "true", "yes", "y", "on"):
        return True
    if lowered in ("0", "false", "no", "n", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected a boolean, got {value!r}")


def _coerce(value: Any, kind, inner, where: str):
    """Check/convert a YAML value to the field's type."""
    try:
        if kind is list:
            if isinstance(value, str):
                value = value.split(",")
            if not isinstance(value, (list, tuple)):
                value = [value]
            return [inner(v) if inner in (int, float, str) else v for v in value]
        if kind is bool:
            return _str2bool(value) if isinstance(value, str) else bool(value)
        if kind in (int, float, str) and value is not None:
            if kind is int and isinstance(value, float) and not value.is_integer():
                raise ValueError
            return kind(value)
        return value
    except (TypeError, ValueError, argparse.ArgumentTypeError):
        raise UsageError(
            f"{where}: expected {getattr(kind, '__name__', kind)}, got {value!r}"
        ) from None


def build_parser(
    dataclass_types: Sequence[type], description: str | None = None
) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument("--config", type=str, default=None, help="YAML recipe; flags override it")
    for dc in dataclass_types:
        group = parser.add_argument_group(dc.__name__)
        for field in dataclasses.fields(dc):
            if not field.init:
                continue
            kind, inner = _field_type(dc, field)
            default = (
                field.default
                if field.default is not dataclasses.MISSING
                else field.default_factory()
                if field.default_factory is not dataclasses.MISSING
                else None
            )
            kwargs: dict[str, Any] = dict(
                default=argparse.SUPPRESS,
                help=f"{field.metadata.get('help', '')} (default: {default!r})",
            )
            if kind is list:
                kwargs.update(nargs="+", type=inner if inner in (int, float, str) else str)
            elif kind is bool:
                kwargs.update(nargs="?", const=True, type=_str2bool)
            elif kind in (int, float, str):
                kwargs.update(type=kind)
            if "choices" in field.metadata:
                kwargs["choices"] = field.metadata["choices"]
            group.add_argument(f"--{field.name}", **kwargs)
    parser.formatter_class = argparse.HelpFormatter
    return parser


def load_yaml(path: str | Path) -> dict[str, Any]:
    import yaml

    path = Path(path)
    if not path.is_file():
        raise UsageError(f"config file {path} not found")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise UsageError(f"{path}: invalid YAML ({err})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a mapping of field: value, got {type(data).__name__}")
    return data


def yaml_defaults(path: str | Path, dataclass_types: Sequence[type]) -> dict[str, Any]:
    """The values of a YAML recipe, checked against the fields of ``dataclass_types``: an
    unknown key or a value of the wrong type is a :class:`UsageError` naming the file and key.
    Scalars of int/float/bool/list fields are converted; other values pass through."""
    known = {f.name: (dc, f) for dc in dataclass_types for f in dataclasses.fields(dc) if f.init}
    values: dict[str, Any] = {}
    for key, value in load_yaml(path).items():
        if key not in known:
            raise UsageError(f"{path}: unknown field {key!r} (see --help for the fields)")
        dc, field = known[key]
        try:
            kind, inner = _field_type(dc, field)
        except (NameError, TypeError):  # annotations that cannot be resolved: pass through
            kind, inner = object, None
        if kind in (int, float, bool, list):
            value = _coerce(value, kind, inner, where=f"{path}: field {key!r}")
        values[key] = value
    return values


def parse_args(
    dataclass_types: Sequence[type],
    argv: Sequence[str] | None = None,
    description: str | None = None,
    overrides: dict[str, Any] | None = None,
) -> tuple:
    """Parse YAML (``--config``) + flags into one instance of each dataclass, in order."""
    parser = build_parser(dataclass_types, description)
    namespace = parser.parse_args(argv)
    given = vars(namespace)
    config_path = given.pop("config", None)
    values: dict[str, Any] = dict(overrides or {})
    if config_path:
        values.update(yaml_defaults(config_path, dataclass_types))
    values.update(given)
    out = []
    for dc in dataclass_types:
        names = {f.name for f in dataclasses.fields(dc) if f.init}
        try:
            out.append(dc(**{k: v for k, v in values.items() if k in names}))
        except (TypeError, ValueError) as err:
            raise UsageError(f"{dc.__name__}: {err}") from None
    return tuple(out)


def report_error(message: str, code: int) -> None:
    """Print ``message`` as the one line a user reads, and exit with ``code``.

    Under a launcher (``accelerate launch``, ``torchrun``) every process meets the same
    configuration error. Each writes it to the launcher's error file, so that the failure
    summary the launcher prints last ends with it (instead of a pointer to the docs; the
    launcher's own traceback cannot be avoided). Process 0 prints it; the others stay silent
    and wait, since the launcher stops them all once one fails (after up to 5 s)."""
    error_file = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if error_file:
        with contextlib.suppress(OSError):
            Path(error_file).write_text(
                json.dumps({"message": message, "timestamp": int(time.time())})
            )
    if not (error_file and int(os.environ.get("RANK", "0")) > 0):
        print(message, file=sys.stderr, flush=True)
    else:  # an error of this process only still ends up in the launcher's summary
        time.sleep(15)
    sys.exit(code)


def exit_distributed_run() -> None:
    """End a process of a finished multi-process run: leave the process group, run the ``atexit``
    handlers (wandb's finish among them), flush, and exit with status 0 without the
    interpreter's teardown. No-op when no process group was started.

    Why: a gloo worker thread drops a finished collective's tensors just after the collective
    returns, and that needs the GIL. When the main thread reaches interpreter finalization first
    (a script ends right after its last barrier), the worker thread is killed while unwinding
    C++ and the process aborts ("terminate called without an active exception", SIGABRT) after
    every file has been written. ``destroy_process_group`` alone does not prevent it: in the
    aborted pretraining runs the group's worker threads were still alive at finalization, held
    by objects that only the final garbage collection frees. ``tests/test_cli.py`` reproduces
    it."""
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return
    dist.destroy_process_group()
    atexit._run_exitfuncs()  # logging's shutdown is one of them
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(0)


def main_guard(main: Callable[[], Any]) -> None:
    """Run ``main``; print expected errors as one line on stderr and exit with status 2. A
    finished multi-process run exits through :func:`exit_distributed_run`."""
    try:
        main()
    except (UsageError, FileNotFoundError, NotADirectoryError) as err:
        report_error(f"error: {err}", 2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    exit_distributed_run()
