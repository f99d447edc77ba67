"""LandmarkEmbedding: LlamaIndex's embedding interface over the real MiniLM landmark encoder."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from llama_index.core import Settings
from llama_index.core.base.embeddings.base import BaseEmbedding

from llama_index.embeddings.landmark import LandmarkEmbedding


def test_is_a_llamaindex_embedding_with_a_fixed_class_name() -> None:
    assert BaseEmbedding in LandmarkEmbedding.__mro__
    assert LandmarkEmbedding.class_name() == "LandmarkEmbedding"


def test_settings_embed_model_accepts_it(embed_model: LandmarkEmbedding) -> None:
    previous = Settings._embed_model
    try:
        Settings.embed_model = embed_model
        assert Settings.embed_model is embed_model
    finally:
        Settings._embed_model = previous


def test_fields_are_the_injected_encoders_settings(embed_model: LandmarkEmbedding, minilm_encoder) -> None:
    settings = dict(minilm_encoder.settings)
    assert embed_model.model_name == settings.pop("model_name")
    assert embed_model.encoder_settings == settings and not embed_model.static
    assert embed_model.encoder is minilm_encoder


def test_keyword_settings_build_the_encoder_with_them(minilm_encoder) -> None:
    built = LandmarkEmbedding(granularity=32, context="document", num_workers=2)
    assert built.encoder.settings == minilm_encoder.settings and built.num_workers == 2
    assert LandmarkEmbedding(encoder_settings={"granularity": 32}).encoder_settings == built.encoder_settings


def test_to_dict_from_dict_round_trip_rebuilds_the_same_encoder(embed_model: LandmarkEmbedding) -> None:
    data = embed_model.to_dict()
    assert data["class_name"] == "LandmarkEmbedding"
    rebuilt = LandmarkEmbedding.from_dict(data)
    assert rebuilt.to_dict() == data
    assert rebuilt.encoder.fingerprint == embed_model.encoder.fingerprint


def test_text_embeddings_are_the_encoders_document_vectors(embed_model: LandmarkEmbedding, minilm_encoder) -> None:
    texts = ["ls lists directory contents. " * 40, "cp copies files and directories.", "tar stores archives."]
    vectors = embed_model.get_text_embedding_batch(texts)
    expected = [encoded.vector for encoded in minilm_encoder.encode_documents(texts)]
    np.testing.assert_allclose(np.array(vectors), np.array(expected), atol=1e-5)


def test_text_batches_go_to_the_model_together(embed_model: LandmarkEmbedding, forward_counter) -> None:
    texts = [f"manual page number {i} describes a command." for i in range(8)]
    embed_model.get_text_embedding_batch(texts)
    assert forward_counter.batches == [8]


def test_query_embedding_is_one_forward_pass(embed_model: LandmarkEmbedding, minilm_encoder, forward_counter) -> None:
    vector = embed_model.get_query_embedding("list directory contents")
    assert forward_counter.batches == [1]
    np.testing.assert_allclose(vector, minilm_encoder.encode_queries("list directory contents").vector, atol=1e-5)
    assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-4)


def test_async_methods_match_sync(embed_model: LandmarkEmbedding) -> None:
    async def run() -> tuple[list[float], list[list[float]]]:
        return (
            await embed_model.aget_query_embedding("copy files"),
            await embed_model.aget_text_embedding_batch(["copy files", "archive files"]),
        )

    query, texts = asyncio.run(run())
    np.testing.assert_allclose(query, embed_model.get_query_embedding("copy files"), atol=1e-5)
    np.testing.assert_allclose(texts, embed_model.get_text_embedding_batch(["copy files", "archive files"]), atol=1e-5)


def test_texts_without_words_embed_as_huggingface_embedding_does(embed_model: LandmarkEmbedding, minilm_path) -> None:
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding

    stock = HuggingFaceEmbedding(model_name=str(minilm_path), device="cpu").get_text_embedding("")
    projection = embed_model.encoder.projection  # the encoder's own linear map, applied to every vector it gives
    assert projection is not None
    empty, worded, blank = embed_model.get_text_embedding_batch(["", "tar stores archives.", " \n"])
    np.testing.assert_allclose(empty, projection.apply(np.asarray([stock], np.float32))[0], atol=1e-5)
    assert blank == empty == embed_model.get_query_embedding("")
    np.testing.assert_allclose(worded, embed_model.get_text_embedding("tar stores archives."), atol=1e-5)


def test_backend_and_dtype_fields_build_an_onnx_encoder(onnx_encoders, onnx_cache, monkeypatch) -> None:
    from lmk_rag.paths import CACHE_ENV

    monkeypatch.setenv(CACHE_ENV, str(onnx_cache))
    embed_model = LandmarkEmbedding(granularity=32, backend="onnx", dtype="int8")
    assert embed_model.encoder.settings == onnx_encoders["int8"].settings
    assert LandmarkEmbedding.from_dict(embed_model.to_dict()).encoder.fingerprint == embed_model.encoder.fingerprint
    assert (embed_model.encoder_settings["backend"], embed_model.encoder_settings["dtype"]) == ("onnx", "int8")
    assert LandmarkEmbedding(encoder=onnx_encoders["float32"]).encoder_settings["backend"] == "onnx"


def test_an_onnx_encoder_embeds_an_empty_document(onnx_encoders, embed_model: LandmarkEmbedding) -> None:
    from llama_index.core import Document, VectorStoreIndex

    onnx = LandmarkEmbedding(encoder=onnx_encoders["float32"])
    index = VectorStoreIndex.from_documents([], embed_model=onnx)
    index.insert(Document(text=""))  # LlamaIndex's SentenceSplitter makes one empty node of it
    (node_id,) = index.index_struct.nodes_dict.values()
    np.testing.assert_allclose(index.vector_store.get(node_id), embed_model.empty_text_embedding(), atol=1e-5)


@pytest.mark.parametrize(
    "kwargs, error, words",
    [({"granularity": 0}, "invalid", "granularity"), ({"granularity": "paragraph"}, "invalid", "granularity"),
     ({"dtype": "int8"}, "invalid", "needs backend='onnx'"),
     ({"backend": "onnx", "dtype": "bfloat16"}, "invalid", "bfloat16"),
     ({"granularty": 64}, "type", "granularty"),
     ({"static": True, "model_name": "some/model"}, "type", "model_name"),
     ({"static": True, "context": "chunk"}, "type", "context")],
    ids=["granularity-0", "granularity-word", "int8-on-torch", "bf16-on-onnx", "misspelt", "static-model",
         "static-context"],
)
def test_settings_no_encoder_can_use_are_refused_when_made(kwargs, error, words) -> None:
    from lmk_rag.errors import InvalidInputError

    with pytest.raises(InvalidInputError if error == "invalid" else TypeError, match=words):
        LandmarkEmbedding(**kwargs)


def test_an_encoder_and_settings_are_not_given_together(minilm_encoder) -> None:
    from lmk_rag.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match=r"not both \(got \['granularity'\]\)"):
        LandmarkEmbedding(encoder=minilm_encoder, granularity=64)
    with pytest.raises(InvalidInputError, match="static=True needs a static encoder"):
        LandmarkEmbedding(encoder=minilm_encoder, static=True)
