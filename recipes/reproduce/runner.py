"""Run a suite: its stages, then every (task, init, learning rate, seed) fine-tuning cell.

Each step calls the script a user would call (``scripts/pretrain.py``, ``scripts/run_glue.py``,
...), in a subprocess by default. Resumption is by files, so a killed study picks up where it
stopped when rerun with the same command:

* a stage is done when its ``done`` file exists; otherwise it reruns, with
  ``--resume_from_checkpoint latest`` when its ``resume`` folder holds ``checkpoint-*`` folders
  (``--overwrite_output_dir`` when it holds a killed run's files and no checkpoint);
* a cell is done when its ``cell.json`` exists (written after the script's metric was read);
  a cell folder with ``checkpoint-*`` folders restarts from the newest one
  (``--resume_from_checkpoint``); one with neither is a dead start and is cleared.

The learning rate of each (task, init) is chosen on dev: the grid runs on the suite's first
``grid_seeds`` seeds, the rate with the best median (``selection: median``) or best single run
(``selection: best``, the paper's protocol) wins, and the remaining seeds run at that rate.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .results import (
    MetricNotFound,
    read_metric,
    read_train_runtime,
    relative_to_cwd,
    write_plot,
    write_results_json,
    write_results_md,
)
from .suite import Init, Stage, Suite, SuiteError, Task

logger = logging.getLogger(__name__)
CELL_FILE = "cell.json"
STAGES_FILE = "stages.json"


class RunnerError(RuntimeError):
    """A step of the study failed; the message names it and its log file."""


@dataclass
class Cell:
    task: Task
    init: Init
    learning_rate: float
    seed: int
    init_path: str
    output_dir: Path

    @property
    def key(self) -> str:
        return f"{self.task.name}/{self.init.name}/lr{self.learning_rate:g}/seed{self.seed}"

    def hparams(self) -> dict:
        return {
            **self.task.hparams,
            **self.init.hparams,
            "learning_rate": self.learning_rate,
            "seed": self.seed,
        }


# --------------------------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------------------------


def _flags(values: dict) -> list[str]:
    out: list[str] = []
    for key, value in values.items():
        out.append(f"--{key}")
        if isinstance(value, (list, tuple)):
            out.extend(str(v) for v in value)
        elif isinstance(value, bool):
            out.append("true" if value else "false")
        else:
            out.append(f"{value:g}" if isinstance(value, float) else str(value))
    return out


def _expand(args: list[str], where: str, check: bool) -> list[str]:
    out = []
    for a in args:
        if any(ch in a for ch in "*?[") and not a.startswith("--"):
            found = sorted(glob.glob(a))
            if not found and check:
                raise RunnerError(f"{where}: no file matches {a}")
            out.extend(found or [a])
        else:
            out.append(a)
    return out


def _checkpoints(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []

    def step(p: Path) -> int:
        tail = p.name.split("-")[-1]
        return int(tail) if tail.isdigit() else -1

    return sorted((p for p in folder.glob("checkpoint-*") if p.is_dir() and step(p) >= 0), key=step)


def stage_command(stage: Stage, check: bool = True) -> list[str]:
    """The stage's command; a stage with a ``resume`` folder continues the run in it
    (``--resume_from_checkpoint latest``) or, when a killed run left no checkpoint there,
    replaces it (``--overwrite_output_dir``: the pretraining script refuses it otherwise)."""
    cmd = _expand(stage.command, f"stage {stage.name}", check)
    if stage.resume:
        folder = Path(stage.resume)
        if _checkpoints(folder):
            cmd += ["--resume_from_checkpoint", "latest"]
        elif folder.is_dir() and any(folder.iterdir()):
            cmd += ["--overwrite_output_dir"]
    return cmd


def cell_command(cell: Cell) -> list[str]:
    """Train, then evaluate on dev (the metric the study reads), into the cell's folder;
    continue from its newest checkpoint when a killed run left one."""
    cmd = [cell.task.script, *cell.task.args]
    cmd += ["--model_name_or_path", cell.init_path, "--output_dir", str(cell.output_dir)]
    cmd += ["--do_train", "true", "--do_eval", "true"]
    cmd += _flags(cell.hparams())
    found = _checkpoints(cell.output_dir)
    if found:
        cmd += ["--resume_from_checkpoint", str(found[-1])]
    return cmd


def printable(cmd: list[str]) -> str:
    """The command as a user types it: ``python`` before a script, paths inside the working
    directory relative to it (so tables do not carry one machine's folders)."""
    shown = ["python", *cmd] if cmd and cmd[0].endswith(".py") else cmd
    return " ".join(shlex.quote(relative_to_cwd(a)) for a in shown)


def execute(cmd: list[str], log_path: Path, in_process: bool) -> float:
    """Run one command (a ``.py`` script under this Python); return its wall seconds."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    if in_process and cmd[0].endswith(".py"):
        import runpy

        saved = sys.argv
        sys.argv = list(cmd)
        try:
            runpy.run_path(cmd[0], run_name="__main__")
        except SystemExit as err:
            if err.code not in (0, None):
                raise RunnerError(f"{printable(cmd)} exited with {err.code}") from None
        finally:
            sys.argv = saved
        return time.perf_counter() - start
    full = [sys.executable, *cmd] if cmd[0].endswith(".py") else cmd
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [os.getcwd(), os.environ.get("PYTHONPATH")])),
    }
    with open(log_path, "a", encoding="utf-8") as log:
        log.write(f"$ {printable(cmd)}\n")
        log.flush()
        proc = subprocess.run(full, stdout=log, stderr=subprocess.STDOUT, env=env)
    if proc.returncode != 0:
        tail = log_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:]
        raise RunnerError(
            f"{printable(cmd)} exited with {proc.returncode}; log {log_path}"
            + (f": {tail[0][:300]}" if tail else "")
        )
    return time.perf_counter() - start


# --------------------------------------------------------------------------------------------
# Random init
# --------------------------------------------------------------------------------------------


def write_random_init(source: str | Path, target: str | Path, seed: int) -> Path:
    """A checkpoint folder with ``source``'s config and tokenizer and freshly initialised weights
    (the model's own ``_init_weights``, seeded): the 'no pretraining' baseline."""
    import torch
    from transformers import AutoConfig, AutoTokenizer

    import modeling  # noqa: F401  (registers bert_toolkit with the Auto classes)
    from modeling import BertForPreTraining
    from modeling.atomic import atomic_dir

    config = AutoConfig.from_pretrained(source)
    tokenizer = AutoTokenizer.from_pretrained(source)
    torch.manual_seed(seed)
    model = BertForPreTraining(modeling.BertConfig(**config.to_dict()))
    with atomic_dir(target) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    return Path(target)


# --------------------------------------------------------------------------------------------
# The study
# --------------------------------------------------------------------------------------------


class Study:
    """One suite's execution state in its output folder."""

    def __init__(self, suite: Suite, in_process: bool = False, echo=print):
        self.suite = suite
        self.in_process = in_process
        self.echo = echo
        self.out = suite.output_dir
        self.commands: list[str] = []
        self.pending = 0  # steps a dry run found not done yet

    # paths
    def init_path(self, init: Init) -> str:
        if init.random_init_of:
            return str(self.out / "inits" / init.name)
        return init.path

    def cell(self, task: Task, init: Init, lr: float, seed: int) -> Cell:
        folder = self.out / "runs" / task.name / init.name / f"lr{lr:g}-seed{seed}"
        return Cell(task, init, lr, seed, self.init_path(init), folder)

    # planning
    def grid_cells(self, task: Task, init: Init) -> list[Cell]:
        seeds = self.suite.grid_seed_list(task)
        return [
            self.cell(task, init, lr, s) for lr in self.suite.lr_grid(task, init) for s in seeds
        ]

    def choose_lr(self, task: Task, init: Init) -> float | None:
        """The grid's winner on dev (None while a grid cell is missing)."""
        best_lr, best_score = None, None
        for lr in self.suite.lr_grid(task, init):
            values = []
            for s in self.suite.grid_seed_list(task):
                record = load_cell(self.cell(task, init, lr, s))
                if record is None:
                    return None
                values.append(record["value"])
            score = statistics.median(values) if self.suite.selection == "median" else max(values)
            if best_score is None or score > best_score:
                best_lr, best_score = lr, score
        return best_lr

    # execution
    def run_stage(self, stage: Stage, dry_run: bool) -> None:
        done = Path(stage.done).exists()
        cmd = stage_command(stage, check=not dry_run and not done)
        self.commands.append(printable(cmd))
        if dry_run:
            self.pending += not done
            self.echo(f"[stage {stage.name}] {'done' if done else 'to run'}: {printable(cmd)}")
            return
        if done:
            self.echo(f"[stage {stage.name}] done ({stage.done} exists)")
            return
        self.echo(f"[stage {stage.name}] running: {printable(cmd)}")
        seconds = execute(cmd, self.out / "logs" / f"stage-{stage.name}.log", self.in_process)
        if not Path(stage.done).exists():
            raise RunnerError(f"stage {stage.name} finished but {stage.done} was not written")
        self.record_stage(stage.name, seconds)

    def record_stage(self, name: str, seconds: float, runs: int = 1) -> None:
        from modeling import atomic

        path = self.out / STAGES_FILE
        times = json.loads(path.read_text()) if path.is_file() else {}
        entry = times.setdefault(name, {"seconds": 0.0, "runs": 0})
        entry["seconds"] += seconds
        entry["runs"] += runs
        atomic.write_json(path, times)

    def ensure_random_inits(self, dry_run: bool) -> None:
        for init in self.suite.inits.values():
            if not init.random_init_of:
                continue
            target = Path(self.init_path(init))
            source = self.init_path(self.suite.inits[init.random_init_of])
            if dry_run:
                self.echo(
                    f"[init {init.name}] random weights, config and tokenizer of {source} -> {target}"
                )
                continue
            if not (target / "config.json").is_file():
                if not (Path(source) / "config.json").is_file() and Path(source).exists():
                    raise RunnerError(f"init {init.name}: {source} has no config.json")
                write_random_init(source, target, seed=self.suite.seeds[0])
                self.echo(f"[init {init.name}] wrote random weights to {target}")

    def run_cell(self, cell: Cell, dry_run: bool) -> dict | None:
        record = load_cell(cell)
        cmd = cell_command(cell)
        self.commands.append(printable(cmd))
        if dry_run:
            self.pending += record is None
            self.echo(f"[{cell.key}] {'done' if record else 'to run'}: {printable(cmd)}")
            return record
        if record is not None:
            return record
        try:  # finished earlier but killed before cell.json was written
            value = read_metric(cell.output_dir, cell.task.metric)
            seconds = None
        except MetricNotFound:
            if cell.output_dir.exists() and not _checkpoints(cell.output_dir):
                shutil.rmtree(cell.output_dir)  # a dead start: nothing to resume from
            self.echo(f"[{cell.key}] running")
            log = cell.output_dir.parent / f"{cell.output_dir.name}.log"
            seconds = execute(cmd, log, self.in_process)
            try:
                value = read_metric(cell.output_dir, cell.task.metric)
            except MetricNotFound as err:
                raise RunnerError(f"[{cell.key}] finished without a result: {err}") from None
            self.record_stage(f"fine-tune {cell.task.name}", seconds)
        record = {
            "task": cell.task.name,
            "metric": cell.task.metric,
            "init": cell.init.name,
            "seed": cell.seed,
            "learning_rate": cell.learning_rate,
            "hparams": cell.hparams(),
            "value": value,
            "train_runtime": read_train_runtime(cell.output_dir),
            "wall_seconds": seconds,
            "model_name_or_path": cell.init_path,
            "output_dir": str(cell.output_dir),
            "command": printable(cmd),
        }
        from modeling import atomic

        atomic.write_json(cell.output_dir / CELL_FILE, record)
        self.echo(f"[{cell.key}] {cell.task.metric} = {value:.2f}")
        return record

    def run(self, dry_run: bool = False) -> list[dict]:
        for stage in self.suite.stages:
            self.run_stage(stage, dry_run)
        self.ensure_random_inits(dry_run)
        records: list[dict] = []
        for task in self.suite.tasks.values():
            for name in self.suite.init_names(task):
                init = self.suite.inits[name]
                for cell in self.grid_cells(task, init):
                    self.run_cell(cell, dry_run)
                lr = self.choose_lr(task, init)
                rest = [s for s in task.seeds if s not in self.suite.grid_seed_list(task)]
                if lr is None:  # dry run before the grid has run
                    self.pending += len(rest)
                    if rest:
                        self.echo(
                            f"[{task.name}/{init.name}] then seeds {rest} at the grid's best "
                            "learning rate on dev"
                        )
                    continue
                for seed in task.seeds:
                    self.run_cell(self.cell(task, init, lr, seed), dry_run)
                cells = {c.output_dir: c for c in self.grid_cells(task, init)}
                cells.update(
                    {c.output_dir: c for c in (self.cell(task, init, lr, s) for s in task.seeds)}
                )
                for cell in cells.values():
                    record = load_cell(cell)
                    if record is not None:
                        record["reported"] = cell.learning_rate == lr and cell.seed in task.seeds
                        records.append(record)
        return records


def load_cell(cell: Cell) -> dict | None:
    path = cell.output_dir / CELL_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return None


# --------------------------------------------------------------------------------------------
# Pretraining curve
# --------------------------------------------------------------------------------------------


def pretraining_curve(run_dir: str | Path) -> tuple[list[dict], dict]:
    """Held-out evaluations of a pretraining run against tokens seen, and its summary.

    Tokens seen are ``tokens_seen`` where the log has it, else the logged throughput integrated
    over the logged wall time (non-padding tokens)."""
    run_dir = Path(run_dir)
    log = run_dir / "log.jsonl"
    if not log.is_file():
        return [], {}
    tokens, last_elapsed, curve = 0.0, 0.0, []
    for line in log.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        if "tokens_per_second" in r and "elapsed_seconds" in r:
            if r["elapsed_seconds"] >= last_elapsed:
                tokens += r["tokens_per_second"] * (r["elapsed_seconds"] - last_elapsed)
            last_elapsed = r["elapsed_seconds"]
        if "tokens_seen" in r:
            tokens = float(r["tokens_seen"])
        if r.get("eval_mlm_accuracy") is not None:
            curve.append(
                {
                    "step": r["step"],
                    "tokens": tokens,
                    "mlm_accuracy": r["eval_mlm_accuracy"],
                    "nsp_accuracy": r.get("eval_nsp_accuracy"),
                }
            )
    info: dict = {}
    results = run_dir / "train_results.json"
    if results.is_file():
        data = json.loads(results.read_text(encoding="utf-8"))
        info = {
            "steps": data.get("step"),
            "train_seconds": data.get("train_seconds"),
            "unigram_baseline": (data.get("unigram_baseline") or {}).get("accuracy"),
        }
    if curve:
        info.update(
            tokens_seen=curve[-1]["tokens"],
            heldout_mlm_accuracy=curve[-1]["mlm_accuracy"],
            heldout_nsp_accuracy=curve[-1]["nsp_accuracy"],
        )
    return curve, info


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def run_suite(
    suite: Suite,
    dry_run: bool = False,
    in_process: bool = False,
    echo=print,
    report_only: bool = False,
) -> dict:
    """Run (or, with ``dry_run``, print) the whole study; write results.json, RESULTS.md and
    results.png into the suite's output folder. ``report_only``: run nothing, write the three
    files from the runs finished so far (safe beside a study that is running), marked partial
    while any stage or run is still to do. Returns paths and records."""
    if dry_run:
        study = Study(suite, in_process=in_process, echo=echo)
        study.run(dry_run=True)
        return {"commands": study.commands}
    if report_only:
        if not suite.output_dir.is_dir():
            raise SuiteError(f"{suite.output_dir}: no study here yet (nothing to report)")
        study = Study(suite, echo=lambda *_: None)
        records = study.run(dry_run=True)
        info = _write_reports(suite, study, records, partial=study.pending > 0)
    else:
        study = Study(suite, in_process=in_process, echo=echo)
        suite.output_dir.mkdir(parents=True, exist_ok=True)
        with _lock(suite.output_dir):
            records = study.run()
            info = _write_reports(suite, study, records, partial=False)
    out = suite.output_dir
    echo(f"results: {out / 'results.json'}, {out / 'RESULTS.md'}, {out / 'results.png'}")
    return {"records": records, "output_dir": str(out), "pretraining": info}


def _write_reports(suite: Suite, study: Study, records: list[dict], partial: bool) -> dict:
    out = suite.output_dir
    stages_path = out / STAGES_FILE
    stages = json.loads(stages_path.read_text()) if stages_path.is_file() else {}
    pre_stage = next((s for s in suite.stages if s.name == "pretrain" and s.resume), None)
    curve, info = pretraining_curve(pre_stage.resume) if pre_stage else ([], {})
    write_results_json(out / "results.json", records)
    write_results_md(
        out / "RESULTS.md", suite, records, stages, study.commands, info or None, partial=partial
    )
    write_plot(out / "results.png", suite, records, curve, info.get("unigram_baseline"))
    return info


class _lock:
    """One study per output folder at a time: a second process stops with one line."""

    def __init__(self, folder: Path):
        self.path = folder / ".lock"

    def __enter__(self):
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            pid = self.path.read_text().strip() or "?"
            if pid.isdigit() and not _alive(int(pid)):
                self.path.unlink()
                return self.__enter__()
            raise SuiteError(
                f"{self.path}: another run (pid {pid}) is using this output folder"
            ) from None
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        return self

    def __exit__(self, *exc):
        self.path.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
