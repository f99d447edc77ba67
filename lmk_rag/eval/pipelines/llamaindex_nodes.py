"""What the LlamaIndex pipelines share: documents split into nodes, node embeddings through the eval disk cache,
a ``VectorStoreIndex`` over ``QdrantVectorStore`` in qdrant-client local (in-memory) mode, and documents ranked
by their best node.

Used by ``llamaindex-default`` (:mod:`~lmk_rag.eval.pipelines.llamaindex_default`) and the chunked baselines
(:mod:`~lmk_rag.eval.pipelines.llamaindex_chunked`). LlamaIndex is imported inside the functions, so importing
this module stays cheap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lmk_rag.eval.cache import cached_arrays
from lmk_rag.eval.pipelines.base import PipelineOptions, Ranking

_COLLECTION = "lmk_rag_eval"
_DOC_KEY = "doc_index"


@dataclass(frozen=True)
class NodeIndex:
    """Embedded nodes loaded into a vector index.

    :param index: the ``VectorStoreIndex``.
    :param encode_s: seconds the cold node embedding took (the time stored with the cache on a hit).
    :param cached: whether the embeddings came from the disk cache.
    """

    index: Any
    encode_s: float
    cached: bool


def split_documents(docs: Sequence[str], splitter: Any) -> list[Any]:
    """Split the documents into nodes; a node's ``ref_doc_id`` is its document's list index as ``str``.

    Each document carries its index as metadata (``doc_index``) left out of the embedded and LLM text, as a
    file name is for documents read from files: the node texts, their sizes and embeddings are those of the bare
    text, but two documents sharing a passage get two distinct nodes. (``TextNode.hash`` is text + metadata, and
    ``QueryFusionRetriever`` merges nodes by hash: without it a shared passage would count for one document.)

    :param docs: the document texts.
    :param splitter: a LlamaIndex node parser (e.g. ``SentenceSplitter``).
    :return: the nodes, in document order.
    """
    from llama_index.core import Document

    return splitter.get_nodes_from_documents([
        Document(text=text, id_=str(i), metadata={_DOC_KEY: i}, excluded_embed_metadata_keys=[_DOC_KEY],
                 excluded_llm_metadata_keys=[_DOC_KEY])
        for i, text in enumerate(docs)
    ])


def node_texts(nodes: Sequence[Any]) -> list[str]:
    """The texts the embedding model sees for the nodes (their embed-mode content: the bare text, see
    :func:`split_documents`).

    :param nodes: the nodes (from :func:`split_documents`).
    :return: one text per node.
    """
    from llama_index.core.schema import MetadataMode

    return [node.get_content(metadata_mode=MetadataMode.EMBED) for node in nodes]


def embed_and_index(nodes: list[Any], embed_model: Any, options: PipelineOptions, key: Mapping[str, Any]) -> NodeIndex:
    """Embed the nodes (through :func:`~lmk_rag.eval.cache.cached_arrays`) and load them into a ``VectorStoreIndex``
    over an in-memory ``QdrantVectorStore``.

    Sets each node's ``embedding``, so other retrievers over the same nodes see the same vectors.

    :param nodes: the nodes (from :func:`split_documents`).
    :param embed_model: the LlamaIndex embedding model (it embeds the nodes on a cache miss and the queries).
    :param options: the pipeline options (``cache_dir``).
    :param key: the cache key: the pipeline's kind, the model digest and every setting that shapes the vectors
        (the node texts are hashed in as well).
    :return: the index and what embedding cost.
    """
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.vector_stores.qdrant import QdrantVectorStore

    from lmk_rag.store.server import memory_client

    texts = node_texts(nodes)
    result = cached_arrays(options.cache_dir, key, texts, lambda: {
        "embeddings": np.asarray(embed_model.get_text_embedding_batch(texts), dtype=np.float32)})
    for node, embedding in zip(nodes, result.arrays["embeddings"]):
        node.embedding = embedding.tolist()
    store = QdrantVectorStore(client=memory_client(), collection_name=_COLLECTION)
    index = VectorStoreIndex(
        nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed_model
    )
    return NodeIndex(index=index, encode_s=result.encode_s, cached=result.cached)


def document_scores(hits: Iterable[Any]) -> dict[int, float]:
    """Score each document by its best node among retrieved nodes.

    :param hits: LlamaIndex ``NodeWithScore`` objects whose nodes come from :func:`split_documents`.
    :return: ``{doc_index: best node score}``.
    """
    best: dict[int, float] = {}
    for hit in hits:
        doc, score = int(hit.node.ref_doc_id), float(hit.score)
        if doc not in best or score > best[doc]:
            best[doc] = score
    return best


def top_documents(scores: Mapping[int, float], k: int) -> Ranking:
    """The ``k`` best documents, best first; ties go to the lower document index.

    :param scores: ``{doc_index: score}``.
    :param k: how many at most.
    :return: the ranking.
    """
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]
