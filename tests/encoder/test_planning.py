"""Landmark planning on real tokenizer offsets (no model call)."""

from __future__ import annotations

import random

import pytest
from transformers import AutoTokenizer

from lmk_rag.encoder.planning import VARIABLE_GRANULARITIES, plan_landmarks, variable_granularity
from lmk_rag.errors import InvalidInputError

TEXT = (
    "NAME\n   ls - list directory contents\n\nDESCRIPTION\n   List information about the FILEs (the current "
    "directory by default). Sort entries alphabetically if none of -cftuvSUX nor --sort is specified! "
    "Mandatory arguments to long options are mandatory for short options too.\n\n   -a, --all\n"
    "          do not ignore entries starting with .   Is this a question? Yes.  " * 5
)


@pytest.fixture(scope="module")
def offsets(minilm_path):
    tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    return [tuple(o) for o in tokenizer(TEXT, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]]


def _assert_tiles(plan, text):
    assert plan.spans[0][0] == 0 and plan.spans[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in zip(plan.spans, plan.spans[1:]))
    assert "".join(text[s:e] for s, e in plan.spans) == text


@pytest.mark.parametrize("k", [1, 7, 32, 64, 128, 256])
def test_fixed_k_chunks_tile_tokens_and_text(offsets, k):
    plan = plan_landmarks(TEXT, offsets, k, max_chunk_tokens=254)
    n = len(offsets)
    expected = -(-n // min(k, 254))
    assert len(plan.chunks) == len(plan.spans) == expected
    assert plan.chunks[0][0] == 0 and plan.chunks[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(plan.chunks, plan.chunks[1:]))
    assert all(end - start <= k for start, end in plan.chunks)
    _assert_tiles(plan, TEXT)


def test_k_is_capped_at_window(offsets):
    plan = plan_landmarks(TEXT, offsets, 256, max_chunk_tokens=100)
    assert max(end - start for start, end in plan.chunks) == 100


def test_each_span_holds_its_tokens(offsets):
    plan = plan_landmarks(TEXT, offsets, 16, max_chunk_tokens=254)
    for (start, end), (span_start, span_end) in zip(plan.chunks, plan.spans):
        assert span_start <= offsets[start][0] and offsets[end - 1][1] <= span_end


def test_sentence_granularity_cuts_at_sentence_ends(offsets):
    plan = plan_landmarks(TEXT, offsets, "sentence", max_chunk_tokens=254, sentence_max_tokens=40)
    _assert_tiles(plan, TEXT)
    chunk_texts = [TEXT[s:e] for s, e in plan.spans]
    assert any(chunk.rstrip().endswith("?") for chunk in chunk_texts)
    assert any(chunk.rstrip().endswith("specified!") for chunk in chunk_texts)
    assert all(end - start <= 40 for start, end in plan.chunks)
    assert len(plan.chunks) > len(plan_landmarks(TEXT, offsets, 128, max_chunk_tokens=254).chunks)


def test_variable_granularity_is_deterministic_at_inference_and_sampled_in_training(offsets):
    first = plan_landmarks(TEXT, offsets, "variable", max_chunk_tokens=254)
    second = plan_landmarks(TEXT, offsets, "variable", max_chunk_tokens=254)
    assert first == second
    assert variable_granularity(TEXT) in VARIABLE_GRANULARITIES
    sampled = {variable_granularity(TEXT, random.Random(seed)) for seed in range(40)}
    assert sampled == set(VARIABLE_GRANULARITIES)


def test_none_is_one_truncated_chunk(offsets):
    plan = plan_landmarks(TEXT, offsets, None, max_chunk_tokens=50)
    assert plan.chunks == [(0, 50)] and plan.truncated
    assert plan.spans == [(0, offsets[49][1])]
    whole = plan_landmarks(TEXT, offsets, None, max_chunk_tokens=10_000)
    assert whole.spans == [(0, len(TEXT))] and not whole.truncated


@pytest.mark.parametrize("granularity", [0, -3, "paragraph", 2.5, True])
def test_bad_granularity_is_a_typed_error(offsets, granularity):
    with pytest.raises(InvalidInputError, match="granularity"):
        plan_landmarks(TEXT, offsets, granularity, max_chunk_tokens=254)


def test_no_tokens_is_a_typed_error():
    with pytest.raises(InvalidInputError, match="without tokens"):
        plan_landmarks("", [], 32, max_chunk_tokens=254)
