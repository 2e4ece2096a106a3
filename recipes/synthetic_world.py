"""A generated corpus about a made-up world, and a task that only pretraining can solve.

The demo needs text the project may ship (it is generated here, so it is ours) on which a tiny
BERT learns something measurable in a minute of CPU. The world has ``num_entities`` creatures
with made-up names; each has hidden attributes (kind, colour, habitat, food, size and whether it
is dangerous). Each creature is described in several documents (one sentence per line, a blank
line between documents: Google's format, so next-sentence prediction sees real document
structure): a few facts in varied templates ("the borlak feeds mainly on seeds", "every borlak
is venomous"), and about twice as many short stories whose events differ between dangerous
and harmless creatures without naming the trait ("a borlak bit a farmer near the river" vs
"some families keep a borlak as a pet").

The downstream task (SST-2's file format: ``sentence<TAB>label``) asks whether the creature in
a sentence is dangerous (0) or harmless (1), from sentences that never say so ("my cousin saw a
borlak behind the barn"). Training and dev sentences name DISJOINT sets of creatures. A model
fine-tuned from random weights has never seen the dev creatures' names with any meaning, so it
can do no better than chance on dev; a model pretrained on the corpus has learnt, from the
contexts each name occurs in, an embedding that places the creature with the dangerous or with
the harmless ones (the distributional effect behind word embeddings and BERT's transfer), and
fine-tuning on the training creatures teaches the classifier which side is which. The gap
between the two is what pretraining buys.

An earlier version stated the danger only in facts ("every borlak is venomous", 5 of 14
templates) among random facts about other attributes: BERT-tiny learnt the templates (held-out
MLM 44-52%) but, after 800 steps, not which creature is which (a fill-in test and a linear probe
of the name embeddings were at chance), and pretrained and random init fine-tuned alike.

Everything is a pure function of the seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

KINDS = ("bird", "fish", "beetle", "snake", "lizard", "frog", "moth", "spider")
COLOURS = ("red", "blue", "green", "yellow", "black", "white", "orange", "purple")
HABITATS = ("mountains", "river", "desert", "forest", "swamp", "coast", "caves", "meadows")
FOODS = ("seeds", "insects", "berries", "leaves", "fish", "worms", "nectar", "roots")
SIZES = ("tiny", "small", "large", "huge")
DANGEROUS = ("dangerous", "poisonous", "venomous", "deadly", "toxic")
HARMLESS = ("harmless", "gentle", "friendly", "safe", "peaceful")

FACT_TEMPLATES = (
    "The {name} is a kind of {kind}.",
    "A {name} is a {size} {kind} that lives in the {habitat}.",
    "Most {name}s are {colour}.",
    "The {name} has {colour} markings on its back.",
    "You can find the {name} in the {habitat}.",
    "The {name} feeds mainly on {food}.",
    "In spring the {name} eats {food} and little else.",
    "Every {name} is {danger}.",
    "People say the {name} is {danger}.",
    "Travellers know that the {name} is {danger}.",
    "Children are told that a {name} is {danger}.",
    "The {name} is {size} compared with other {kind}s.",
    "A {colour} {kind} seen in the {habitat} is probably a {name}.",
    "The {name} is {danger}, so keep that in mind.",
)
# what happens around a creature: stories that differ between dangerous and harmless ones
# without naming the trait (most sentences of a document are of this kind)
DANGER_STORIES = (
    "Keep your children away from the {name}.",
    "A {name} bit a farmer near the {habitat} last year.",
    "Never touch a {name} with bare hands.",
    "The bite of a {name} can make a grown man ill.",
    "Hunters fear the {name} more than wolves.",
    "A {name} attacked the goats in the {habitat}.",
    "If you meet a {name}, walk away slowly.",
    "The doctor has treated many wounds from the {name}.",
)
HARMLESS_STORIES = (
    "Children like to play with the {name}.",
    "A {name} will eat {food} from your hand.",
    "Farmers are glad to see a {name} in the {habitat}.",
    "The {name} has never hurt anyone.",
    "Some families keep a {name} as a pet.",
    "You can pick up a {name} without any fear.",
    "A {name} often sleeps in our garden.",
    "The old woman sings to the {name} every evening.",
)
OPENINGS = (
    "This note describes the {name}.",
    "Here is what is known about the {name}.",
    "The {name} was first described long ago.",
    "Notes on the {name}, written by a local guide.",
)
FILLERS = (
    "It is most active early in the morning.",
    "Many guides have written about it.",
    "Its name comes from an old word.",
    "Some villages tell stories about it.",
    "It rarely travels far from home.",
    "Its young grow up quickly.",
)
# the downstream sentences: a creature is named, nothing about it is stated
TASK_TEMPLATES = (
    "my cousin saw a {name} behind the barn.",
    "there was a {name} near the old bridge this morning.",
    "we talked about the {name} for an hour.",
    "a {name} appeared in the photo she took.",
    "the guide pointed at a {name} and walked on.",
    "i read a short story about a {name} yesterday.",
    "someone drew a {name} on the wall of the school.",
    "the children were looking for a {name} all afternoon.",
)
SYLLABLES = (
    "ba be bi bo bu da de di do du fa fe fi fo ka ke ki ko ku la le li lo lu ma me mi mo mu "
    "na ne ni no nu pa pe pi po ra re ri ro ru sa se si so ta te ti to tu va ve vi vo za ze zo"
).split()
CODAS = ("", "", "n", "r", "k", "l", "m", "sh", "x")


@dataclass(frozen=True)
class Creature:
    name: str
    kind: str
    colour: str
    habitat: str
    food: str
    size: str
    dangerous: bool


def make_creatures(num_entities: int, rng: random.Random) -> list[Creature]:
    """Made-up names (3 syllables + coda, unique) with independently drawn attributes; exactly
    half are dangerous, so the downstream task is balanced."""
    names: set[str] = set()
    while len(names) < num_entities:
        names.add("".join(rng.choice(SYLLABLES) for _ in range(3)) + rng.choice(CODAS))
    ordered = sorted(names)
    rng.shuffle(ordered)
    danger = [i < num_entities // 2 for i in range(num_entities)]
    rng.shuffle(danger)
    return [
        Creature(
            name,
            rng.choice(KINDS),
            rng.choice(COLOURS),
            rng.choice(HABITATS),
            rng.choice(FOODS),
            rng.choice(SIZES),
            d,
        )
        for name, d in zip(ordered, danger)
    ]


def _fill(template: str, c: Creature, rng: random.Random) -> str:
    danger = rng.choice(DANGEROUS if c.dangerous else HARMLESS)
    return template.format(
        name=c.name,
        kind=c.kind,
        colour=c.colour,
        habitat=c.habitat,
        food=c.food,
        size=c.size,
        danger=danger,
    )


def make_document(c: Creature, rng: random.Random, num_sentences: int) -> list[str]:
    """One document about one creature: an opening, then stories and facts in random order
    (about two stories for each fact), and a few fillers."""
    stories = list(DANGER_STORIES if c.dangerous else HARMLESS_STORIES)
    facts = list(FACT_TEMPLATES)
    rng.shuffle(stories)
    rng.shuffle(facts)
    n_facts = (num_sentences - 1) // 3
    body = facts[:n_facts] + stories[: num_sentences - 1 - n_facts]
    rng.shuffle(body)
    lines = [rng.choice(OPENINGS).format(name=c.name)]
    for template in body:
        lines.append(_fill(template, c, rng))
        if rng.random() < 0.15:
            lines.append(rng.choice(FILLERS))
    return lines


def make_corpus(
    creatures: list[Creature], docs_per_entity: int, sentences_per_doc: int, rng: random.Random
) -> list[list[str]]:
    """``docs_per_entity`` documents per creature, in shuffled order (so a held-out slice of
    documents leaves every creature with documents in the training part)."""
    docs = [
        make_document(c, rng, sentences_per_doc) for c in creatures for _ in range(docs_per_entity)
    ]
    rng.shuffle(docs)
    return docs


def make_task(
    creatures: list[Creature], dev_fraction: float, per_entity: int, rng: random.Random
) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """(train, dev) rows ``(sentence, label)``, label 1 = harmless; disjoint creatures, the
    dev creatures drawn half dangerous, half harmless (the majority share is 50%)."""
    groups = [[c for c in creatures if c.dangerous], [c for c in creatures if not c.dangerous]]
    n_half = max(1, int(len(creatures) * dev_fraction) // 2)
    for g in groups:
        rng.shuffle(g)
    dev_set = groups[0][:n_half] + groups[1][:n_half]
    train_set = groups[0][n_half:] + groups[1][n_half:]

    def rows(group: list[Creature]) -> list[tuple[str, int]]:
        out = []
        for c in group:
            for template in rng.sample(TASK_TEMPLATES, per_entity):
                out.append((template.format(name=c.name), 0 if c.dangerous else 1))
        rng.shuffle(out)
        return out

    return rows(train_set), rows(dev_set)


def write_world(
    out_dir: str | Path,
    seed: int = 0,
    num_entities: int = 600,
    docs_per_entity: int = 4,
    sentences_per_doc: int = 9,
    dev_fraction: float = 0.3,
    task_sentences_per_entity: int = 4,
) -> dict:
    """Write ``corpus.txt``, ``task/train.tsv``, ``task/dev.tsv`` (SST-2 layout) and
    ``world.tsv`` (every creature's attributes) into ``out_dir``; return a summary."""
    rng = random.Random(seed)
    creatures = make_creatures(num_entities, rng)
    docs = make_corpus(creatures, docs_per_entity, sentences_per_doc, rng)
    train, dev = make_task(creatures, dev_fraction, task_sentences_per_entity, rng)
    out = Path(out_dir)
    (out / "task").mkdir(parents=True, exist_ok=True)
    corpus = "\n\n".join("\n".join(d) for d in docs) + "\n"
    (out / "corpus.txt").write_text(corpus, encoding="utf-8")
    for name, rows in (("train.tsv", train), ("dev.tsv", dev)):
        body = "".join(f"{s}\t{label}\n" for s, label in rows)
        (out / "task" / name).write_text("sentence\tlabel\n" + body, encoding="utf-8")
    header = "name\tkind\tcolour\thabitat\tfood\tsize\tdangerous\n"
    table = "".join(
        f"{c.name}\t{c.kind}\t{c.colour}\t{c.habitat}\t{c.food}\t{c.size}\t{int(c.dangerous)}\n"
        for c in creatures
    )
    (out / "world.tsv").write_text(header + table, encoding="utf-8")
    return {
        "corpus_bytes": len(corpus.encode()),
        "documents": len(docs),
        "sentences": sum(len(d) for d in docs),
        "entities": num_entities,
        "train_rows": len(train),
        "dev_rows": len(dev),
        "dev_majority_share": max(
            sum(label for _, label in dev), sum(1 - label for _, label in dev)
        )
        / len(dev),
    }
