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


def test_fields_mirror_the_injected_encoder(embed_model: LandmarkEmbedding, minilm_encoder) -> None:
    settings = minilm_encoder.settings
    for key in ("granularity", "context", "pooling", "chunk_vector", "max_length", "window_overlap"):
        assert getattr(embed_model, key) == settings[key]
    assert embed_model.encoder is minilm_encoder


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
    empty, worded, blank = embed_model.get_text_embedding_batch(["", "tar stores archives.", " \n"])
    np.testing.assert_allclose(empty, stock, atol=1e-5)
    assert blank == empty == embed_model.get_query_embedding("")
    np.testing.assert_allclose(worded, embed_model.get_text_embedding("tar stores archives."), atol=1e-5)


def test_backend_and_dtype_fields_build_an_onnx_encoder(onnx_encoders, onnx_cache, monkeypatch) -> None:
    from lmk_rag.paths import CACHE_ENV

    monkeypatch.setenv(CACHE_ENV, str(onnx_cache))
    embed_model = LandmarkEmbedding(granularity=32, backend="onnx", dtype="int8")
    assert embed_model.encoder.settings == onnx_encoders["int8"].settings
    assert LandmarkEmbedding.from_dict(embed_model.to_dict()).encoder.fingerprint == embed_model.encoder.fingerprint
    injected = LandmarkEmbedding(encoder=onnx_encoders["float32"])
    assert (injected.backend, injected.dtype) == ("onnx", "float32")


@pytest.mark.parametrize(
    "kwargs, words",
    [({"granularity": 0}, "granularity"), ({"granularity": "paragraph"}, "granularity"),
     ({"dtype": "int8"}, "needs backend='onnx'"), ({"backend": "onnx", "dtype": "bfloat16"}, "bfloat16"),
     ({"static": True, "model_name": "some/model"}, "model_name would be ignored"),
     ({"static": True, "context": "chunk", "window_overlap": 64}, "context, window_overlap would be ignored")],
    ids=["granularity-0", "granularity-word", "int8-on-torch", "bf16-on-onnx", "static-model", "static-context"],
)
def test_settings_no_encoder_can_use_are_refused_when_made(kwargs, words) -> None:
    from lmk_rag.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match=words):
        LandmarkEmbedding(**kwargs)
