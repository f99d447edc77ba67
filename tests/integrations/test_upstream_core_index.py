"""LlamaIndex's own tests of ``VectorStoreIndex``, ported to an index over a LandmarkVectorStore.

Origin: run-llama/llama_index (MIT licence), ``llama-index-core/tests/indices/vector_store/``: ``test_simple.py``,
``test_simple_async.py``, ``test_retrievers.py`` and their ``conftest.py`` / ``mock_services.py``. Adapted only as
allowed for this port: every index is built over a LandmarkVectorStore on a fresh Qdrant Edge folder, with the real
LandmarkEmbedding instead of the mock embedding and the project's LandmarkNodeParser instead of upstream's patched
newline splitter (like that splitter, it gives no node for an empty document); queries are texts that play the
role of the mock query vector (it equals "This is another test."'s); async tests run with ``asyncio.run``.

Reading back what the index stored, upstream breaks the abstraction (``index._vector_store.get(text_id)`` on a
SimpleVectorStore, ``len(index.index_struct.nodes_dict)``); a store that keeps the text leaves the index struct
empty, so the port reads the same facts from the store (``stored(index)``) and compares the real embeddings within
float32 noise (a text embedded alone or in a batch differs in the last bits). The assertions are otherwise
unchanged.

Not ported, and why:

- ``test_simple_delete_ref_node_from_docstore``: with a store that keeps the text, VectorStoreIndex keeps no ref
  doc info in its docstore (LlamaIndex's design), so the precondition fails before the store is involved.
- ``test_[a]delete_ref_doc_nodes_removed_from_docstore``: a SimpleKeywordTableIndex, no vector store.
- ``test_simple_insert_save``, ``test_simple_pickle``: the index store's persistence; an index over an open Qdrant
  Edge shard (with its folder lock) is not picklable.
- ``test_[a]refresh_ref_docs_with_shared_docstore*``: docstore bookkeeping of indexes that keep nodes in the
  docstore (``_ref_doc_changed_in_index`` returns False for a store that keeps the text).
- ``test_insert_fetched_nodes_*``: VectorIndexRetriever internals, without a vector store.
- ``test_base.py`` (``skip_embedding``): not in the llama-index-core this project runs (0.14).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
from llama_index.core import StorageContext
from llama_index.core.indices.vector_store.base import VectorStoreIndex
from llama_index.core.schema import Document, ImageNode, NodeRelationship, QueryBundle, RelatedNodeInfo, TextNode

from llama_index.embeddings.landmark import LandmarkEmbedding
from llama_index.node_parser.landmark import LandmarkNodeParser
from llama_index.vector_stores.landmark import LandmarkVectorStore

# the mock query vector [0, 0, 1, 0, 0] is "This is another test."'s
QUERY = "another test"


@pytest.fixture()
def documents() -> list[Document]:
    """Sample documents for testing - used by both skip_embedding and other tests."""
    return [
        Document(text="Hello world.", id_="doc_1"),
        Document(text="This is a test.", id_="doc_2"),
        Document(text="This is another test.", id_="doc_3"),
        Document(text="This is a test v2.", id_="doc_4"),
    ]


@pytest.fixture
def mock_embed_model(embed_model: LandmarkEmbedding) -> LandmarkEmbedding:
    """Upstream's fixture name; here the real LandmarkEmbedding."""
    return embed_model


@pytest.fixture
def new_store(tmp_path: Path, embed_model: LandmarkEmbedding) -> Iterator[Callable[..., LandmarkVectorStore]]:
    """Makes empty stores, each in its own folder; closed at the end."""
    opened: list[LandmarkVectorStore] = []

    def _new(cls: type[LandmarkVectorStore] = LandmarkVectorStore) -> LandmarkVectorStore:
        opened.append(cls(path=tmp_path / f"s{len(opened)}", embed_model=embed_model))
        return opened[-1]

    yield _new
    for store in opened:
        store.close()


@pytest.fixture
def build(new_store, embed_model: LandmarkEmbedding) -> Callable[..., VectorStoreIndex]:
    """``VectorStoreIndex.from_documents(documents, embed_model=...)`` over a new LandmarkVectorStore."""

    def _build(documents: list[Document], store: LandmarkVectorStore | None = None, **kwargs: Any) -> VectorStoreIndex:
        return VectorStoreIndex.from_documents(
            documents=documents,
            embed_model=embed_model,
            storage_context=StorageContext.from_defaults(vector_store=store or new_store()),
            transformations=[LandmarkNodeParser(embed_model=embed_model)],
            **kwargs,
        )

    return _build


@pytest.fixture
def tup(embed_model: LandmarkEmbedding) -> Callable[..., tuple]:
    """``(text, its real embedding, *more)``: an entry of upstream's ``actual_node_tups``."""
    return lambda text, *more: (text, embed_model.get_text_embedding(text), *more)


def stored(index: VectorStoreIndex, with_ref_doc_id: bool = False) -> list[tuple]:
    """``(content, embedding[, ref_doc_id])`` of every node the index's store holds."""
    nodes = cast(LandmarkVectorStore, index.vector_store).get_nodes()
    return [(n.get_content(), n.embedding, *([n.ref_doc_id] if with_ref_doc_id else [])) for n in nodes]


def contained(entry: tuple, tups: list[tuple]) -> bool:
    """``entry in tups``, embeddings compared within float32 noise."""
    return any(
        len(entry) == len(other)
        and entry[0] == other[0]
        and np.allclose(entry[1], other[1], atol=1e-5)
        and entry[2:] == other[2:]
        for other in tups
    )


# ---------------------------------------------------------------- test_simple.py


def test_build_simple(build, tup, documents: list[Document]) -> None:
    """Test build VectorStoreIndex."""
    index = build(documents)
    assert isinstance(index, VectorStoreIndex)
    assert len(stored(index)) == 4
    # check contents of nodes
    actual_node_tups = [
        tup("Hello world."),
        tup("This is a test."),
        tup("This is another test."),
        tup("This is a test v2."),
    ]
    for node_tup in stored(index):
        assert contained(node_tup, actual_node_tups)

    # test ref doc info (a store that keeps the text: its documents)
    all_ref_doc_info = index.vector_store.store.doc_ids()
    for idx, ref_doc_id in enumerate(all_ref_doc_info):
        assert documents[idx].node_id == ref_doc_id


def test_simple_insert(build, tup, documents: list[Document]) -> None:
    """Test insert VectorStoreIndex."""
    index = build(documents)
    assert isinstance(index, VectorStoreIndex)
    # insert into index
    index.insert(Document(text="This is a test v3."))

    # insert empty document to test empty document handling
    index.insert(Document(text=""))

    # check contenst of nodes
    actual_node_tups = [
        tup("Hello world."),
        tup("This is a test."),
        tup("This is another test."),
        tup("This is a test v2."),
        tup("This is a test v3."),
    ]
    for node_tup in stored(index):
        assert contained(node_tup, actual_node_tups)


def test_simple_delete(build, tup) -> None:
    """Test delete VectorStoreIndex."""
    new_documents = [
        Document(text="Hello world.", id_="test_id_0"),
        Document(text="This is a test.", id_="test_id_1"),
        Document(text="This is another test.", id_="test_id_2"),
        Document(text="This is a test v2.", id_="test_id_3"),
    ]
    index = build(new_documents)
    assert isinstance(index, VectorStoreIndex)

    # test delete
    index.delete_ref_doc("test_id_0")
    assert len(stored(index)) == 3
    actual_node_tups = [
        tup("This is a test.", "test_id_1"),
        tup("This is another test.", "test_id_2"),
        tup("This is a test v2.", "test_id_3"),
    ]
    for node_tup in stored(index, with_ref_doc_id=True):
        assert contained(node_tup, actual_node_tups)

    # test insert
    index.insert(Document(text="Hello world backup.", id_="test_id_0"))
    assert len(stored(index)) == 4
    actual_node_tups = [
        tup("Hello world backup.", "test_id_0"),
        tup("This is a test.", "test_id_1"),
        tup("This is another test.", "test_id_2"),
        tup("This is a test v2.", "test_id_3"),
    ]
    for node_tup in stored(index, with_ref_doc_id=True):
        assert contained(node_tup, actual_node_tups)


def test_simple_async(build, tup, documents: list[Document]) -> None:
    """Test simple vector index with use_async."""
    index = build(documents, use_async=True)
    assert isinstance(index, VectorStoreIndex)
    assert len(stored(index)) == 4
    # check contents of nodes
    actual_node_tups = [
        tup("Hello world."),
        tup("This is a test."),
        tup("This is another test."),
        tup("This is a test v2."),
    ]
    for node_tup in stored(index):
        assert contained(node_tup, actual_node_tups)


def test_delete_ref_doc_calls_vector_store_with_ref_doc_id_only(build, new_store) -> None:
    delete_log: list[str] = []

    class TrackingVectorStore(LandmarkVectorStore):  # upstream also overrides SimpleVectorStore's ``client``
        def delete(self, ref_doc_id: str, **kwargs: Any) -> None:
            delete_log.append(ref_doc_id)
            super().delete(ref_doc_id, **kwargs)

    index = build([Document(text="Hello world.", id_="my-doc-id")], store=new_store(TrackingVectorStore))

    index.delete_ref_doc("my-doc-id")

    assert delete_log == ["my-doc-id"], f"Expected delete() called once with ref_doc_id only, got: {delete_log}"


# ---------------------------------------------------------------- test_simple_async.py


def test_simple_insertion(build, tup, documents: list[Document]) -> None:
    index = build(documents)
    assert isinstance(index, VectorStoreIndex)
    # insert into index
    asyncio.run(index.ainsert(Document(text="This is a test v3.")))

    # insert empty document to test empty document handling
    asyncio.run(index.ainsert(Document(text="")))

    # check contenst of nodes
    actual_node_tups = [
        tup("Hello world."),
        tup("This is a test."),
        tup("This is another test."),
        tup("This is a test v2."),
        tup("This is a test v3."),
    ]
    for node_tup in stored(index):
        assert contained(node_tup, actual_node_tups)


def test_simple_deletion(build, tup) -> None:
    """Test delete VectorStoreIndex."""
    new_documents = [
        Document(text="Hello world.", id_="test_id_0"),
        Document(text="This is a test.", id_="test_id_1"),
        Document(text="This is another test.", id_="test_id_2"),
        Document(text="This is a test v2.", id_="test_id_3"),
    ]
    index = build(new_documents)
    assert isinstance(index, VectorStoreIndex)

    asyncio.run(index.adelete_ref_doc("test_id_0"))
    assert len(stored(index)) == 3
    actual_node_tups = [
        tup("This is a test.", "test_id_1"),
        tup("This is another test.", "test_id_2"),
        tup("This is a test v2.", "test_id_3"),
    ]
    for node_tup in stored(index, with_ref_doc_id=True):
        assert contained(node_tup, actual_node_tups)

    # test insert
    asyncio.run(index.ainsert(Document(text="Hello world backup.", id_="test_id_0")))

    assert len(stored(index)) == 4
    actual_node_tups = [
        tup("Hello world backup.", "test_id_0"),
        tup("This is a test.", "test_id_1"),
        tup("This is another test.", "test_id_2"),
        tup("This is a test v2.", "test_id_3"),
    ]
    for node_tup in stored(index, with_ref_doc_id=True):
        assert contained(node_tup, actual_node_tups)


def test_simple_update(build) -> None:
    new_docs = [
        Document(id_="1", text="Hello World"),
        Document(id_="2", text="This is a test"),
    ]
    index = build(new_docs)
    assert isinstance(index, VectorStoreIndex)
    actual_node_tups = [
        ("Hello World v1", "1"),
        ("This is a test", "2"),
    ]
    asyncio.run(index.aupdate_ref_doc(Document(id_="1", text="Hello World v1")))
    for content, _, ref_doc_id in stored(index, with_ref_doc_id=True):
        assert (content, ref_doc_id) in actual_node_tups


def test_simple_refresh(build) -> None:
    new_docs = [
        Document(id_="1", text="Hello World"),
        Document(id_="2", text="This is a test"),
    ]
    index = build(new_docs)
    assert isinstance(index, VectorStoreIndex)
    asyncio.run(
        index.arefresh_ref_docs(
            [
                Document(id_="1", text="Hello World v1"),
                Document(id_="2", text="This is a test v1"),
            ]
        )
    )
    actual_node_tups = [
        ("Hello World v1", "1"),
        ("This is a test v1", "2"),
    ]
    for content, _, ref_doc_id in stored(index, with_ref_doc_id=True):
        assert (content, ref_doc_id) in actual_node_tups


def test_adelete_ref_doc_calls_vector_store_with_ref_doc_id_only(build, new_store) -> None:
    delete_log: list[str] = []

    class TrackingVectorStore(LandmarkVectorStore):
        def delete(self, ref_doc_id: str, **kwargs: Any) -> None:
            delete_log.append(ref_doc_id)
            super().delete(ref_doc_id, **kwargs)

    index = build([Document(text="Hello world.", id_="my-doc-id")], store=new_store(TrackingVectorStore))

    asyncio.run(index.adelete_ref_doc("my-doc-id"))

    assert delete_log == ["my-doc-id"], f"Expected delete() called once with ref_doc_id only, got: {delete_log}"


# ---------------------------------------------------------------- test_retrievers.py


def test_simple_query(build, documents: list[Document]) -> None:
    """Test embedding query."""
    index = build(documents)

    # test embedding query
    query_str = QUERY
    retriever = index.as_retriever(similarity_top_k=1)
    nodes = retriever.retrieve(QueryBundle(query_str))
    assert len(nodes) == 1
    assert nodes[0].node.get_content() == "This is another test."


def test_query_and_similarity_scores(build) -> None:
    """Test that sources nodes have similarity scores."""
    doc_text = "Hello world.\nThis is a test.\nThis is another test.\nThis is a test v2."
    document = Document(text=doc_text)
    index = build([document])

    # test embedding query
    query_str = "What is?"
    retriever = index.as_retriever()
    nodes = retriever.retrieve(QueryBundle(query_str))
    assert len(nodes) > 0
    assert nodes[0].score is not None


def test_simple_check_ids(new_store, embed_model: LandmarkEmbedding) -> None:
    """Test build VectorStoreIndex."""
    ref_doc_id = "ref_doc_id_test"
    source_rel = {NodeRelationship.SOURCE: RelatedNodeInfo(node_id=ref_doc_id)}
    all_nodes = [
        TextNode(text="Hello world.", id_="node1", relationships=source_rel),
        TextNode(text="This is a test.", id_="node2", relationships=source_rel),
        TextNode(text="This is another test.", id_="node3", relationships=source_rel),
        TextNode(text="This is a test v2.", id_="node4", relationships=source_rel),
    ]
    vector_store = new_store()
    index = VectorStoreIndex(
        all_nodes, embed_model=embed_model, storage_context=StorageContext.from_defaults(vector_store=vector_store)
    )

    # test query
    query_str = QUERY
    retriever = index.as_retriever()
    nodes = retriever.retrieve(QueryBundle(query_str))
    assert nodes[0].node.get_content() == "This is another test."
    assert nodes[0].node.ref_doc_id == "ref_doc_id_test"
    assert nodes[0].node.node_id == "node3"
    # upstream reads SimpleVectorStore's embedding_dict and text_id_to_ref_doc_id
    assert "node3" in {node.node_id for node in vector_store.get_nodes()}
    assert "node3" in {node.node_id for node in vector_store.get_nodes() if node.ref_doc_id == ref_doc_id}


def test_query(build) -> None:
    """Test embedding query."""
    doc_text = "Hello world.\nThis is a test.\nThis is another test.\nThis is a test v2."
    document = Document(text=doc_text)
    index = build([document])

    # test embedding query
    query_str = "What is?"
    retriever = index.as_retriever()
    _ = retriever.retrieve(QueryBundle(query_str))


def test_query_image_node(build) -> None:
    """Test embedding query."""
    image_node = ImageNode(image="potato")

    index = build([])
    index.insert_nodes([image_node])

    # test embedding query
    query_str = "What is?"
    retriever = index.as_retriever()
    results = retriever.retrieve(QueryBundle(query_str))

    assert len(results) == 1

    assert results[0].node.node_id == image_node.node_id
    assert isinstance(results[0].node, ImageNode)
    assert results[0].node.image == "potato"
