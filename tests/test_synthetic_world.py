"""The demo's generated world: deterministic, the downstream answer only in the corpus, train and
dev about disjoint creatures, balanced dev."""

from __future__ import annotations

import csv
import re

from recipes.synthetic_world import (
    DANGER_STORIES,
    DANGEROUS,
    HARMLESS,
    HARMLESS_STORIES,
    write_world,
)


def _rows(path):
    return list(csv.reader(path.open(encoding="utf-8"), delimiter="\t"))


def test_world_is_deterministic_and_the_answer_is_only_in_the_corpus(tmp_path):
    info = write_world(tmp_path / "a", seed=3, num_entities=60)
    write_world(tmp_path / "b", seed=3, num_entities=60)
    write_world(tmp_path / "c", seed=4, num_entities=60)
    a, b, c = ((tmp_path / x / "corpus.txt").read_bytes() for x in "abc")
    assert a == b and a != c
    assert (tmp_path / "a" / "task" / "dev.tsv").read_bytes() == (
        tmp_path / "b" / "task" / "dev.tsv"
    ).read_bytes()

    world = {r[0]: int(r[6]) for r in _rows(tmp_path / "a" / "world.tsv")[1:]}
    assert len(world) == 60 and sum(world.values()) == 30
    corpus = (tmp_path / "a" / "corpus.txt").read_text(encoding="utf-8")
    docs = corpus.strip().split("\n\n")
    assert len(docs) == info["documents"] == 60 * 4
    danger_words = {w: 1 for w in DANGEROUS} | {w: 0 for w in HARMLESS}
    stated: dict[str, set[int]] = {}
    for doc in docs:
        for line in doc.splitlines():
            names = [w for w in re.findall(r"[a-z]+", line) if w in world]
            for word in re.findall(r"[a-z]+", line):
                if word in danger_words and names:
                    stated.setdefault(names[0], set()).add(danger_words[word])
    # every creature's danger is stated in the corpus, always consistently with world.tsv
    assert {name: {label} for name, label in world.items()} == stated

    train = _rows(tmp_path / "a" / "task" / "train.tsv")
    dev = _rows(tmp_path / "a" / "task" / "dev.tsv")
    assert train[0] == dev[0] == ["sentence", "label"]

    def names_and_labels(rows):
        out = {}
        for sentence, label in rows[1:]:
            assert not set(re.findall(r"[a-z]+", sentence)) & set(danger_words)
            (name,) = [w for w in re.findall(r"[a-z]+", sentence) if w in world]
            assert int(label) == 1 - world[name]  # 1 = harmless
            out[name] = int(label)
        return out

    train_names, dev_names = names_and_labels(train), names_and_labels(dev)
    assert not set(train_names) & set(dev_names)
    assert set(train_names) | set(dev_names) == set(world)
    dev_labels = [int(label) for _, label in dev[1:]]
    assert sum(dev_labels) * 2 == len(dev_labels) == info["dev_rows"]
    assert info["dev_majority_share"] == 0.5


def _story_kind(line: str, name: str) -> int | None:
    """1 if ``line`` is one of the dangerous creatures' stories, 0 a harmless one's, else None."""
    for kind, stories in ((1, DANGER_STORIES), (0, HARMLESS_STORIES)):
        for story in stories:
            pattern = re.escape(story).replace(re.escape("{name}"), re.escape(name))
            pattern = re.sub(r"\\\{\w+\\\}", "[a-z]+", pattern)
            if re.fullmatch(pattern, line):
                return kind
    return None


def test_stories_carry_the_trait_without_naming_it(tmp_path):
    """Most sentences about a creature are stories of its own kind (the signal pretraining can
    pick up from context), and no story names a danger word."""
    write_world(tmp_path, seed=5, num_entities=20)
    world = {r[0]: int(r[6]) for r in _rows(tmp_path / "world.tsv")[1:]}
    danger_words = set(DANGEROUS) | set(HARMLESS)
    for story in DANGER_STORIES + HARMLESS_STORIES:
        assert not set(re.findall(r"[a-z]+", story.lower())) & danger_words
    counts = {name: [0, 0] for name in world}  # [stories, sentences]
    for doc in (tmp_path / "corpus.txt").read_text(encoding="utf-8").strip().split("\n\n"):
        lines = doc.splitlines()
        (name,) = {w for w in re.findall(r"[a-z]+", lines[0]) if w in world}
        for line in lines[1:]:
            kind = _story_kind(line, name)
            if kind is not None:
                assert kind == world[name], (name, line)
                counts[name][0] += 1
            counts[name][1] += 1
    for name, (stories, sentences) in counts.items():
        assert stories >= sentences / 2, (name, stories, sentences)
