"""The ``llamaindex-default`` pipeline: what LlamaIndex users run today, all from the real packages.

``SentenceSplitter()`` with its defaults, ``HuggingFaceEmbedding`` on the same local model folder
as the landmark encoder, and ``QdrantVectorStore`` over ``qdrant-client`` in local (in-memory)
mode (the client comes from :mod:`lmk_rag.store.server`, the one module that imports ``qdrant_client``);
documents are ranked by their best node. Node embeddings go through the eval disk cache
(same vectors, computed once per model and corpus).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lmk_rag.eval.cache import cached_arrays
from lmk_rag.eval.pipelines.base import IndexStats, PipelineOptions, Ranking, register_pipeline

_COLLECTION = "lmk_rag_eval"


@register_pipeline("llamaindex-default")
class LlamaIndexDefaultPipeline:
    """SentenceSplitter + HuggingFaceEmbedding + QdrantVectorStore (local mode), best node per document."""

    def __init__(self, options: PipelineOptions) -> None:
        """Keep the options (only ``model``, ``cache_dir``, ``batch_size`` are used).

        :param options: the pipeline options.
        """
        self.options = options
        self._index: Any = None
        self._n_nodes = 0

    def index(self, docs: Sequence[str]) -> IndexStats:
        """Split, embed (through the cache) and load the nodes into an in-memory Qdrant collection.

        :param docs: the document texts.
        :return: the cold embedding time and whether the cache was hit.
        """
        from llama_index.core import Document, StorageContext, VectorStoreIndex
        from llama_index.core.node_parser import SentenceSplitter
        from llama_index.core.schema import MetadataMode
        from llama_index.embeddings.huggingface import HuggingFaceEmbedding
        from llama_index.vector_stores.qdrant import QdrantVectorStore

        from lmk_rag.encoder import resolve_model_path
        from lmk_rag.encoder.resolve import model_digest
        from lmk_rag.store.server import ServerBackend

        model_path = resolve_model_path(self.options.model)
        embed_model = HuggingFaceEmbedding(model_name=str(model_path), embed_batch_size=self.options.batch_size)
        splitter = SentenceSplitter()
        nodes = splitter.get_nodes_from_documents([Document(text=text, id_=str(i)) for i, text in enumerate(docs)])
        texts = [node.get_content(metadata_mode=MetadataMode.EMBED) for node in nodes]
        key = {"kind": "llamaindex-default", "model": model_digest(model_path),
               "chunk_size": splitter.chunk_size, "chunk_overlap": splitter.chunk_overlap}
        result = cached_arrays(self.options.cache_dir, key, texts, lambda: {
            "embeddings": np.asarray(embed_model.get_text_embedding_batch(texts), dtype=np.float32)})
        for node, embedding in zip(nodes, result.arrays["embeddings"]):
            node.embedding = embedding.tolist()
        client = ServerBackend(location=":memory:", collection=_COLLECTION).client
        store = QdrantVectorStore(client=client, collection_name=_COLLECTION)
        self._index = VectorStoreIndex(
            nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed_model
        )
        self._n_nodes = len(nodes)
        return IndexStats(encode_s=result.encode_s, cached=result.cached)

    def search(self, queries: Sequence[str], k: int) -> list[Ranking]:
        """Retrieve nodes and rank documents by their best node.

        Fetches ``k`` nodes, and four times more while fewer than ``k`` distinct documents came
        back, so the top ``k`` documents by best node are exact.

        :param queries: the query texts.
        :param k: results per query.
        :return: one ranking per query.
        """
        assert self._index is not None, "index() must be called before search()"
        return [self._rank(query, k) for query in queries]

    def _rank(self, query: str, k: int) -> Ranking:
        depth = min(k, self._n_nodes)
        while True:
            best: dict[int, float] = {}
            for hit in self._index.as_retriever(similarity_top_k=depth).retrieve(query):
                doc = int(hit.node.ref_doc_id)
                if doc not in best:
                    best[doc] = float(hit.score)
            if len(best) >= k or depth >= self._n_nodes:
                return sorted(best.items(), key=lambda item: (-item[1], item[0]))[:k]
            depth = min(4 * depth, self._n_nodes)
