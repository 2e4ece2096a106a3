"""Tokenizer folders the project writes load wherever a BERT tokenizer loads.

* A trained WordPiece tokenizer is saved as a stock ``BertTokenizer`` folder (``vocab.txt``,
  ``tokenizer.json``, ``tokenizer_config.json``, ``special_tokens_map.json``) and gives the ids of
  the ``tokenizers`` pipeline it was trained as, on real Wikipedia text.
* The ``tokenizer/`` of pretraining data and the ``model/`` of a pretraining run carry the stock
  class and no loading options of the run (``local_files_only`` under ``HF_HUB_OFFLINE``...),
  whether the tokenizer was trained or is bert-base-uncased's read from a local folder.
* In a Python without this package (tests/stock_env.py), ``AutoTokenizer`` and the slow BERT
  tokenizer (``from_pretrained`` and ``vocab_file=``) give our ids; with
  ``BERT_TOOLKIT_TRANSFORMERS4_PYTHON`` naming an interpreter that has transformers 4.x (no torch
  needed: ``python -m venv v4 && v4/bin/pip install 'transformers<5'``), there as well.
"""

import json
import os
import sys
from pathlib import Path

import pytest
from stock_env import run_stock
from tiny_pretrain import TINY_MODEL_RUN
from transformers import AutoTokenizer

from modeling.tokenizer_folder import save_tokenizer
from modeling.tokenizer_training import train_wordpiece, train_wordpiece_backend

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "recipes" / "bert-tiny" / "corpus.txt"
STOCK_FILES = {"vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"}
# Loading options that must never reach a published tokenizer_config.json.
RUNTIME_KEYS = {"local_files_only", "is_local", "cache_dir", "token", "revision", "force_download"}
SPECIALS = {
    "unk_token": "[UNK]",
    "sep_token": "[SEP]",
    "pad_token": "[PAD]",
    "cls_token": "[CLS]",
    "mask_token": "[MASK]",
}
EXTRA_TEXTS = [
    "Hello [MASK] world, naïve café in Zürich! 東京 and ÉCOLE.",
    "A [SEP] inside text, tabs\tand  spaces, numbers 3.14159 and e-mail a.b@c.org",
]
TINY_RUN = dict(
    TINY_MODEL_RUN,
    max_seq_length=[64],
    num_validation_docs=2,
    max_steps=2,
    train_batch_size=[4],
)


def stock_pythons():
    pythons = [pytest.param(sys.executable, id="this-transformers")]
    other = os.environ.get("BERT_TOOLKIT_TRANSFORMERS4_PYTHON")
    marks = () if other else pytest.mark.skip(reason="BERT_TOOLKIT_TRANSFORMERS4_PYTHON not set")
    pythons.append(pytest.param(other, id="transformers4", marks=marks))
    return pythons


@pytest.fixture(scope="module")
def wiki_lines(shared_data):
    """400 non-empty text lines of the shared Wikipedia sample (markup lines dropped)."""
    lines = []
    for path in sorted((shared_data / "wikipedia").glob("wiki_*")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.startswith(("<doc", "</doc")):
                lines.append(line)
            if len(lines) == 400:
                return lines
    pytest.skip("fewer than 400 lines in the shared Wikipedia sample")


@pytest.fixture(scope="module")
def trained(wiki_lines, tmp_path_factory):
    """Tokenizers trained on the first 300 lines, uncased and cased: (folder, returned, kwargs)."""
    root = tmp_path_factory.mktemp("trained")
    text = root / "train.txt"
    text.write_text("\n".join(wiki_lines[:300]) + "\n", encoding="utf-8")
    out = {}
    for name, lowercase in (("uncased", True), ("cased", False)):
        kwargs = dict(files=[text], vocab_size=1500, min_frequency=2, lowercase=lowercase)
        returned = train_wordpiece(output_dir=root / name, **kwargs)
        out[name] = (root / name, returned, kwargs)
    return out


def texts(wiki_lines):
    """Seen lines, unseen lines (more [UNK] and splits) and hand-written edge cases."""
    return wiki_lines[:40] + wiki_lines[300:] + EXTRA_TEXTS


def ids_of(tokenizer, lines):
    return {
        "single": tokenizer(lines)["input_ids"],
        "pairs": tokenizer(lines[:-1], lines[1:])["input_ids"],
    }


def check_config(folder, lower_case=True):
    config = json.loads((folder / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "BertTokenizer", folder
    assert not RUNTIME_KEYS & config.keys(), (folder, RUNTIME_KEYS & config.keys())
    assert config["do_lower_case"] is lower_case
    assert config["model_max_length"] == 512
    assert {k: config[k] for k in SPECIALS} == SPECIALS
    assert STOCK_FILES <= {p.name for p in folder.iterdir()}, folder
    assert json.loads((folder / "special_tokens_map.json").read_text()) == SPECIALS
    # vocab.txt lists the tokens in id order, as the slow tokenizer reads it
    vocab = json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"]
    listed = (folder / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert listed == sorted(vocab, key=vocab.get) and len(listed) == len(vocab)
    return config


@pytest.mark.parametrize("name", ["uncased", "cased"])
def test_trained_tokenizer_is_saved_as_a_stock_bert_folder(trained, name):
    folder, returned, _ = trained[name]
    assert type(returned).__name__ == "BertTokenizer"
    check_config(folder, lower_case=name == "uncased")
    assert len(returned) == len(AutoTokenizer.from_pretrained(folder)) == 1500


@pytest.mark.parametrize("name", ["uncased", "cased"])
def test_trained_tokenizer_gives_the_ids_it_was_trained_with(trained, wiki_lines, name):
    folder, returned, kwargs = trained[name]
    backend = train_wordpiece_backend(**kwargs)
    lines = texts(wiki_lines)
    want = {
        "single": [e.ids for e in backend.encode_batch(lines)],
        "pairs": [e.ids for e in backend.encode_batch(list(zip(lines[:-1], lines[1:])))],
    }
    assert ids_of(returned, lines) == want
    assert ids_of(AutoTokenizer.from_pretrained(folder), lines) == want
    unk = returned.unk_token_id
    assert any(unk in ids for ids in want["single"])  # the unseen lines do reach [UNK]
    assert sum(len(ids) for ids in want["single"]) > 5000


def test_a_generic_wordpiece_folder_is_saved_as_bert_and_others_keep_their_class(tmp_path):
    """A folder written before (``TokenizersBackend``) comes out as BertTokenizer, same ids;
    a tokenizer that is not BERT's WordPiece keeps its class and gets no vocab.txt."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = train_wordpiece_backend([CORPUS], vocab_size=400, min_frequency=1)
    generic = PreTrainedTokenizerFast(tokenizer_object=backend, model_max_length=512, **SPECIALS)
    generic.save_pretrained(tmp_path / "old")
    old = AutoTokenizer.from_pretrained(tmp_path / "old")
    assert json.loads((tmp_path / "old" / "tokenizer_config.json").read_text())[
        "tokenizer_class"
    ] not in ("BertTokenizer", "BertTokenizerFast")
    saved = save_tokenizer(old, tmp_path / "new")
    check_config(tmp_path / "new")
    lines = CORPUS.read_text(encoding="utf-8").splitlines()[:50] + EXTRA_TEXTS
    assert ids_of(AutoTokenizer.from_pretrained(tmp_path / "new"), lines) == ids_of(old, lines)
    assert ids_of(saved, lines) == ids_of(old, lines)

    bpe = Tokenizer(models.BPE(unk_token="[UNK]"))
    bpe.pre_tokenizer = pre_tokenizers.Whitespace()
    bpe.train([str(CORPUS)], trainers.BpeTrainer(vocab_size=300, special_tokens=["[UNK]"]))
    other = PreTrainedTokenizerFast(tokenizer_object=bpe, unk_token="[UNK]")
    assert save_tokenizer(other, tmp_path / "bpe") is other
    config = json.loads((tmp_path / "bpe" / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] != "BertTokenizer"
    assert not (tmp_path / "bpe" / "vocab.txt").exists()
    assert json.loads((tmp_path / "bpe" / "special_tokens_map.json").read_text()) == {
        "unk_token": "[UNK]"
    }


def test_saving_into_a_used_folder_leaves_no_stale_file(trained, minilm_path, tmp_path):
    """A trained tokenizer saved over bert-base-uncased's folder: every file is the new one."""
    folder = tmp_path / "tok"
    save_tokenizer(AutoTokenizer.from_pretrained(minilm_path), folder)
    assert len((folder / "vocab.txt").read_text(encoding="utf-8").splitlines()) == 30522
    save_tokenizer(trained["cased"][1], folder)
    check_config(folder, lower_case=False)  # vocab.txt agrees with tokenizer.json
    assert len(AutoTokenizer.from_pretrained(folder)) == 1500


@pytest.fixture(scope="module")
def runs(tmp_path_factory, minilm_path):
    """Two tiny pretraining runs on raw text: one trains its tokenizer, one reads
    bert-base-uncased's from a local folder (offline, so ``local_files_only`` is set)."""
    from modeling.pretraining import PretrainingArguments, pretrain

    root = tmp_path_factory.mktemp("runs")
    for name, extra in (
        ("trained", dict(tokenizer_vocab_size=500)),
        ("bert-base-uncased", dict(tokenizer_name=str(minilm_path))),
    ):
        args = dict(TINY_RUN, train_data=[str(CORPUS)], output_dir=str(root / name), **extra)
        assert pretrain(PretrainingArguments(**args))["step"] == 2
    return root


def run_folders(runs):
    folders = {
        f"{name}/{sub}": runs / name / sub
        for name in ("trained", "bert-base-uncased")
        for sub in ("data/phase0-64/tokenizer", "model")
    }
    folders["trained/data/tokenizer"] = runs / "trained" / "data" / "tokenizer"
    return folders


def test_pretraining_data_and_model_folders_hold_stock_tokenizers(runs, minilm_path):
    for name, folder in run_folders(runs).items():
        check_config(folder)
        size = len(AutoTokenizer.from_pretrained(folder))
        assert size == (30522 if name.startswith("bert-base") else 500), name
    assert (runs / "bert-base-uncased" / "model" / "vocab.txt").read_bytes() == (
        minilm_path / "vocab.txt"
    ).read_bytes()


STOCK_CODE = """
import json
import transformers
from transformers import AutoTokenizer
try:  # transformers 5: BertTokenizer is the fast one, the slow one is BertTokenizerLegacy
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy as Slow
except ImportError:  # transformers 4: BertTokenizer is the slow one
    from transformers import BertTokenizer as Slow

def ids_of(tokenizer, lines):
    return {"single": tokenizer(lines)["input_ids"],
            "pairs": tokenizer(lines[:-1], lines[1:])["input_ids"]}

result = {"version": transformers.__version__, "folders": {}}
for name, folder in FOLDERS.items():
    config = json.load(open(folder + "/tokenizer_config.json"))
    auto = AutoTokenizer.from_pretrained(folder)
    slow = Slow.from_pretrained(folder)
    by_file = Slow(vocab_file=folder + "/vocab.txt", do_lower_case=config["do_lower_case"])
    result["folders"][name] = {
        "auto_class": type(auto).__name__, "auto_fast": auto.is_fast, "slow_fast": slow.is_fast,
        "sizes": [len(auto), len(slow), len(by_file)],
        "max_length": auto.model_max_length,
        "specials": [auto.cls_token, auto.sep_token, auto.pad_token, auto.mask_token,
                     auto.unk_token],
        "auto": ids_of(auto, TEXTS), "slow": ids_of(slow, TEXTS),
        "vocab_file": ids_of(by_file, TEXTS),
    }
"""


@pytest.mark.parametrize("python", stock_pythons())
def test_stock_auto_and_slow_tokenizers_give_our_ids(python, trained, runs, wiki_lines):
    folders = {f"trained-{k}": v[0] for k, v in trained.items()} | run_folders(runs)
    lines = wiki_lines[:100] + EXTRA_TEXTS
    out = run_stock(
        STOCK_CODE,
        python=python,
        FOLDERS={k: str(v) for k, v in folders.items()},
        TEXTS=lines,
    )["result"]
    if python != sys.executable:
        assert out["version"].startswith("4."), out["version"]
    for name, folder in folders.items():
        got = out["folders"][name]
        ours = AutoTokenizer.from_pretrained(folder)
        want = ids_of(ours, lines)
        assert got["auto_fast"] is True and got["slow_fast"] is False, name
        assert got["sizes"] == [len(ours)] * 3, name
        assert got["max_length"] == 512 and got["specials"] == [
            "[CLS]",
            "[SEP]",
            "[PAD]",
            "[MASK]",
            "[UNK]",
        ], name
        for how in ("auto", "slow", "vocab_file"):
            assert got[how] == want, (name, how)
