"""The landmark encoder on the real all-MiniLM-L6-v2 weights, and a tiny random ModernBERT for the long path."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer
from transformers import AutoTokenizer, ModernBertConfig, ModernBertModel

from lmk_rag.encoder import LMK_CONFIG_FILE, LandmarkEncoder, resolve_model_path
from lmk_rag.errors import EmptyTextError, InvalidInputError, ModelNotFoundError
from lmk_rag.nodes import group_chunks

SHORT = "The chmod utility changes the file mode bits of each given file according to mode."
PAGE = (
    "DESCRIPTION\n   The gzip program reduces the size of the named files using Lempel-Ziv coding (LZ77). "
    "Whenever possible, each file is replaced by one with the extension .gz, while keeping the same ownership "
    "modes, access and modification times. If no files are specified, or if a file name is -, the standard "
    "input is compressed to the standard output.\n\n"
) * 6


@pytest.fixture(scope="module")
def sentence_transformer(minilm_path):
    return SentenceTransformer(str(minilm_path), device="cpu")


def test_plain_mean_pooling_equals_sentence_transformers(sentence_transformer):
    encoder = LandmarkEncoder(granularity=None, pooling="mean", projection=None)
    texts = [SHORT, PAGE[:900]]
    ours = np.stack([encoded.vector for encoded in encoder.encode_documents(texts)])
    theirs = sentence_transformer.encode(texts, normalize_embeddings=True)
    assert np.all(np.sum(ours * theirs, axis=1) > 0.9999)


def test_one_independent_chunk_equals_sentence_transformers_on_its_text(sentence_transformer):
    encoder = LandmarkEncoder(granularity=48, context="chunk", chunk_vector="mean", projection=None)
    encoded = encoder.encode_documents(PAGE)
    chunk_texts = [PAGE[start:end] for start, end in encoded.spans]
    theirs = sentence_transformer.encode(chunk_texts, normalize_embeddings=True)
    # the chunk's own text re-tokenises to the same tokens except at cut points inside words
    cosines = np.sum(encoded.chunk_vectors * theirs, axis=1)
    assert np.median(cosines) > 0.99


@pytest.mark.parametrize("granularity", [16, 32, 64, 128, 256, "sentence", "variable"])
@pytest.mark.parametrize("context", ["document", "chunk"])
def test_one_vector_per_chunk_and_spans_tile(granularity, context):
    encoder = LandmarkEncoder(granularity=granularity, context=context)
    encoded = encoder.encode_documents(PAGE)
    _, plan = encoder.plan(PAGE)
    assert encoded.chunk_vectors.shape == (len(plan.chunks), encoder.dim)
    assert encoded.n_chunks == len(plan.chunks) == len(encoded.token_counts)
    assert "".join(PAGE[start:end] for start, end in encoded.spans) == PAGE
    assert np.allclose(np.linalg.norm(encoded.chunk_vectors, axis=1), 1.0, atol=1e-5)
    assert np.isclose(np.linalg.norm(encoded.vector), 1.0, atol=1e-5)
    assert encoded.vector.dtype == np.float32 and encoded.chunk_vectors.dtype == np.float32


def test_contexts_differ_but_agree(minilm_encoder):
    in_context = minilm_encoder.encode_documents(PAGE)
    alone = LandmarkEncoder(granularity=32, context="chunk").encode_documents(PAGE)
    cosines = np.sum(in_context.chunk_vectors * alone.chunk_vectors, axis=1)
    assert in_context.spans == alone.spans
    assert not np.allclose(in_context.chunk_vectors, alone.chunk_vectors, atol=1e-3)
    assert cosines.mean() > 0.6


@pytest.mark.parametrize("pooling", ["lmk", "mean", "cls", "multicls"])
def test_poolings_give_distinct_normalised_vectors(pooling):
    encoder = LandmarkEncoder(granularity=32, pooling=pooling, chunk_vector="landmark")
    encoded = encoder.encode_documents(PAGE)
    assert np.isclose(np.linalg.norm(encoded.vector), 1.0, atol=1e-5)
    if pooling in ("lmk", "multicls"):
        expected = encoded.chunk_vectors.mean(axis=0)  # normalised states: same direction up to norms
        assert float(encoded.vector @ (expected / np.linalg.norm(expected))) > 0.95


def test_landmark_and_mean_chunk_vectors_differ(minilm_encoder):
    states = minilm_encoder.encode_states([PAGE])
    landmark = LandmarkEncoder(granularity=32, chunk_vector="landmark").pool(states)[0]
    mean = minilm_encoder.pool(states)[0]
    assert landmark.chunk_vectors.shape == mean.chunk_vectors.shape
    assert not np.allclose(landmark.chunk_vectors, mean.chunk_vectors, atol=1e-3)


def test_queries_get_landmarks_and_retrieve_the_right_chunk(minilm_encoder):
    document = minilm_encoder.encode_documents(PAGE + " The tar archiver stores many files in one archive file.")
    query = minilm_encoder.encode_queries("program that bundles files into an archive")
    assert query.chunk_vectors.shape[0] >= 1
    best = int(np.argmax(document.chunk_vectors @ query.vector))
    assert best == document.n_chunks - 1


def test_window_overlap_changes_states_not_shapes():
    plain = LandmarkEncoder(granularity=32).encode_documents(PAGE)
    overlapped = LandmarkEncoder(granularity=32, window_overlap=64).encode_documents(PAGE)
    assert plain.chunk_vectors.shape == overlapped.chunk_vectors.shape
    assert not np.allclose(plain.chunk_vectors, overlapped.chunk_vectors, atol=1e-4)


def test_encoding_is_deterministic_and_batch_independent(minilm_encoder):
    alone = minilm_encoder.encode_documents(PAGE)
    batched = minilm_encoder.encode_documents([SHORT, PAGE, SHORT * 3])[1]
    again = minilm_encoder.encode_documents(PAGE)
    assert np.array_equal(alone.chunk_vectors, again.chunk_vectors)
    assert np.allclose(alone.chunk_vectors, batched.chunk_vectors, atol=1e-5)


@pytest.mark.slow
def test_a_40k_token_text_encodes(minilm_encoder):
    text = PAGE * 90
    n_tokens = len(minilm_encoder.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])
    assert n_tokens > 40_000
    encoded = LandmarkEncoder(granularity=128).encode_documents(text)
    assert encoded.n_chunks == -(-n_tokens // 128)
    assert "".join(text[s:e] for s, e in encoded.spans) == text


def test_nodes_group_whole_chunks(minilm_encoder):
    encoded = minilm_encoder.encode_documents(PAGE)
    nodes = group_chunks(encoded, node_tokens=100)
    assert [node.chunk_range[0] for node in nodes[1:]] == [node.chunk_range[1] for node in nodes[:-1]]
    assert "".join(PAGE[node.span[0] : node.span[1]] for node in nodes) == PAGE
    assert all(node.token_count <= 100 for node in nodes)
    first = nodes[0]
    expected = encoded.chunk_vectors[first.chunk_range[0] : first.chunk_range[1]].mean(axis=0)
    assert np.allclose(first.vector, expected / np.linalg.norm(expected), atol=1e-6)


@pytest.mark.parametrize(
    ("texts", "error", "match"),
    [
        ([], InvalidInputError, "empty"),
        (None, InvalidInputError, "None"),
        (["ok", 3], InvalidInputError, "text 1 must be a str, got int"),
        (["ok", ""], EmptyTextError, "text 1 is empty"),
        (["   \n\t "], EmptyTextError, "whitespace-only"),
        (42, InvalidInputError, "sequence of str"),
    ],
)
def test_bad_input_is_a_typed_error(minilm_encoder, texts, error, match):
    with pytest.raises(error, match=match):
        minilm_encoder.encode_documents(texts)
    with pytest.raises(error, match=match):
        minilm_encoder.encode_queries(texts)


@pytest.mark.parametrize("setting", [{"context": "window"}, {"pooling": "median"}, {"chunk_vector": "cls"}])
def test_bad_settings_are_typed_errors(setting):
    with pytest.raises(InvalidInputError):
        LandmarkEncoder(**setting)


def test_unknown_model_offline_names_what_was_tried(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelNotFoundError, match="HF_HUB_OFFLINE") as raised:
        resolve_model_path("no-such-org/no-such-model")
    assert "cache" in str(raised.value)
    with pytest.raises(ModelNotFoundError, match=r"no config\.json"):
        resolve_model_path(tmp_path)


def test_hub_id_resolves_to_the_packaged_copy_offline(minilm_path):
    assert resolve_model_path("sentence-transformers/all-MiniLM-L6-v2") == minilm_path
    assert (minilm_path / "model.safetensors").is_file()


def test_settings_rebuild_the_encoder_and_fingerprint_is_stable(minilm_encoder):
    rebuilt = LandmarkEncoder(**minilm_encoder.settings)
    assert rebuilt.settings == minilm_encoder.settings
    assert rebuilt.fingerprint == minilm_encoder.fingerprint
    assert LandmarkEncoder(granularity=64).fingerprint != minilm_encoder.fingerprint
    assert minilm_encoder.max_length == 256


def test_lmk_trained_marker_switches_auto_defaults(tmp_path, minilm_path):
    for item in minilm_path.iterdir():
        if item.is_file():
            (tmp_path / item.name).symlink_to(item)
    (tmp_path / LMK_CONFIG_FILE).write_text(json.dumps({"lmk_trained": True, "granularity": "variable"}))
    trained = LandmarkEncoder(model_name=tmp_path)
    assert trained.lmk_trained and trained.pooling == "lmk" and trained.chunk_vector == "landmark"
    plain = LandmarkEncoder()
    assert not plain.lmk_trained and plain.pooling == "mean" and plain.chunk_vector == "mean"
    marker = {"lmk_trained": True, "pooling": "lmk", "chunk_vector": "mean"}  # chunk means measured better
    (tmp_path / LMK_CONFIG_FILE).write_text(json.dumps(marker))
    measured = LandmarkEncoder(model_name=tmp_path)
    assert measured.pooling == "lmk" and measured.chunk_vector == "mean"
    assert LandmarkEncoder(model_name=tmp_path, chunk_vector="landmark").chunk_vector == "landmark"
    (tmp_path / LMK_CONFIG_FILE).write_text(json.dumps({**marker, "chunk_vector": "best"}))
    with pytest.raises(InvalidInputError, match=r"lmk_model\.json chunk_vector"):
        LandmarkEncoder(model_name=tmp_path)


def test_a_marker_under_its_old_name_is_not_read(tmp_path, minilm_path):
    for item in minilm_path.iterdir():
        if item.is_file():
            (tmp_path / item.name).symlink_to(item)
    (tmp_path / "lmk_rag.json").write_text(json.dumps({"lmk_trained": True, "chunk_vector": "landmark"}))
    old = LandmarkEncoder(model_name=tmp_path)
    assert not old.lmk_trained and old.pooling == "mean" and old.chunk_vector == "mean"


@pytest.fixture(scope="module")
def tiny_modernbert(tmp_path_factory, minilm_path):
    """A 2-layer random ModernBERT with the MiniLM wordpiece tokenizer: mechanics only, never quality."""
    folder = tmp_path_factory.mktemp("tiny-modernbert")
    tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    config = ModernBertConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, max_position_embeddings=2048, global_attn_every_n_layers=2, local_attention=64,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id,
        cls_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id,
    )
    ModernBertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_tiny_modernbert_runs_the_long_path(tiny_modernbert):
    encoder = LandmarkEncoder(model_name=tiny_modernbert, granularity=64, batch_size=4)
    assert encoder.max_length == 512  # the tokenizer's limit, as saved
    long_encoder = LandmarkEncoder(model_name=tiny_modernbert, granularity=64, max_length=2048, batch_size=2)
    text = PAGE * 20
    encoded = long_encoder.encode_documents(text)
    _, plan = long_encoder.plan(text)
    assert encoded.n_chunks == len(plan.chunks) and encoded.chunk_vectors.shape[1] == 64
    assert "".join(text[s:e] for s, e in encoded.spans) == text
    assert np.all(np.isfinite(encoded.chunk_vectors))


def test_a_text_without_words_gets_the_vector_of_the_special_tokens_alone(sentence_transformer):
    encoder = LandmarkEncoder(granularity=32, projection=None)  # the projected one: tests/encoder/test_projection.py
    vector = encoder.empty_text_vector()
    assert vector.dtype == np.float32 and vector.shape == (encoder.dim,)
    np.testing.assert_allclose(vector, sentence_transformer.encode("", normalize_embeddings=True), atol=1e-5)


def test_encoding_keeps_no_batch_of_token_states_alive(tiny_model):
    """Only chunk states outlive a forward pass: holding a view of each batch (once, of its CLS rows) kept every
    token state of a long encode in memory (~1.5 KB a token for MiniLM)."""
    import weakref

    encoder = LandmarkEncoder(model_name=tiny_model, granularity=16, batch_size=2)
    runtime, alive, outputs = encoder.runtime, [], []

    def counting(ids, mask):
        alive.append(sum(ref() is not None for ref in outputs))
        states = runtime(ids, mask)
        outputs.append(weakref.ref(states))
        return states

    encoder.runtime = counting
    encoder.encode_states([PAGE * 4])
    assert len(alive) >= 5 and max(alive) <= 1  # the batch being consumed, nothing older
