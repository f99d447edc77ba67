"""The stock LlamaIndex retrieval of the quality report, as node retrievers: a thin wrapper over the report's
LlamaIndex baselines (``stock_pipelines.py``), so that a benchmark sees the same split, embeddings (through the eval
cache) and retrievers.

- ``stock-1024``: ``llamaindex-default`` (``SentenceSplitter()`` defaults: 1024-token nodes, ``HuggingFaceEmbedding``,
  ``VectorStoreIndex``), its nodes in its dense order;
- ``stock-250``: ``llamaindex-hybrid-relative`` (``SentenceSplitter(250/25)`` in model tokens, dense and BM25 fused by
  ``QueryFusionRetriever(mode="relative_score")``), its fused nodes in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stock_pipelines import LlamaIndexDefaultPipeline, LlamaIndexHybridPipeline

from lmk_rag.eval import PipelineOptions


class StockRetriever:
    """One stock recipe over a corpus: :meth:`retrieve` gives its ranked nodes (``ref_doc_id`` is the document's
    index as ``str``; ``start_char_idx``/``end_char_idx`` their spans).

    :param recipe: ``"stock-1024"`` or ``"stock-250"`` (see the module docstring).
    :param docs: the document texts.
    """

    def __init__(self, recipe: str, docs: Sequence[str]) -> None:
        """Split, embed (through the eval cache) and index the corpus with the recipe."""
        options = PipelineOptions()
        if recipe == "stock-1024":
            self._pipeline = LlamaIndexDefaultPipeline(options)
        elif recipe == "stock-250":
            self._pipeline = LlamaIndexHybridPipeline(options, "relative_score")
        else:
            raise ValueError(f"unknown recipe {recipe!r}")
        self.recipe = recipe
        self._pipeline.index(list(docs))

    def retrieve(self, query: str, nodes: int) -> list[Any]:
        """The recipe's first ``nodes`` nodes for a query (``NodeWithScore``), best first."""
        if self.recipe == "stock-1024":
            return self._pipeline._index.as_retriever(similarity_top_k=nodes).retrieve(query)
        return self._pipeline._fusion.retrieve(query)[:nodes]
