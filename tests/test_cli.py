"""YAML recipes overridden by flags, and one-line errors for bad configuration."""

import subprocess
import sys
from dataclasses import dataclass, field

import pytest

from modeling.cli import UsageError, parse_args


@dataclass
class Args:
    learning_rate: float = field(default=1e-4, metadata={"help": "peak lr"})
    steps: int = 10
    name: str | None = None
    use_thing: bool = False
    grid: list[float] = field(default_factory=list)


def test_yaml_values_then_flags_override(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("learning_rate: 3.0e-4\nsteps: 20\ngrid: [1, 2.5]\nuse_thing: true\n")
    (args,) = parse_args([Args], ["--config", str(recipe), "--steps", "7"])
    assert args == Args(learning_rate=3e-4, steps=7, grid=[1.0, 2.5], use_thing=True)
    (args,) = parse_args([Args], ["--use_thing", "false", "--grid", "1e-3", "2e-3"])
    assert args.use_thing is False and args.grid == [1e-3, 2e-3] and args.steps == 10


def test_unknown_yaml_field_names_file_and_key(tmp_path):
    recipe = tmp_path / "bad.yaml"
    recipe.write_text("learning_rat: 1\n")
    with pytest.raises(UsageError, match=r"bad.yaml: unknown field 'learning_rat'"):
        parse_args([Args], ["--config", str(recipe)])


def test_wrong_type_in_yaml_is_reported(tmp_path):
    recipe = tmp_path / "bad.yaml"
    recipe.write_text("steps: ten\n")
    with pytest.raises(UsageError, match=r"field 'steps': expected int, got 'ten'"):
        parse_args([Args], ["--config", str(recipe)])
    with pytest.raises(UsageError, match="not found"):
        parse_args([Args], ["--config", str(tmp_path / "missing.yaml")])


def test_unknown_flag_exits_with_usage_error():
    code = "from dataclasses import dataclass\nfrom modeling.cli import parse_args\n@dataclass\nclass A:\n    x: int = 1\nparse_args([A], ['--y', '2'])"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 2 and "unrecognized arguments: --y 2" in result.stderr
