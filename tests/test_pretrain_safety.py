"""Hostile use of the pretraining loop: reused output folders, resumes with other settings,
stale or broken data caches, corrupt checkpoints, binary input, `accelerate launch` errors,
and the determinism of data built on the fly. Each refusal is one line, before any work."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from ports import free_port
from test_pretrain import CORPUS, PY, REPO, TINY, _args, _losses, _run

from modeling.cli import UsageError


def _tiny(tiny_data, out, **kw):
    """One phase, 4 steps, a checkpoint every 2: a couple of seconds."""
    base = dict(
        train_data=[str(tiny_data / "d64")],
        phase_fractions=[1.0],
        max_steps=4,
        train_batch_size=[4],
        gradient_accumulation_steps=[1],
        save_steps=2,
    )
    return _args(tiny_data, out, **{**base, **kw})


def _raw_args(out, corpus, **kw):
    from modeling.pretraining_args import PretrainingArguments

    base = dict(
        TINY,
        train_data=[str(corpus)],
        max_seq_length=[64],
        tokenizer_vocab_size=300,
        num_validation_docs=2,
        max_steps=2,
        train_batch_size=[4],
        output_dir=str(out),
    )
    return PretrainingArguments(**{**base, **kw})


def _checkpoints(out):
    return sorted(p.name for p in Path(out).glob("checkpoint-*"))


# ------------------------------------------------------------------ output folders and resume
def test_new_run_in_a_used_folder_is_refused_then_replaced_on_request(tiny_data, tmp_path):
    """The reproduction: an 8-step run leaves checkpoints 4 and 8; a 2-step run in the same
    folder used to prune its own checkpoint-2 (the highest steps were the old run's) and fail
    at the end on checkpoint-0000002/model."""
    from modeling.pretraining import pretrain

    pretrain(_tiny(tiny_data, tmp_path, max_steps=8, save_steps=4))
    assert _checkpoints(tmp_path) == ["checkpoint-0000004", "checkpoint-0000008"]
    before = (tmp_path / "log.jsonl").read_text()
    with pytest.raises(
        UsageError, match=r"holds another run \(checkpoint-0000004, .*--overwrite_output_dir"
    ):
        pretrain(_tiny(tiny_data, tmp_path, max_steps=2))
    assert (tmp_path / "log.jsonl").read_text() == before  # nothing touched
    assert _checkpoints(tmp_path) == ["checkpoint-0000004", "checkpoint-0000008"]

    result = pretrain(_tiny(tiny_data, tmp_path, max_steps=2, overwrite_output_dir=True))
    assert result["step"] == 2 and result["stop_reason"] == "max_steps"
    assert _checkpoints(tmp_path) == ["checkpoint-0000002"]  # the old run is gone, not mixed
    assert sorted(_losses(tmp_path)) == [1, 2]
    assert (tmp_path / "model" / "model.safetensors").is_file()


def test_pruning_never_removes_a_newer_checkpoint(tmp_path):
    from modeling.checkpointing import TRAINER_STATE, prune

    for step in (2, 4, 6, 8):
        (tmp_path / f"checkpoint-{step:07d}").mkdir()
        (tmp_path / f"checkpoint-{step:07d}" / TRAINER_STATE).write_text("{}")
    # checkpoint-6 just written (a resumed run): 8 is newer and stays
    assert [p.name for p in prune(tmp_path, 6, limit=2)] == ["checkpoint-0000002"]
    assert _checkpoints(tmp_path) == [f"checkpoint-{s:07d}" for s in (4, 6, 8)]
    assert prune(tmp_path, 4, limit=1) == [] and len(_checkpoints(tmp_path)) == 3
    assert len(prune(tmp_path, 8, limit=1)) == 2 and _checkpoints(tmp_path) == [
        "checkpoint-0000008"
    ]


def test_latest_without_a_checkpoint_is_an_error_auto_starts_fresh(tiny_data, tmp_path):
    from modeling.pretraining import pretrain

    typo = tmp_path / "ouput"
    with pytest.raises(UsageError, match=r"resume_from_checkpoint=latest: no checkpoint in"):
        pretrain(_tiny(tiny_data, typo, resume_from_checkpoint="latest"))
    assert not typo.exists()
    result = pretrain(
        _tiny(tiny_data, tmp_path / "auto", max_steps=2, resume_from_checkpoint="auto")
    )
    assert result["step"] == 2
    # and auto resumes when there is one: nothing left to do at max_steps
    again = pretrain(
        _tiny(tiny_data, tmp_path / "auto", max_steps=2, resume_from_checkpoint="auto")
    )
    assert again["step"] == 2 and sorted(_losses(tmp_path / "auto")) == [1, 2]


@pytest.fixture(scope="module")
def stopped_run(tiny_data, tmp_path_factory):
    """A run stopped at step 2 of 4 (checkpoint-0000002), copied by each test that breaks it."""
    from modeling.pretraining import pretrain

    out = tmp_path_factory.mktemp("stopped")
    pretrain(_tiny(tiny_data, out, stop_at_step=2))
    return out


def _copy(stopped_run, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(stopped_run, out)
    return out


def test_checkpoint_without_trainer_state_is_an_error(tiny_data, stopped_run, tmp_path):
    from modeling.pretraining import pretrain

    out = _copy(stopped_run, tmp_path)
    (out / "checkpoint-0000002" / "trainer_state.json").unlink()
    with pytest.raises(UsageError, match=r"checkpoint-0000002 is incomplete \(no trainer_state"):
        pretrain(_tiny(tiny_data, out, resume_from_checkpoint="latest"))
    # naming the folder is refused the same way; a fresh start needs --overwrite_output_dir
    with pytest.raises(UsageError, match="is incomplete"):
        pretrain(_tiny(tiny_data, out, resume_from_checkpoint=str(out / "checkpoint-0000002")))
    with pytest.raises(UsageError, match="holds another run"):
        pretrain(_tiny(tiny_data, out))


def test_resume_with_other_settings_names_each_difference(tiny_data, stopped_run, tmp_path):
    from modeling.checkpointing import read_trainer_state, resume_mismatches
    from modeling.pretraining import pretrain

    out = _copy(stopped_run, tmp_path)
    changed = _tiny(
        tiny_data, out, resume_from_checkpoint="latest", learning_rate=1e-3,
        train_batch_size=[8], seed=4, logging_steps=2, save_total_limit=5,
    )  # fmt: skip
    with pytest.raises(UsageError) as err:
        pretrain(changed)
    message = str(err.value)
    assert "\n" not in message
    for part in ("train_batch_size: [4] -> [8]", "learning_rate: 0.002 -> 0.001", "seed: 3 -> 4",
                 "--ignore_resume_mismatch"):  # fmt: skip
        assert part in message, message
    assert "logging_steps" not in message and "save_total_limit" not in message  # harmless
    assert sorted(_losses(out)) == [1, 2]  # nothing ran
    # the process count and precision come from the launch, not the arguments
    saved = read_trainer_state(out / "checkpoint-0000002")
    facts = {"num_processes": 2, "mixed_precision": "no"}
    assert resume_mismatches(saved, _tiny(tiny_data, out), facts) == ["num_processes: 1 -> 2"]
    # a different architecture cannot be forced
    with pytest.raises(UsageError, match="holds another model or optimizer.*hidden_size: 32 -> 64"):
        pretrain(_tiny(tiny_data, out, resume_from_checkpoint="latest", hidden_size=64,
                       ignore_resume_mismatch=True))  # fmt: skip


def test_forced_resume_uses_the_new_learning_rate(tiny_data, stopped_run, tmp_path):
    """A saved optimizer and schedule restore the saved rate: with --ignore_resume_mismatch
    the new one must take effect (it used to be ignored silently)."""
    from modeling.optim import lr_factor
    from modeling.pretraining import pretrain

    out = _copy(stopped_run, tmp_path)
    pretrain(_tiny(tiny_data, out, resume_from_checkpoint="latest", learning_rate=5e-4,
                   ignore_resume_mismatch=True))  # fmt: skip
    rows = [json.loads(x) for x in (out / "log.jsonl").read_text().splitlines()]
    lrs = {r["step"]: r["learning_rate"] for r in rows if "learning_rate" in r}
    assert lrs[2] == pytest.approx(2e-3 * lr_factor(1, "bert", 2, 4))  # before: the old rate
    assert lrs[3] == pytest.approx(5e-4 * lr_factor(2, "bert", 2, 4))
    assert lrs[4] == pytest.approx(5e-4 * lr_factor(3, "bert", 2, 4))


def test_resume_on_other_data_is_refused(tiny_data, stopped_run, tmp_path):
    from modeling.pretraining import pretrain

    moved = tmp_path / "moved"
    shutil.copytree(tiny_data / "d64", moved)
    # the same data at another place (another machine, say) resumes
    out = _copy(stopped_run, tmp_path)
    assert (
        pretrain(_tiny(tiny_data, out, resume_from_checkpoint="latest", train_data=[str(moved)]))[
            "step"
        ]
        == 4
    )
    # other content: refused, naming the phase
    meta = json.loads((moved / "metadata.json").read_text())
    meta["summary"]["splits"]["train"]["instances"] += 1
    (moved / "metadata.json").write_text(json.dumps(meta))
    shutil.rmtree(out)
    out = _copy(stopped_run, tmp_path)
    with pytest.raises(UsageError, match=r"was trained on other data \(train_data\[0\]=.*moved\)"):
        pretrain(_tiny(tiny_data, out, resume_from_checkpoint="latest", train_data=[str(moved)]))
    assert sorted(_losses(out)) == [1, 2]


def test_missing_rng_state_warns_that_the_resume_is_not_exact(
    tiny_data, stopped_run, tmp_path, caplog
):
    from modeling.pretraining import pretrain

    out = _copy(stopped_run, tmp_path)
    (out / "checkpoint-0000002" / "state" / "random_states_0.pkl").unlink()
    with caplog.at_level("WARNING", logger="modeling.pretraining"):
        result = pretrain(_tiny(tiny_data, out, resume_from_checkpoint="latest"))
    assert result["step"] == 4
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert any("will not be exact" in r.getMessage() for r in warnings), caplog.text


@pytest.mark.parametrize(
    "victim", ["state/optimizer.bin", "state/pytorch_model.bin", "trainer_state.json"]
)
def test_corrupt_checkpoint_is_one_line(tiny_data, stopped_run, tmp_path, victim):
    from modeling.pretraining import pretrain

    out = _copy(stopped_run, tmp_path)
    path = out / "checkpoint-0000002" / victim
    assert path.is_file(), sorted(p.name for p in path.parent.iterdir())
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    with pytest.raises(UsageError, match=r"cannot be loaded|unreadable") as err:
        pretrain(_tiny(tiny_data, out, resume_from_checkpoint="latest"))
    assert "\n" not in str(err.value) and str(out / "checkpoint-0000002") in str(err.value)


def test_bad_paths_are_refused_before_any_work(tiny_data, tmp_path):
    from modeling.pretraining import pretrain

    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(UsageError, match=rf"output_dir: {a_file} is a file"):
        pretrain(_tiny(tiny_data, a_file))
    with pytest.raises(UsageError, match=r"model_name_or_path: .*nope is not a model folder"):
        pretrain(_tiny(tiny_data, tmp_path / "o", model_name_or_path=str(tmp_path / "nope")))
    with pytest.raises(UsageError, match=r"model_name_or_path: cannot load nobody/no-such-model: "):
        pretrain(_tiny(tiny_data, tmp_path / "hub", model_name_or_path="nobody/no-such-model"))
    binary = tmp_path / "junk.txt"
    binary.write_bytes(bytes(range(256)) * 64)
    with pytest.raises(UsageError, match=r"train_data\[0\]: .*junk.txt is binary, not text"):
        pretrain(_raw_args(tmp_path / "o", binary))
    latin = tmp_path / "latin.txt"
    latin.write_bytes("caf\xe9 au lait. ".encode("latin-1") * 100)
    with pytest.raises(UsageError, match=r"latin.txt is not UTF-8 text \(byte 3\)"):
        pretrain(_raw_args(tmp_path / "o", latin))
    assert not (tmp_path / "o").exists() and not list((tmp_path / "hub").glob("checkpoint-*"))


def test_script_errors_are_one_line(tiny_data, tmp_path):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00\x01\x02" * 1000)
    proc = _run([PY, "scripts/pretrain.py", "--train_data", str(junk), "--output_dir",
                 str(tmp_path / "o")], timeout=120)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: train_data[0]: {junk} is binary, not text (NUL byte at 0)"
    ]


@pytest.mark.slow
def test_resume_on_more_processes_is_refused_in_one_line_under_accelerate_launch(
    tiny_data, stopped_run, tmp_path
):
    """The reproduction: a 1-process checkpoint resumed by 2 processes used to be accepted
    silently. The refusal is the first line, printed once, and ends the launcher's summary."""
    import dataclasses

    out = _copy(stopped_run, tmp_path)
    recipe = tmp_path / "recipe.yaml"
    settings = dataclasses.asdict(_tiny(tiny_data, out, resume_from_checkpoint="latest"))
    recipe.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in settings.items()))
    launcher = Path(PY).with_name("accelerate")
    proc = _run(
        [str(launcher), "launch", "--config_file", "accelerate_configs/cpu.yaml",
         "--main_process_port", str(free_port()), "scripts/pretrain.py", "--config", str(recipe)],
        timeout=300,
    )  # fmt: skip
    expected = (
        f"error: resume_from_checkpoint: {out / 'checkpoint-0000002'} was saved with other "
        "settings (num_processes: 1 -> 2): the run would not continue exactly; pass "
        "--ignore_resume_mismatch to continue with the new values"
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0
    assert lines[0] == expected, proc.stderr[-3000:]
    assert lines.count(expected) == 1  # process 0 prints it, process 1 stays silent
    assert lines[-2].strip() == f"traceback : {expected}", proc.stderr[-3000:]
    assert sorted(_losses(out)) == [1, 2]  # nothing ran


# ------------------------------------------------------------------- data built on the fly
def _dataset_rows(folder):
    from modeling.pretraining_data import load_pretraining_dataset

    ds = load_pretraining_dataset(folder, "train")
    return ds["input_ids"], ds["next_sentence_label"]


def test_on_the_fly_data_is_deterministic(tmp_path):
    """The reproduction: the same arguments gave 22, 21 and 26 phase-0 sequences (the
    WordPiece trainer's vocabulary changed from run to run). Three builds now agree."""
    from modeling.phases import data_signature, resolve_data

    builds = [resolve_data(_raw_args(tmp_path / f"run{i}", CORPUS))[0] for i in range(3)]
    vocabs = [json.loads((b / "tokenizer" / "tokenizer.json").read_text())["model"]["vocab"]
              for b in builds]  # fmt: skip
    assert vocabs[0] == vocabs[1] == vocabs[2] and len(vocabs[0]) == 300
    rows = [_dataset_rows(b) for b in builds]
    assert len(rows[0][0]) > 10 and rows[0] == rows[1] == rows[2]
    assert len({data_signature(b) for b in builds}) == 1


def test_tokenizer_training_is_deterministic_in_fresh_processes(tmp_path):
    code = (
        "import sys, json; from modeling.tokenizer_training import train_wordpiece; "
        "t = train_wordpiece([sys.argv[1]], sys.argv[2], vocab_size=400, min_frequency=1); "
        "print(json.dumps(sorted(t.get_vocab().items())))"
    )
    outs = [
        _run([PY, "-c", code, str(CORPUS), str(tmp_path / f"t{i}")], timeout=120) for i in range(3)
    ]
    assert all(o.returncode == 0 for o in outs), outs[0].stderr
    assert outs[0].stdout == outs[1].stdout == outs[2].stdout
    assert len(json.loads(outs[0].stdout)) == 400


def test_data_cache_is_keyed_by_its_inputs(tmp_path):
    from transformers import AutoTokenizer

    from modeling.phases import resolve_data
    from modeling.pretraining_data import load_metadata

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(CORPUS.read_text())
    out = tmp_path / "out"
    (folder,) = resolve_data(_raw_args(out, corpus))
    tok_dir = out / "data" / "tokenizer"
    key = load_metadata(folder)["config"]["extra"]["key"]
    stamp = (folder / "metadata.json").stat().st_mtime_ns
    assert len(AutoTokenizer.from_pretrained(str(tok_dir))) == 300

    resolve_data(_raw_args(out, corpus))  # same inputs: reused, not rebuilt
    assert (folder / "metadata.json").stat().st_mtime_ns == stamp

    resolve_data(_raw_args(out, corpus, tokenizer_vocab_size=250))  # vocabulary size changed
    assert len(AutoTokenizer.from_pretrained(str(tok_dir))) == 250
    assert load_metadata(folder)["vocab_size"] == 250
    key250 = load_metadata(folder)["config"]["extra"]["key"]
    assert key250 != key

    # another corpus at the same path: tokenizer and data rebuilt from it
    corpus.write_text("A completely different text. It has other words entirely.\n" * 3 +
                      "\n" + CORPUS.read_text()[:3000])  # fmt: skip
    resolve_data(_raw_args(out, corpus, tokenizer_vocab_size=250))
    assert load_metadata(folder)["config"]["extra"]["key"] != key250
    assert "entirely" in AutoTokenizer.from_pretrained(str(tok_dir)).get_vocab()


def test_empty_corpus_fails_and_leaves_nothing_that_breaks_the_next_run(tmp_path):
    """The reproduction: an empty corpus left a 5-entry tokenizer that the next run reused."""
    from modeling.phases import resolve_data

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n   \n")
    out = tmp_path / "out"
    with pytest.raises(UsageError, match=r"train_data\[0\]: .*corpus.txt is empty"):
        resolve_data(_raw_args(out, corpus))
    corpus.write_text(CORPUS.read_text())
    (folder,) = resolve_data(_raw_args(out, corpus))
    assert json.loads((folder / "metadata.json").read_text())["vocab_size"] == 300


@pytest.mark.slow
def test_on_the_fly_data_does_not_depend_on_the_process_count(tmp_path):
    """Two processes under `accelerate launch` build the same data from raw text as one."""
    from modeling.phases import data_signature, resolve_data

    (single,) = resolve_data(_raw_args(tmp_path / "one", CORPUS))
    recipe = tmp_path / "recipe.yaml"
    settings = dict(TINY, train_data=[str(CORPUS)], max_seq_length=[64], tokenizer_vocab_size=300,
                    num_validation_docs=2, max_steps=1, train_batch_size=[4],
                    output_dir=str(tmp_path / "two"))  # fmt: skip
    recipe.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in settings.items()))
    launcher = Path(PY).with_name("accelerate")
    proc = _run(
        [str(launcher), "launch", "--config_file", "accelerate_configs/cpu.yaml",
         "--main_process_port", str(free_port()), "scripts/pretrain.py", "--config", str(recipe)]
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((tmp_path / "two" / "train_results.json").read_text())["num_processes"] == 2
    double = tmp_path / "two" / "data" / single.name
    assert data_signature(double) == data_signature(single)
    assert _dataset_rows(double) == _dataset_rows(single)


# ------------------------------------------------------------------------- one name, one rule
def test_one_warmup_formula_the_transformers_one():
    import torch
    from transformers import get_linear_schedule_with_warmup

    from modeling.optim import lr_factor

    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = get_linear_schedule_with_warmup(opt, num_warmup_steps=4, num_training_steps=10)
    for step in range(10):
        assert lr_factor(step, "linear", 4, 10) == pytest.approx(sched.get_last_lr()[0]), step
        opt.step()
        sched.step()


def test_library_never_imports_recipes():
    import ast

    for path in (REPO / "modeling").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom | ast.Import):
                names = (
                    [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else [a.name for a in node.names]
                )
                assert not any(n.split(".")[0] == "recipes" for n in names), path


def test_masked_lm_prob_is_a_deprecated_alias_of_mlm_probability():
    sys_path = str(REPO / "scripts")
    import sys

    sys.path.insert(0, sys_path)
    try:
        import create_pretraining_data as script
    finally:
        sys.path.remove(sys_path)
    common = ["--input", "x", "--tokenizer", "t", "--output", "o"]
    assert script.parse_args(common + ["--masked_lm_prob", "0.2"]).mlm_probability == 0.2
    assert script.parse_args(common + ["--mlm_probability", "0.3"]).mlm_probability == 0.3
    assert script.parse_args(common).mlm_probability == 0.15
    proc = subprocess.run([PY, "-c", "import modeling.pretraining_data as m; "
                           "print(m.PretrainingDataConfig().mlm_probability)"],
                          capture_output=True, text=True, cwd=REPO)  # fmt: skip
    assert proc.stdout.strip() == "0.15"
