"""The stock LlamaIndex pipelines lmk-rag is measured against, all from the real LlamaIndex classes (research, not
part of the package: ``benchmarks/requirements.txt`` installs what they import).

Importing this module registers them in the eval harness (:func:`lmk_rag.eval.register_pipeline`), so
``benchmarks/report.py`` and the studies run them by name, and ``python benchmarks/stock_eval.py`` runs ``lmk-rag
eval`` with them on any BEIR folder:

- ``llamaindex-default``: what LlamaIndex users run today: ``SentenceSplitter()`` with its defaults,
  ``HuggingFaceEmbedding`` on the same local model folder as the landmark encoder, ``QdrantVectorStore`` over
  qdrant-client in local (in-memory) mode; a document scores its best node.
- What a well-informed LlamaIndex user builds with the same model: every one splits the documents the same way,
  ``SentenceSplitter(chunk_size=250, chunk_overlap=25)`` counting tokens with the model's own tokenizer (its Hugging
  Face tokenizer, no special tokens), so a node plus ``[CLS]``/``[SEP]`` fits ``HuggingFaceEmbedding(max_length=256)``
  and nothing is truncated. Then:

  - ``llamaindex-chunked``: dense, ``VectorStoreIndex`` (``QdrantVectorStore`` in local mode) retrieving 100 nodes;
  - ``llamaindex-chunked-bm25``: ``BM25Retriever`` (llama-index-retrievers-bm25, English stemmer and stop words)
    over the same nodes, 100 nodes;
  - ``llamaindex-hybrid-relative`` / ``llamaindex-hybrid-rrf``: ``QueryFusionRetriever`` over both retrievers
    (``num_queries=1``, ``mode="relative_score"`` / ``"reciprocal_rerank"``), 100 fused nodes;
  - ``llamaindex-fused``: each side's document scores (best node per document from its 100 nodes), min-max
    normalised per query and mixed at weight 0.5 (:func:`fuse_scores`); ``--encoder weight=W`` sets another dense
    weight (the quality report tunes it on each set, an upper bound no user gets).

A document scores its best (retrieved or fused) node, so a query whose 100 nodes come from fewer than ``k``
documents gets fewer than ``k`` results. A BM25 node scoring 0 holds no query term and is no hit (as in the
``bm25`` pipeline), except inside ``QueryFusionRetriever``, which fuses what the retriever returns as is.
Dense and BM25 sides share one split and one set of cached node embeddings (the eval disk cache: the same vectors,
computed once per model and corpus); a pipeline without a dense side embeds nothing. Only ``llamaindex-fused`` reads
``options.encoder`` (its ``weight``); the other recipes are fixed. LlamaIndex is imported inside the functions, so
importing this module stays cheap.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from lmk_rag.encoder import resolve_model_path
from lmk_rag.errors import InvalidInputError
from lmk_rag.eval import IndexStats, PipelineOptions, Ranking, cached_arrays, register_pipeline
from lmk_rag.research import model_digest

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
    """Embed the nodes (through :func:`lmk_rag.eval.cached_arrays`) and load them into a ``VectorStoreIndex``
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
    from qdrant_client import QdrantClient

    texts = node_texts(nodes)
    result = cached_arrays(options.cache_dir, key, texts, lambda: {
        "embeddings": np.asarray(embed_model.get_text_embedding_batch(texts), dtype=np.float32)})
    for node, embedding in zip(nodes, result.arrays["embeddings"]):
        node.embedding = embedding.tolist()
    store = QdrantVectorStore(client=QdrantClient(location=":memory:"), collection_name=_COLLECTION)
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


#: Node size and overlap in model tokens (special tokens not counted).
CHUNK_SIZE = 250
CHUNK_OVERLAP = 25
#: ``HuggingFaceEmbedding(max_length=...)``: the model's 256 positions, so 250 tokens + 2 special tokens fit.
MAX_LENGTH = 256
#: Nodes each retriever (and the fusion) returns per query.
TOP_NODES = 100
#: The dense side's weight in ``llamaindex-fused`` (BM25 gets ``1 - FUSED_WEIGHT``).
FUSED_WEIGHT = 0.5
#: ``BM25Retriever``'s stemmer and stop word language.
BM25_LANGUAGE = "english"


def min_max(scores: Mapping[int, float], docs: Sequence[int] | set[int]) -> dict[int, float]:
    """Min-max normalise one side's document scores over ``docs``; a document the side did not return gets the
    side's minimum, i.e. 0.

    When the side's scores are all equal (one document, or ties), its documents get 1 and the others 0; a side
    that returned nothing gives 0 everywhere.

    :param scores: ``{doc_index: score}`` of one side.
    :param docs: the documents to normalise over (a superset of ``scores``' keys).
    :return: ``{doc_index: value in [0, 1]}`` for every document in ``docs``.
    """
    if not scores:
        return dict.fromkeys(docs, 0.0)
    low, high = min(scores.values()), max(scores.values())
    if high == low:
        return {doc: 1.0 if doc in scores else 0.0 for doc in docs}
    return {doc: (scores.get(doc, low) - low) / (high - low) for doc in docs}


def fuse_scores(dense: Mapping[int, float], lexical: Mapping[int, float], weight: float = FUSED_WEIGHT
                ) -> dict[int, float]:
    """Mix two sides' document scores: each min-max normalised (:func:`min_max`) over the union of their
    documents, then ``weight * dense + (1 - weight) * lexical``.

    :param dense: ``{doc_index: score}`` of the dense side.
    :param lexical: ``{doc_index: score}`` of the BM25 side.
    :param weight: the dense side's weight, in ``[0, 1]``.
    :return: ``{doc_index: fused score}`` for every document either side returned.
    """
    docs = set(dense) | set(lexical)
    dense_norm, lexical_norm = min_max(dense, docs), min_max(lexical, docs)
    return {doc: weight * dense_norm[doc] + (1.0 - weight) * lexical_norm[doc] for doc in docs}


def make_splitter(model_path: Path) -> Any:
    """The baselines' node parser: ``SentenceSplitter(chunk_size=250, chunk_overlap=25)`` counting tokens with the
    model's Hugging Face tokenizer, special tokens left out.

    :param model_path: the model folder (its tokenizer files).
    :return: the ``SentenceSplitter``.
    """
    from llama_index.core.node_parser import SentenceSplitter
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_path))
    return SentenceSplitter(chunk_size=CHUNK_SIZE, chunk_overlap=CHUNK_OVERLAP,
                            tokenizer=partial(tokenizer.encode, add_special_tokens=False, verbose=False))


def embedding_key(model_path: Path) -> dict[str, Any]:
    """The eval cache key of the baselines' node embeddings: the model's digest and the split's settings (the node
    texts are hashed in beside it, :func:`lmk_rag.eval.cache_path`).

    :param model_path: the model folder.
    :return: the key.
    """
    return {"kind": "llamaindex-chunked", "model": model_digest(model_path), "splitter": "SentenceSplitter",
            "chunk_size": CHUNK_SIZE, "chunk_overlap": CHUNK_OVERLAP, "tokenizer": "model", "max_length": MAX_LENGTH}


@register_pipeline("llamaindex-chunked")
class LlamaIndexChunkedPipeline:
    """SentenceSplitter(250/25, model tokenizer) + HuggingFaceEmbedding(max_length=256) + VectorStoreIndex,
    100 nodes per query, a document scores its best node.

    The base of the other baselines here: subclasses say which sides they need (:attr:`dense`, :attr:`lexical`)
    and how a query scores documents (:meth:`_scores`).
    """

    #: Whether the pipeline embeds the nodes and searches them densely.
    dense = True
    #: Whether the pipeline builds a ``BM25Retriever`` over the nodes.
    lexical = False

    def __init__(self, options: PipelineOptions) -> None:
        """Keep the options (only ``model``, ``cache_dir``, ``batch_size`` are used).

        :param options: the pipeline options.
        """
        self.options = options
        self._dense_retriever: Any = None
        self._bm25_retriever: Any = None

    @property
    def settings(self) -> dict[str, Any]:
        """The recipe, reported as ``encoder`` in the eval JSON."""
        settings: dict[str, Any] = {
            "splitter": "SentenceSplitter", "chunk_size": CHUNK_SIZE, "chunk_overlap": CHUNK_OVERLAP,
            "tokenizer": "the model's (AutoTokenizer, no special tokens)", "similarity_top_k": TOP_NODES,
            "document_score": "best node",
        }
        if self.dense:
            settings.update(embedding="HuggingFaceEmbedding", max_length=MAX_LENGTH,
                            vector_store="QdrantVectorStore (local, in-memory)")
        if self.lexical:
            settings.update(bm25="BM25Retriever", stemmer=BM25_LANGUAGE, language=BM25_LANGUAGE)
        return settings

    def index(self, docs: Sequence[str]) -> IndexStats:
        """Split the documents, then embed the nodes (through the cache) into a vector index and/or build the
        BM25 retriever over them.

        :param docs: the document texts.
        :return: the cold embedding time (the cached one on a hit) plus the BM25 indexing time, and whether the
            embeddings came from the cache (never for a pipeline without a dense side).
        """
        model_path = resolve_model_path(self.options.model)
        nodes = split_documents(docs, make_splitter(model_path))
        encode_s, cached = 0.0, False
        if self.dense:
            from llama_index.embeddings.huggingface import HuggingFaceEmbedding

            embed_model = HuggingFaceEmbedding(model_name=str(model_path), max_length=MAX_LENGTH,
                                               embed_batch_size=self.options.batch_size)
            built = embed_and_index(nodes, embed_model, self.options, embedding_key(model_path))
            self._dense_retriever = built.index.as_retriever(similarity_top_k=TOP_NODES)
            encode_s, cached = built.encode_s, built.cached
        if self.lexical:
            import Stemmer
            from llama_index.retrievers.bm25 import BM25Retriever

            start = time.perf_counter()
            self._bm25_retriever = BM25Retriever.from_defaults(
                nodes=nodes, similarity_top_k=TOP_NODES, stemmer=Stemmer.Stemmer(BM25_LANGUAGE), language=BM25_LANGUAGE
            )
            encode_s += time.perf_counter() - start
        self._after_index()
        return IndexStats(encode_s=encode_s, cached=cached)

    def search(self, queries: Sequence[str], k: int) -> list[Ranking]:
        """Rank documents for each query by :meth:`_scores`.

        :param queries: the query texts.
        :param k: results per query at most.
        :return: one ranking per query, best first.
        """
        assert self._dense_retriever is not None or self._bm25_retriever is not None, "index() before search()"
        return [top_documents(self._scores(query), k) for query in queries]

    def _after_index(self) -> None:
        """Build what combines the retrievers (nothing here)."""

    def _scores(self, query: str) -> dict[int, float]:
        """Score documents for one query: here, the dense side.

        :param query: the query text.
        :return: ``{doc_index: score}``.
        """
        return self._dense_scores(query)

    def _dense_scores(self, query: str) -> dict[int, float]:
        return document_scores(self._dense_retriever.retrieve(query))

    def _lexical_scores(self, query: str) -> dict[int, float]:
        return document_scores(hit for hit in self._bm25_retriever.retrieve(query) if hit.score and hit.score > 0)


@register_pipeline("llamaindex-chunked-bm25")
class LlamaIndexChunkedBM25Pipeline(LlamaIndexChunkedPipeline):
    """``BM25Retriever`` over the chunked nodes (nothing embedded), 100 nodes, a document scores its best node."""

    dense = False
    lexical = True

    def _scores(self, query: str) -> dict[int, float]:
        return self._lexical_scores(query)


class LlamaIndexHybridPipeline(LlamaIndexChunkedPipeline):
    """``QueryFusionRetriever([dense, bm25], num_queries=1)`` over the chunked nodes, a document scores its best
    fused node."""

    dense = True
    lexical = True

    def __init__(self, options: PipelineOptions, mode: str) -> None:
        """:param options: the pipeline options.
        :param mode: ``QueryFusionRetriever``'s ``mode``: ``"relative_score"`` or ``"reciprocal_rerank"``.
        """
        super().__init__(options)
        self.mode = mode
        self._fusion: Any = None

    @property
    def settings(self) -> dict[str, Any]:
        """The recipe, with the fusion's."""
        return {**super().settings, "fusion": "QueryFusionRetriever", "mode": self.mode, "num_queries": 1}

    def _after_index(self) -> None:
        from llama_index.core.llms import MockLLM
        from llama_index.core.retrievers import QueryFusionRetriever

        # num_queries=1 generates no query, but without an llm the class resolves Settings.llm (OpenAI).
        self._fusion = QueryFusionRetriever(
            [self._dense_retriever, self._bm25_retriever], llm=MockLLM(), mode=self.mode,
            similarity_top_k=TOP_NODES, num_queries=1, use_async=False,
        )

    def _scores(self, query: str) -> dict[int, float]:
        return document_scores(self._fusion.retrieve(query))


@register_pipeline("llamaindex-fused")
class LlamaIndexFusedPipeline(LlamaIndexChunkedPipeline):
    """Dense and BM25 document scores (best node of each side's 100), min-max normalised per query over both
    sides' documents and mixed at :data:`FUSED_WEIGHT` (:func:`fuse_scores`)."""

    dense = True
    lexical = True

    def __init__(self, options: PipelineOptions) -> None:
        """:param options: the pipeline options; ``options.encoder`` may hold ``weight``, the dense side's weight
            in ``[0, 1]`` (default :data:`FUSED_WEIGHT`), and nothing else.
        :raises InvalidInputError: for another setting or a weight outside ``[0, 1]``.
        """
        super().__init__(options)
        unknown = sorted(set(options.encoder) - {"weight"})
        weight = options.encoder.get("weight", FUSED_WEIGHT)
        if unknown or isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 <= weight <= 1:
            raise InvalidInputError(
                f"llamaindex-fused takes one setting, weight=W (the dense side's weight, 0 to 1); got "
                f"{dict(options.encoder)}"
            )
        self.weight = float(weight)

    @property
    def settings(self) -> dict[str, Any]:
        """The recipe, with the fusion's."""
        return {**super().settings, "fusion": "min-max per query over both sides' documents, convex mix",
                "weight": self.weight}

    def sides(self, query: str) -> tuple[dict[int, float], dict[int, float]]:
        """One query's document scores on each side, before fusion.

        :param query: the query text.
        :return: ``({doc_index: dense score}, {doc_index: BM25 score})``.
        """
        return self._dense_scores(query), self._lexical_scores(query)

    def _scores(self, query: str) -> dict[int, float]:
        return fuse_scores(*self.sides(query), self.weight)


register_pipeline("llamaindex-hybrid-relative")(lambda options: LlamaIndexHybridPipeline(options, "relative_score"))
register_pipeline("llamaindex-hybrid-rrf")(lambda options: LlamaIndexHybridPipeline(options, "reciprocal_rerank"))
