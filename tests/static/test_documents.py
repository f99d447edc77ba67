"""StaticDocumentEncoder: landmark-style encodings (chunks, spans, pooled vectors) from the shipped static model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lmk_rag.errors import EmptyTextError, InvalidInputError, ModelNotFoundError
from lmk_rag.nodes import group_chunks
from lmk_rag.static import StaticTokenEncoder
from lmk_rag.static.document_encoder import StaticDocumentEncoder
from lmk_rag.static.mixer import SHIPPED_MIXER_DIR, MixerWeights

TEXT = (
    "The kill() system call can be used to send any signal to any process group or process. "
    "If pid is positive, then signal sig is sent to the process with the ID specified by pid. "
) * 12


@pytest.fixture(scope="module")
def encoder() -> StaticDocumentEncoder:
    return StaticDocumentEncoder()


def test_chunks_tile_the_text_in_runs_of_granularity_tokens(encoder: StaticDocumentEncoder) -> None:
    encoded = encoder.encode_documents(TEXT)
    n_tokens = len(encoder.token_encoder.tokenize(TEXT)[0])
    assert "".join(TEXT[start:end] for start, end in encoded.spans) == TEXT
    assert encoded.token_counts[:-1] == [64] * (len(encoded.spans) - 1) and sum(encoded.token_counts) == n_tokens
    assert encoded.chunk_vectors.shape == (len(encoded.spans), 256) and encoded.vector.shape == (256,)
    np.testing.assert_allclose(np.linalg.norm(encoded.chunk_vectors, axis=1), 1.0, rtol=1e-5)


def test_vectors_are_model2vec_pooled_embeddings(encoder: StaticDocumentEncoder) -> None:
    raw = StaticTokenEncoder(encoder.token_encoder.vectors)  # pooled vectors ignore the mixer
    encoded = encoder.encode_documents(TEXT)
    np.testing.assert_allclose(encoded.vector, raw.encode(TEXT), atol=1e-5)
    query = encoder.encode_queries("send a signal")
    np.testing.assert_allclose(query.vector, raw.encode("send a signal"), atol=1e-5)
    assert query.spans == [(0, 13)] and query.token_counts == [3]


def test_nodes_cut_from_a_static_encoding_are_runs_of_whole_chunks(encoder: StaticDocumentEncoder) -> None:
    nodes = group_chunks(encoder.encode_documents(TEXT), node_tokens=256)
    assert [node.token_count for node in nodes[:-1]] == [256] * (len(nodes) - 1)
    assert nodes[0].span[0] == 0 and nodes[-1].span[1] == len(TEXT)


def test_token_vectors_come_from_the_mixer(encoder: StaticDocumentEncoder) -> None:
    assert encoder.token_encoder.mixer is not None and encoder.token_encoder.mixer.source == str(SHIPPED_MIXER_DIR)
    raw = StaticDocumentEncoder(mixer=None)
    assert encoder.encode_query_tokens("send a signal").shape == (3, 256)
    assert not np.allclose(encoder.encode_query_tokens("send a signal"), raw.encode_query_tokens("send a signal"))
    assert raw.fingerprint != encoder.fingerprint


def test_settings_rebuild_the_encoder(encoder: StaticDocumentEncoder, tmp_path: Path) -> None:
    assert encoder.settings == {"static_model": None, "mixer": "shipped", "granularity": 64}
    assert StaticDocumentEncoder(**encoder.settings).fingerprint == encoder.fingerprint
    own = tmp_path / "mixer"
    own.mkdir()
    for item in SHIPPED_MIXER_DIR.iterdir():
        (own / item.name).write_bytes(item.read_bytes())
    copied = StaticDocumentEncoder(mixer=own, granularity="sentence")
    assert copied.settings["mixer"] == str(own) and copied.settings["granularity"] == "sentence"
    assert StaticDocumentEncoder(**copied.settings).fingerprint == copied.fingerprint != encoder.fingerprint


def test_an_unsaved_mixer_is_recorded_and_cannot_be_rebuilt(encoder: StaticDocumentEncoder) -> None:
    live = MixerWeights(encoder.token_encoder.mixer.config, encoder.token_encoder.mixer.weights)  # no folder
    unsaved = StaticDocumentEncoder(token_encoder=StaticTokenEncoder(encoder.token_encoder.vectors, mixer=live))
    assert unsaved.settings["mixer"] == "unsaved"
    with pytest.raises(ModelNotFoundError, match="never saved"):
        StaticDocumentEncoder(**unsaved.settings)


def test_bad_input_names_the_problem(encoder: StaticDocumentEncoder) -> None:
    with pytest.raises(EmptyTextError):
        encoder.encode_documents(["fine", "  "])
    with pytest.raises(InvalidInputError, match="vocabulary"):
        encoder.encode_documents("\U0001f600\U0001f600")
    with pytest.raises(InvalidInputError, match="granularity"):
        StaticDocumentEncoder(granularity="paragraph")


def test_node_token_vectors_are_cut_from_the_document_tokenisation(encoder: StaticDocumentEncoder) -> None:
    encoded = encoder.encode_documents(TEXT)
    spans = [node.span for node in group_chunks(encoded, node_tokens=64)]
    assert len(spans) > 3
    at_words = [index for index, (start, _) in enumerate(spans) if start == 0 or not TEXT[start - 1].isalnum()]
    assert len(at_words) > 3
    cut = encoder.encode_node_tokens(encoded, spans)
    for index in at_words:  # a node that starts at a word: the same vectors as encoding the node's text alone
        start, end = spans[index]
        np.testing.assert_allclose(cut[index], encoder.encode_document_tokens(TEXT[start:end]), atol=1e-5)


def test_a_node_starting_inside_a_word_keeps_the_documents_word_piece() -> None:
    raw = StaticDocumentEncoder(mixer=None, granularity=5)  # without a mixer a vector is its token id's row
    text = "lorem ipsum " + "unhyphenatedsupercalifragilistic " * 4
    encoded = raw.encode_documents(text)
    inside = [(start, end) for start, end in encoded.spans if start > 0 and text[start - 1].isalnum()]
    assert inside, "the chunks should cut inside a word"
    ids, offsets = raw.token_encoder.tokenize(text)
    table = raw.token_encoder.vectors.unit_table
    for (start, end), vectors in zip(inside, raw.encode_node_tokens(encoded, inside)):
        own = ids[(offsets[:, 0] >= start) & (offsets[:, 0] < end)]
        assert raw.token_encoder.vectors.tokenizer.id_to_token(int(own[0])).startswith("##")
        np.testing.assert_allclose(vectors, table[list(dict.fromkeys(own.tolist()))], atol=1e-6)
        assert vectors.shape != raw.encode_document_tokens(text[start:end]).shape or not np.allclose(
            vectors, raw.encode_document_tokens(text[start:end])
        )


def test_node_token_vectors_need_a_static_encoding(encoder: StaticDocumentEncoder) -> None:
    from lmk_rag.encoder.types import EncodedText

    plain = EncodedText(vector=np.ones(256), chunk_vectors=np.ones((1, 256)), spans=[(0, 4)], token_counts=[1])
    with pytest.raises(InvalidInputError, match="encode_documents"):
        encoder.encode_node_tokens(plain, [(0, 4)])


def test_a_text_without_words_gets_the_unit_mean_token_vector(encoder: StaticDocumentEncoder) -> None:
    vector = encoder.empty_text_vector()
    mean = encoder.token_encoder.vectors.unit_table.mean(axis=0)
    assert vector.dtype == np.float32 and vector.shape == (256,)
    np.testing.assert_allclose(vector, mean / np.linalg.norm(mean), atol=1e-6)
