"""The ``llamaindex-default`` pipeline: what LlamaIndex users run today, all from the real packages.

``SentenceSplitter()`` with its defaults, ``HuggingFaceEmbedding`` on the same local model folder
as the landmark encoder, and ``QdrantVectorStore`` over ``qdrant-client`` in local (in-memory)
mode (the client comes from :mod:`lmk_rag.store.server`, the one module that imports ``qdrant_client``);
documents are ranked by their best node. Node embeddings go through the eval disk cache
(same vectors, computed once per model and corpus). The steps shared with the chunked baselines
(:mod:`~lmk_rag.eval.pipelines.llamaindex_chunked`) are in :mod:`~lmk_rag.eval.pipelines.llamaindex_nodes`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lmk_rag.eval.pipelines.base import IndexStats, PipelineOptions, Ranking, register_pipeline
from lmk_rag.eval.pipelines.llamaindex_nodes import document_scores, embed_and_index, split_documents, top_documents


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
        from llama_index.core.node_parser import SentenceSplitter
        from llama_index.embeddings.huggingface import HuggingFaceEmbedding

        from lmk_rag.encoder import resolve_model_path
        from lmk_rag.encoder.resolve import model_digest

        model_path = resolve_model_path(self.options.model)
        embed_model = HuggingFaceEmbedding(model_name=str(model_path), embed_batch_size=self.options.batch_size)
        splitter = SentenceSplitter()
        nodes = split_documents(docs, splitter)
        key = {"kind": "llamaindex-default", "model": model_digest(model_path),
               "chunk_size": splitter.chunk_size, "chunk_overlap": splitter.chunk_overlap}
        built = embed_and_index(nodes, embed_model, self.options, key)
        self._index = built.index
        self._n_nodes = len(nodes)
        return IndexStats(encode_s=built.encode_s, cached=built.cached)

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
            best = document_scores(self._index.as_retriever(similarity_top_k=depth).retrieve(query))
            if len(best) >= k or depth >= self._n_nodes:
                return top_documents(best, k)
            depth = min(4 * depth, self._n_nodes)
