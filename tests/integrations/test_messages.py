"""Errors a LlamaIndex user meets, in the words they used (``enable_hybrid``, query modes, ``static=True``), each
naming the fix (real MiniLM, real Edge shards)."""

from __future__ import annotations

from pathlib import Path

import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryMode

from llama_index.embeddings.landmark import LandmarkEmbedding
from llama_index.vector_stores.landmark import LandmarkVectorStore
from lmk_rag.errors import SettingsMismatchError


@pytest.fixture
def dense_store(embed_model: LandmarkEmbedding, tmp_path: Path) -> Path:
    """A store made with ``enable_hybrid=False`` holding one page."""
    with LandmarkVectorStore(path=tmp_path / "dense", enable_hybrid=False, embed_model=embed_model) as vector_store:
        VectorStoreIndex.from_documents([Document(text="tar creates and extracts archive files.")],
                                        storage_context=StorageContext.from_defaults(vector_store=vector_store),
                                        embed_model=embed_model)
    return tmp_path / "dense"


def test_reopening_with_enable_hybrid_speaks_of_enable_hybrid(embed_model, dense_store) -> None:
    with pytest.raises(SettingsMismatchError) as raised:
        LandmarkVectorStore(path=dense_store, enable_hybrid=True, embed_model=embed_model)
    said = str(raised.value)
    assert "enable_hybrid=True" in said and "leave the setting out" in said and "given bm25" not in said, said


def test_a_sparse_query_on_a_store_without_bm25_names_the_mode_and_the_fix(embed_model, dense_store) -> None:
    query = VectorStoreQuery(query_str="archive", similarity_top_k=2, mode=VectorStoreQueryMode.SPARSE)
    with LandmarkVectorStore(path=dense_store, embed_model=embed_model) as vector_store, \
            pytest.raises(SettingsMismatchError) as raised:
        vector_store.query(query)
    said = str(raised.value)
    assert "query mode 'sparse'" in said and "enable_hybrid=True" in said and "alpha" not in said, said


def test_a_transformer_setting_with_static_says_so(embed_model) -> None:
    with pytest.raises(TypeError) as raised:
        LandmarkEmbedding(static=True, window_overlap=5)
    said = str(raised.value)
    assert "window_overlap is a setting of transformer models" in said and "drop static=True" in said, said
    assert "StaticDocumentEncoder" not in said
