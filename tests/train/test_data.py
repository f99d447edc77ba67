"""Training data: pairs JSONL and BEIR train splits, held-out split, deterministic batches and haystacks."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from transformers import AutoTokenizer

from lmk_rag.errors import DatasetError
from lmk_rag.splits import split_heldout
from lmk_rag.train.data import BatchSampler, HaystackBuilder, TrainPair, load_training_data


@pytest.fixture(scope="module")
def tokenizer(tiny_model: Path):
    return AutoTokenizer.from_pretrained(tiny_model)


def test_pairs_jsonl_reads_negatives_and_names_a_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps({"query": "q", "positive": "p", "negatives": ["n1", "n2"]}) + "\n\n")
    assert load_training_data(path) == [TrainPair("q", "p", ("n1", "n2"))]
    path.write_text(json.dumps({"query": "q", "positive": "p"}) + "\n" + json.dumps({"query": "q2"}) + "\n")
    with pytest.raises(DatasetError, match=r"pairs.jsonl:2: field 'positive'"):
        load_training_data(path)
    with pytest.raises(DatasetError, match="no such pairs file"):
        load_training_data(tmp_path / "missing.jsonl")


def test_beir_folder_train_split(tmp_path: Path) -> None:
    (tmp_path / "qrels").mkdir()
    with gzip.open(tmp_path / "corpus.jsonl.gz", "wt") as handle:
        handle.write(json.dumps({"_id": "d1", "title": "ls", "text": "list files"}) + "\n")
        handle.write(json.dumps({"_id": "d2", "title": "", "text": "copy files"}) + "\n")
    (tmp_path / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "show a directory"}) + "\n")
    (tmp_path / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\n")
    assert load_training_data(tmp_path) == [TrainPair("show a directory", "ls\nlist files")]
    (tmp_path / "qrels" / "train.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td9\t1\n")
    with pytest.raises(DatasetError, match="unknown query 'q1' or document 'd9'"):
        load_training_data(tmp_path)
    (tmp_path / "qrels" / "train.tsv").unlink()
    with pytest.raises(DatasetError, match="train split"):
        load_training_data(tmp_path)


def test_heldout_split_is_disjoint_and_seeded() -> None:
    pairs = [TrainPair(f"q{i}", f"p{i}") for i in range(50)]
    train, heldout = split_heldout(pairs, 0.1, seed=1)
    assert len(heldout) == 5 and len(train) == 45
    assert not {p.query for p in train} & {p.query for p in heldout}
    assert split_heldout(pairs, 0.1, seed=1) == (train, heldout)
    assert split_heldout(pairs, 0.1, seed=2)[1] != heldout
    assert [len(part) for part in split_heldout(pairs, 0.5, seed=1, max_heldout=3)] == [47, 3]
    assert [len(part) for part in split_heldout(pairs[:3], 0.9, seed=1)] == [2, 1]  # two always stay to train


def test_haystack_hides_the_needle_within_its_token_budget(tokenizer, pairs_file: Path) -> None:
    pairs = load_training_data(pairs_file)
    builder = HaystackBuilder(tokenizer, [p.positive for p in pairs[1:]], haystack_tokens=200)
    rng = np.random.default_rng(0)
    for pair in pairs[:10]:
        text, (start, end) = builder.build(pair.positive, rng, exclude=set())
        needle = text[start:end]
        assert needle and pair.positive.startswith(needle)
        tokens = len(tokenizer(text, add_special_tokens=False)["input_ids"])
        assert 120 <= tokens <= 200


def test_batches_are_a_function_of_seed_and_step(tokenizer, pairs_file: Path) -> None:
    pairs = load_training_data(pairs_file)
    builder = HaystackBuilder(tokenizer, [p.positive for p in pairs], haystack_tokens=100)
    sampler = BatchSampler(pairs, batch_size=4, seed=5, haystacks=builder)
    again = BatchSampler(pairs, batch_size=4, seed=5, haystacks=builder)
    assert sampler.batch(3) == again.batch(3)
    assert sampler.batch(3) != sampler.batch(4)
    epoch = [i for step in range(sampler.steps_per_epoch) for i in sampler.indices(step)]
    assert len(set(epoch)) == len(epoch) == sampler.steps_per_epoch * 4
    batch = sampler.batch(0)
    assert set(batch.query_granularity) <= {32, 64, 128, 256}
    assert set(batch.haystack_granularity) <= {32, 64}  # only granularities that give a haystack several landmarks
    for haystack, positive in zip(batch.haystacks, batch.passages):
        others = set(batch.passages) - {positive}
        assert not any(other in haystack for other in others)  # no other positive of the batch hides in it


def test_sampler_adds_hard_negatives_but_never_a_batch_positive(pairs_file: Path) -> None:
    base = load_training_data(pairs_file)[:8]
    pairs = [TrainPair(p.query, p.positive, (base[(i + 1) % 8].positive, f"unrelated {i}")) for i, p in enumerate(base)]
    batch = BatchSampler(pairs, batch_size=8, seed=0, hard_negatives=2).batch(0)
    assert batch.passages[8:] == [f"unrelated {i}" for i in BatchSampler(pairs, 8, 0).indices(0)]
    with pytest.raises(DatasetError, match="at least 2"):
        BatchSampler(pairs, batch_size=1, seed=0)
