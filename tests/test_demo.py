"""The README's main command, end to end with one seed: pretraining on the generated world works
(held-out MLM accuracy far above the unigram baseline) and buys a downstream gap (the pretrained
model beats the same model from random init on creatures never seen in fine-tuning)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _demo(out: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, DEMO_PYTHON=sys.executable, DEMO_OUT=str(out), DEMO_SEEDS="1")
    return subprocess.run(
        ["bash", "scripts/demo.sh"], cwd=REPO, env=env, capture_output=True, text=True
    )


def test_demo_shows_pretraining_and_a_pretrained_vs_random_gap(tmp_path):
    out = tmp_path / "demo"
    done = _demo(out)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mlm_accuracy"] > 3 * summary["unigram_baseline"]
    assert summary["metric"] == "accuracy" and summary["task"]
    # dev creatures are never seen in fine-tuning: random init can only guess (50%)
    assert summary["random_init"] <= 65
    assert summary["pretrained"] >= summary["random_init"] + 25
    probe = summary["nearest_kind_probe"]  # why it transfers: the names' embeddings sort by kind
    assert probe["pretrained_right"] >= 0.8 * probe["creatures"] > 0
    assert probe["random_init_right"] < probe["pretrained_right"]
    assert (out / "summary.png").stat().st_size > 0
    assert "gap" in done.stdout and "NO clear gap" not in done.stdout


def test_demo_refuses_a_folder_it_did_not_write(tmp_path):
    keep = tmp_path / "mine" / "precious.txt"
    keep.parent.mkdir()
    keep.write_text("keep me")
    done = _demo(keep.parent)
    assert done.returncode == 2
    assert "does not hold an earlier demo" in done.stderr
    assert keep.read_text() == "keep me"
