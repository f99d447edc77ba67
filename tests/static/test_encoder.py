"""StaticTokenEncoder on a tiny model2vec folder (mechanics) and on the real distilled MiniLM model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lmk_rag.errors import EmptyTextError, InvalidInputError, ModelNotFoundError
from lmk_rag.static import StaticTokenEncoder, maxsim, tokens_in_chunks
from lmk_rag.static.mixer_torch import ConvMixer


def test_tokens_in_chunks_by_char_offsets() -> None:
    offsets = np.array([[0, 3], [4, 7], [7, 9], [12, 15], [20, 22]])
    spans = [(0, 7), (7, 13), (13, 18)]
    # token 2 starts at 7 -> chunk 1; token 3 starts at 12 -> chunk 1; token 4 starts past every span -> -1
    assert tokens_in_chunks(offsets, spans).tolist() == [0, 0, 1, 1, -1]
    assert tokens_in_chunks(offsets, []).tolist() == [-1] * 5


def test_local_folder_loads_and_encodes(tiny_model_dir: Path) -> None:
    encoder = StaticTokenEncoder(tiny_model_dir)
    assert encoder.dim == 4
    _ids, offsets = encoder.tokenize("The cat sat, the dog sat")  # "," and "dog" are unknown: dropped
    assert offsets.tolist() == [[0, 3], [4, 7], [8, 11], [13, 16], [21, 24]]
    queries = encoder.encode_query_tokens("the cat the cat")
    assert queries.shape == (4, 4)  # never deduplicated
    assert np.allclose(np.linalg.norm(queries, axis=1), 1.0)
    docs = encoder.encode_document_tokens("the cat the cat sat")
    assert docs.shape == (3, 4)  # the, cat, sat once each
    assert np.allclose(docs, encoder.encode_query_tokens("the cat sat"))
    # deduplication does not change the raw MaxSim score
    assert maxsim(queries, docs) == pytest.approx(maxsim(queries, encoder.encode_query_tokens("the cat the cat sat")))


def test_pooled_encode_is_the_mean_of_static_vectors(tiny_model_dir: Path) -> None:
    encoder = StaticTokenEncoder(tiny_model_dir)
    both = encoder.encode(["the cat", "mat"])
    single = encoder.encode("the cat")
    assert both.shape == (2, 4) and single.shape == (4,)
    ids, _ = encoder.tokenize("the cat")
    mean = encoder.vectors.embedding[ids].mean(axis=0)
    assert np.allclose(single, mean / np.linalg.norm(mean), atol=1e-6)
    assert np.allclose(both[0], single)
    assert encoder.encode([]).shape == (0, 4)
    assert not encoder.encode("dog").any()  # no known token: zeros


def test_chunks_follow_spans(tiny_model_dir: Path) -> None:
    encoder = StaticTokenEncoder(tiny_model_dir)
    text = "the cat sat on the mat the cat"
    ids, offsets = encoder.tokenize(text)
    chunk_of = tokens_in_chunks(offsets, [(0, 11), (11, 22), (22, len(text))])
    chunks = [encoder.distinct_token_vectors(ids[chunk_of == c]) for c in range(3)]
    assert [len(c) for c in chunks] == [3, 3, 2]  # the/cat/sat | on/the/mat | the/cat


def test_bad_inputs_and_missing_models(tiny_model_dir: Path, tmp_path: Path, monkeypatch) -> None:
    encoder = StaticTokenEncoder(tiny_model_dir)
    with pytest.raises(EmptyTextError):
        encoder.encode_document_tokens("   ")
    with pytest.raises(InvalidInputError):
        encoder.encode_query_tokens(42)  # type: ignore[arg-type]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotFoundError, match="offline"):
        StaticTokenEncoder("nobody/not-a-cached-model2vec-model")
    with pytest.raises(ModelNotFoundError, match=r"mixer_config\.json"):
        StaticTokenEncoder(tiny_model_dir, mixer=tmp_path)


def test_fingerprint_covers_model_and_mixer(tiny_model_dir: Path) -> None:
    raw = StaticTokenEncoder(tiny_model_dir)
    mixed = StaticTokenEncoder(tiny_model_dir, mixer=ConvMixer(4, kernel_size=3))
    assert isinstance(raw.fingerprint, str) and raw.fingerprint == StaticTokenEncoder(tiny_model_dir).fingerprint
    assert mixed.fingerprint != raw.fingerprint


@pytest.mark.slow
def test_real_model_matches_model2vec_and_aligns_with_landmark_chunks(static_encoder, minilm_encoder) -> None:
    from model2vec import StaticModel

    assert static_encoder.dim == 256
    text = (
        "The getrlimit() and setrlimit() system calls get and set resource limits. Each resource has an "
        "associated soft and hard limit. The soft limit is the value that the kernel enforces for the "
        "corresponding resource. An unprivileged process may only raise its soft limit up to the hard limit."
    )
    reference = StaticModel.from_pretrained(static_encoder.vectors.source, force_download=False)
    assert np.allclose(static_encoder.encode(text), reference.encode(text), atol=1e-3)
    batch = [text, "", "kill a process", "ls"]  # pooled in one sparse product; the empty text stays zero
    assert np.allclose(static_encoder.encode(batch), reference.encode(batch), atol=1e-3)
    spans = minilm_encoder.encode_documents(text).spans  # chunks of another tokenizer
    assert len(spans) >= 2
    ids, offsets = static_encoder.tokenize(text)
    owner = tokens_in_chunks(offsets, spans)
    assert (owner >= 0).all() and (np.diff(owner) >= 0).all()  # every token in one chunk, in order
    chunks = [static_encoder.distinct_token_vectors(ids[owner == c]) for c in range(len(spans))]
    assert all(len(c) for c in chunks)
    # a query scores the chunk holding its words highest
    query = static_encoder.encode_query_tokens("unprivileged process may only raise")
    where = text.index("unprivileged")
    holder = next(i for i, (start, end) in enumerate(spans) if start <= where < end)
    assert int(np.argmax([maxsim(query, c) for c in chunks])) == holder


def test_mixer_tokens_equal_the_torch_module(tiny_model_dir: Path) -> None:
    import torch

    mixer = ConvMixer(4, kernel_size=3)
    torch.nn.init.normal_(mixer.gate.weight)
    encoder = StaticTokenEncoder(tiny_model_dir, mixer=mixer)
    text = "the cat sat on the mat"
    ids, _ = encoder.tokenize(text)
    raw = encoder.vectors.weighted_table[ids]
    x = torch.from_numpy(raw / np.linalg.norm(raw, axis=1, keepdims=True)).unsqueeze(0)
    with torch.no_grad():
        expected = mixer.eval()(x)[0].numpy()
    assert np.allclose(encoder.encode_query_tokens(text), expected, atol=1e-5)
    pooled = expected.mean(axis=0)
    assert np.allclose(encoder.encode(text), pooled / np.linalg.norm(pooled), atol=1e-5)
    assert len(encoder.encode_document_tokens(text)) == 6  # context-dependent: "the" twice, in two contexts
