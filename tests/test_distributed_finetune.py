"""Fine-tuning on 2 CPU processes: ``accelerate launch --config_file accelerate_configs/cpu.yaml
scripts/run_glue.py``. Every dev example counted once, metrics equal a single-process
evaluation of the saved model, the schedule ends at 0 after the last step (with and without
``--max_steps``), one writer per output file, the saved model loads."""

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from ports import free_port
from test_runner import glue_argv, make_tiny_model, run_glue, write_rte

REPO = Path(__file__).resolve().parents[1]

# Installed in every launched process through PYTHONPATH: an audit hook that records which rank
# opens (for writing) or renames each file under WRITE_ROOT.
SITECUSTOMIZE = """
import os, sys
_root, _log = os.environ.get("WRITE_ROOT"), os.environ.get("WRITE_LOG")
if _root and _log:
    _fd = os.open(_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    _rank = os.environ.get("RANK", "0")
    os.write(_fd, f"{_rank}\\tSTART\\n".encode())  # each process says it is recording

    def _record(path):
        path = os.path.abspath(os.fsdecode(path))
        if path.startswith(_root):
            os.write(_fd, f"{_rank}\\t{path}\\n".encode())

    def _hook(event, args):
        if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            mode, flags = args[1], args[2]
            writing = any(c in mode for c in "wax+") if isinstance(mode, str) else bool(
                flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
            if writing:
                _record(args[0])
        elif event == "os.rename":
            _record(args[1])
        elif event == "os.mkdir":
            pass

    sys.addaudithook(_hook)
"""


def launch(tmp_path: Path, argv: list[str], log: Path) -> subprocess.CompletedProcess:
    hooks = tmp_path / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(hooks), str(REPO)]),
        WRITE_ROOT=str(tmp_path),
        WRITE_LOG=str(log),
        OMP_NUM_THREADS="1",
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
    )
    env.pop("ACCELERATE_USE_CPU", None)  # the config alone must give 2 processes
    accelerate = Path(sys.executable).parent / "accelerate"
    command = [
        str(accelerate),
        "launch",
        "--config_file",
        str(REPO / "accelerate_configs/cpu.yaml"),
    ]
    command += ["--main_process_port", str(free_port()), str(REPO / "scripts/run_glue.py"), *argv]
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def writers(log: Path) -> tuple[dict[str, set[str]], set[str]]:
    """{path: ranks that wrote it}, and the ranks that recorded at all."""
    out, started = defaultdict(set), set()
    for line in log.read_text().splitlines():
        rank, path = line.split("\t", 1)
        if path == "START":
            started.add(rank)
        else:
            out[path].add(rank)
    return out, started


def _logged_lrs(out: Path) -> dict[int, float]:
    state = json.loads((out / "trainer_state.json").read_text())
    return {h["step"]: h["learning_rate"] for h in state["log_history"] if "learning_rate" in h}


@pytest.mark.slow
def test_glue_on_two_cpu_processes(tmp_path, minilm_path):
    tiny = make_tiny_model(tmp_path / "tiny", minilm_path)
    rte = write_rte(tmp_path / "RTE", n_train=40, n_dev=13)  # 13: uneven over 2 x batch 4
    common = ["--per_device_eval_batch_size", "4", "--logging_steps", "1", "--save_steps", "4"]

    # 2 epochs: 40 examples / (2 processes x batch 4) = 5 steps per epoch
    out = tmp_path / "epochs"
    log = tmp_path / "writes-epochs.log"
    launch(tmp_path, glue_argv(tiny, rte, out, "--num_train_epochs", "2", *common), log)
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 10  # one process alone would take 20 steps
    assert "| world_size | 2 |" in (out / "README.md").read_text()
    results = json.loads((out / "all_results.json").read_text())
    assert results["eval_samples"] == 13  # each dev example once, the padding dropped
    assert len((out / "eval_predictions.tsv").read_text().splitlines()) == 1 + 13
    # the schedule spans the 10 real steps: warmup 1, then linear to 0 after the last one
    lrs = _logged_lrs(out)
    assert sorted(lrs) == list(range(1, 11))
    assert lrs[10] == pytest.approx(1e-3 * 1 / 9) and results["train_final_learning_rate"] == 0

    # one writer per file: each path under the run's folders was written by one rank only
    written, started = writers(log)
    assert {"0", "1"} <= started  # both ranks were watched
    shared = {p: r for p, r in written.items() if len(r) > 1}
    assert not shared, shared
    ours = [p for p in written if p.startswith(str(out))]
    assert any(p.endswith("eval_results.json") for p in ours)
    rank1 = sorted(p for p, r in written.items() if r == {"1"})
    # rank 1 writes at most its own RNG state into the checkpoints (torch.save writes it from
    # C++, unseen by the hook): no result, prediction, card or model file
    assert all("rng_state_1" in p for p in rank1), rank1
    cache = [p for p in written if "features" in p and p.endswith(".arrow")]
    assert cache and all(written[p] == {"0"} for p in cache)  # featurised once, by rank 0

    # the saved model loads; a single-process evaluation of it gives the same metrics
    from modeling import BertForSequenceClassification

    BertForSequenceClassification.from_pretrained(out)
    single = run_glue(
        glue_argv(out, rte, tmp_path / "single", "--do_train", "false")
        + ["--per_device_eval_batch_size", "5"]
    )
    for key in ("eval_accuracy", "eval_loss"):
        assert single[key] == pytest.approx(results[key], abs=1e-4), key
    assert single["eval_samples"] == 13

    # --max_steps 7 (crosses into the second epoch): the schedule ends at 0 at step 7
    out = tmp_path / "steps"
    launch(tmp_path, glue_argv(tiny, rte, out, "--max_steps", "7", *common), tmp_path / "w2.log")
    results = json.loads((out / "all_results.json").read_text())
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 7
    lrs = _logged_lrs(out)
    assert sorted(lrs) == list(range(1, 8)) and lrs[7] == pytest.approx(1e-3 / 6)
    assert results["train_final_learning_rate"] == 0 and results["eval_samples"] == 13
