"""LandmarkVectorStore: LlamaIndex's vector store interface over :class:`lmk_rag.store.LandmarkStore`."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from llama_index.core.bridge.pydantic import Field, PrivateAttr, ValidationError
from llama_index.core.indices.vector_store.base import VectorStoreIndex
from llama_index.core.schema import BaseNode, NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict

from llama_index.embeddings.landmark import LandmarkEmbedding
from llama_index.node_parser.landmark import ENCODER_KEY, LandmarkNode, without_encoder_key
from llama_index.vector_stores.landmark.filters import to_store_filter
from llama_index.vector_stores.landmark.search import search
from lmk_rag import TokenEncoder
from lmk_rag.adapters import clean_metadata, invalid_fields
from lmk_rag.errors import InvalidInputError, SettingsMismatchError, refuse_unknown
from lmk_rag.store import Hit, LandmarkStore, NodeRecord, Rerank, ServerOptions

NO_SOURCE = "lmk-rag:no-source:"
"""Prefix of the store document that holds a node without a SOURCE relationship (``NO_SOURCE + node_id``): such a
node is a document of its own, which ``delete(ref_doc_id)`` never reaches. Reserved: no ``ref_doc_id`` may start
with it."""


class HybridFusionCallable(Protocol):
    """QdrantVectorStore's ``hybrid_fusion_fn`` signature (``llama_index.vector_stores.qdrant.utils``): the dense and
    the sparse results of one query fused into one."""

    def __call__(
        self, dense_result: VectorStoreQueryResult, sparse_result: VectorStoreQueryResult, alpha: float = 0.5,
        top_k: int = 2,
    ) -> VectorStoreQueryResult:
        """Fuse ``dense_result`` and ``sparse_result`` (``alpha``: 1 dense only, 0 sparse only) into ``top_k``."""
        ...


QUERY_OPTIONS = ("rerank", "alpha", "mmr_threshold", "qdrant_filters")
"""The keyword arguments of :meth:`LandmarkVectorStore.query` (a retriever's ``vector_store_kwargs``)."""


UNSUPPORTED = {
    "sparse_doc_fn": "the sparse side is Qdrant's own BM25, computed by the engine from each node's text with IDF "
                     "at query time (bm25_language= picks its stop words and stemmer)",
    "sparse_query_fn": "the sparse side is Qdrant's own BM25, computed by the engine from the query text",
    "dense_vector_name": "the store's named vectors are fixed (node, chunks, bm25, ...: docs/store.md)",
    "sparse_vector_name": "the store's named vectors are fixed (node, chunks, bm25, ...: docs/store.md)",
    "dense_config": "the store sets its own vector parameters (cosine node vectors, MaxSim chunk multivectors)",
    "sparse_config": "the store sets its own sparse parameters (BM25 with Qdrant's IDF modifier)",
    "quantization_config": "each named vector has its own: open the store with LandmarkStore(..., quantization=..., "
                           "node_quantization=...) ('int8', 'binary' or 'turbo4') and pass it as store=",
    "sharding_method": "custom sharding is not offered; shard_number= spreads a collection over a cluster",
    "shard_key_selector_fn": "custom sharding is not offered; shard_number= spreads a collection over a cluster",
    "shard_keys": "custom sharding is not offered; shard_number= spreads a collection over a cluster",
}
"""``QdrantVectorStore`` arguments with no meaning here, and why (given, even as None, they raise
``NotImplementedError``)."""


def open_store(embed_model: LandmarkEmbedding | None, enable_hybrid: bool | None, **arguments: Any) -> LandmarkStore:
    """The :class:`LandmarkStore` a ``LandmarkVectorStore(...)`` opens (the one place its arguments meet the store's):
    ``enable_hybrid`` is the store's ``bm25``, ``embed_model`` lends its encoder, the qdrant-client options go into its
    ``server=ServerOptions(...)``, the others keep their names; None
    values are left out (the store's defaults apply).

    :param arguments: where the store is (``path``, ``url``, ``client``, ...) and the other arguments given.
    """
    given = {name: value for name, value in arguments.items() if value is not None}
    server = {option.name: given.pop(option.name) for option in fields(ServerOptions) if option.name in given}
    encoder = None if embed_model is None else embed_model.encoder
    return LandmarkStore(encoder=encoder, bm25=enable_hybrid, server=ServerOptions(**server) if server else None,
                         **given)


class LandmarkVectorStore(BasePydanticVectorStore):
    """Landmark nodes in Qdrant (Edge in-process, or a server), searched in two stages.

    The store encodes each query once (``is_embedding_query`` is False, so LlamaIndex does not embed it first) and
    runs one Query API call (on Edge, its BM25 search first): candidates by node vector and by BM25, each scored
    by a rerank (MaxSim over the nodes' chunk vectors with ``rerank="chunks"``, over static token vectors with
    ``"static"``, which needs a store opened with ``static_encoder=``, or the node vector's cosine with ``"none"``;
    by default the store's: ``"chunks"``, or ``"static"`` in a static store) fused with its BM25 score. Nodes from
    :class:`LandmarkNodeParser` bring their chunk vectors; other nodes with an embedding are written with that
    embedding as their only chunk vector. A static store (no transformer) comes from a static embedding:
    ``LandmarkVectorStore(path=..., embed_model=LandmarkEmbedding(static=True))``, parsed by the same
    :class:`LandmarkNodeParser`.
    Pass ``rerank`` or ``alpha`` per query with ``index.as_retriever(vector_store_kwargs={"rerank": "static"})``.
    Query modes, filters and what is not supported: docs/llamaindex.md.

    Example::

        with LandmarkVectorStore(path="./lmk_store", embed_model=LandmarkEmbedding()) as vector_store:
            index = vector_store.as_index()
            nodes = index.as_retriever(similarity_top_k=5).retrieve("compress a file")
    """

    stores_text: bool = True
    is_embedding_query: bool = False
    rerank: Rerank | None = Field(
        default=None, description="Default second stage: chunks, static or none (None: the store's)."
    )

    _store: LandmarkStore = PrivateAttr()
    _config: dict[str, Any] = PrivateAttr(default_factory=dict)
    _owns_store: bool = PrivateAttr(default=True)
    _embed_model: LandmarkEmbedding | None = PrivateAttr(default=None)
    _hybrid_fusion_fn: HybridFusionCallable | None = PrivateAttr(default=None)

    def __init__(
        self,
        collection_name: str | None = None,
        *,
        client: Any = None,
        aclient: Any = None,
        url: str | None = None,
        api_key: str | None = None,
        batch_size: int | None = None,
        parallel: int | None = None,
        max_retries: int | None = None,
        client_kwargs: dict[str, Any] | None = None,
        enable_hybrid: bool | None = None,
        hybrid_fusion_fn: HybridFusionCallable | None = None,
        payload_indexes: list[dict[str, Any]] | None = None,
        shard_number: int | None = None,
        replication_factor: int | None = None,
        write_consistency_factor: int | None = None,
        fastembed_sparse_model: str | None = None,
        index_doc_id: bool = True,
        text_key: str | None = "text",
        path: str | Path | None = None,
        location: str | None = None,
        read_only: bool | None = None,
        alpha: float | None = None,
        store: LandmarkStore | None = None,
        embed_model: LandmarkEmbedding | None = None,
        static_encoder: TokenEncoder | None = None,
        rerank: Rerank | str | None = None,
        **kwargs: Any,
    ) -> None:
        """Open a store, or wrap one. The arguments of ``QdrantVectorStore`` keep their meaning (a table in
        docs/llamaindex.md says which are mapped, accepted with a warning, or refused and why); the others are
        lmk-rag's. Any other :class:`LandmarkStore` option (``quantization``, ``on_disk``, ``hnsw_ef``, ...): open the
        store yourself and pass it as ``store``.

        :param collection_name: the collection on a Qdrant server or in local mode (default ``"lmk_rag"``); an
            Edge store (``path``) is its folder.
        :param client: an existing ``qdrant_client.QdrantClient``.
        :param aclient: a ``qdrant_client.AsyncQdrantClient``: the async methods call it natively (beside
            ``client`` on a server; alone in local mode). Built from ``url`` when not given.
        :param url: URL of a Qdrant server; ``api_key`` authenticates.
        :param api_key: API key for ``url``.
        :param batch_size: points per upsert request (None: 64, QdrantVectorStore's default).
        :param parallel: processes uploading points to a server (default 1).
        :param max_retries: times a failed upsert request to a server is sent again (default 3).
        :param client_kwargs: other arguments of the clients built for ``url`` or ``location``.
        :param enable_hybrid: BM25 sparse vectors beside the dense ones, fused into every ranking; None = as
            recorded (on for a new store: it wins on every dev set, docs/decisions.md).
        :param hybrid_fusion_fn: ``fn(dense_result, sparse_result, alpha=..., top_k=...) -> VectorStoreQueryResult``
            (QdrantVectorStore's ``HybridFusionCallable``) for ``hybrid`` queries, which then run the dense and the
            BM25 search apart and pass both; None: the store's own fusion (one Query API call; two on Edge).
        :param payload_indexes: ``[{"field_name": key, "field_schema": type}, ...]``: metadata keys to index.
        :param shard_number: shards of a new collection on a cluster.
        :param replication_factor: copies of each shard of a new collection.
        :param write_consistency_factor: replicas that must confirm a write, for a new collection.
        :param fastembed_sparse_model: accepted with a warning (the sparse side is Qdrant's own BM25; no FastEmbed
            model is loaded); turns ``enable_hybrid`` on, as in QdrantVectorStore.
        :param index_doc_id: the ``doc_id`` index is always made (deletes and versions filter by it); False warns.
        :param text_key: the payload key of the node text: ``"text"`` only.
        :param path: folder of an embedded Qdrant Edge store (the default ``./lmk_store``).
        :param location: qdrant-client local mode, ``":memory:"`` or a folder.
        :param read_only: open to read only (a reader beside a writer process, see :class:`LandmarkStore`).
        :param alpha: weight of the rerank score against BM25 (see :class:`LandmarkStore`); a query may override it.
        :param store: an open :class:`LandmarkStore` to use instead of the arguments above (:meth:`close` leaves it
            open: it is the caller's); the way to give any other store option.
        :param embed_model: share this model's encoder with the store (else the store builds its own
            from its recorded settings).
        :param static_encoder: a ``StaticTokenEncoder`` (a :class:`lmk_rag.TokenEncoder`) to fill and search static
            token vectors.
        :param rerank: the default second stage (None: the store's, ``"chunks"`` or ``"static"`` in a static store).
        :raises TypeError: for an argument this class does not take, naming the close ones.
        :raises NotImplementedError: for a QdrantVectorStore argument with no meaning here, saying why.
        :raises InvalidInputError: for a bad value, or ``store`` given with arguments that open a store.
        """
        for name in kwargs:
            if name in UNSUPPORTED:
                raise NotImplementedError(f"LandmarkVectorStore does not take {name}=: {UNSUPPORTED[name]}")
        if "bm25" in kwargs:
            raise TypeError("LandmarkVectorStore() takes enable_hybrid= (QdrantVectorStore's name) for BM25 on or off, "
                            "not bm25=")
        refuse_unknown("LandmarkVectorStore() (other LandmarkStore options: store=LandmarkStore(...))", kwargs,
                       set(inspect.signature(LandmarkVectorStore.__init__).parameters) - {"self", "kwargs"})
        if fastembed_sparse_model is not None:
            warnings.warn(f"fastembed_sparse_model={fastembed_sparse_model!r} is not loaded: the sparse side of "
                          "LandmarkVectorStore is Qdrant's own BM25 (LandmarkStore's bm25_language= picks its "
                          "language)", stacklevel=2)
            enable_hybrid = True if enable_hybrid is None else enable_hybrid
        for name, flag in (("enable_hybrid", enable_hybrid), ("index_doc_id", index_doc_id)):
            if flag is not None and not isinstance(flag, bool):
                raise InvalidInputError(f"{name} must be True or False, got {flag!r}")
        if text_key is not None and not isinstance(text_key, str):
            raise InvalidInputError(f"text_key must be the payload key of the node text, 'text', got {text_key!r}")
        if index_doc_id is False:
            warnings.warn("index_doc_id=False has no effect: the store always indexes doc_id (its deletes and "
                          "versions filter by it)", stacklevel=2)
        if text_key != "text":
            raise NotImplementedError(f"text_key={text_key!r}: a LandmarkVectorStore keeps node text under 'text'")
        if hybrid_fusion_fn is not None and not callable(hybrid_fusion_fn):
            raise InvalidInputError(f"hybrid_fusion_fn must be a callable (dense_result, sparse_result, alpha, "
                                    f"top_k) -> VectorStoreQueryResult, got {hybrid_fusion_fn!r}")
        options = {"alpha": alpha, "read_only": read_only, "payload_indexes": payload_indexes, "batch_size": batch_size,
                   "parallel": parallel, "max_retries": max_retries, "shard_number": shard_number,
                   "replication_factor": replication_factor, "write_consistency_factor": write_consistency_factor}
        opening = {"path": path, "url": url, "api_key": api_key, "client": client, "aclient": aclient,
                   "location": location, "collection_name": collection_name, "enable_hybrid": enable_hybrid,
                   "client_kwargs": client_kwargs, "static_encoder": static_encoder, **options}
        if store is not None and any(value is not None for value in opening.values()):
            given = sorted(name for name, value in opening.items() if value is not None)
            raise InvalidInputError(f"give either store= or the arguments that open one ({', '.join(given)}), not both")
        try:
            super().__init__(rerank=rerank)
        except ValidationError as error:
            raise invalid_fields("LandmarkVectorStore", error) from None
        self._owns_store = store is None
        self._store = store or open_store(embed_model, **opening)
        self._embed_model = embed_model
        self._hybrid_fusion_fn = hybrid_fusion_fn
        self._config = {name: value for name, value in options.items() if value is not None}

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises this class under."""
        return "LandmarkVectorStore"

    def to_dict(self, **kwargs: Any) -> dict[str, Any]:
        """The configuration that reopens this store with :meth:`from_dict`: where it is (``path``, or ``url`` /
        ``location`` with ``collection_name``, also when it was reached through ``client=`` or ``store=``),
        ``enable_hybrid`` as the store records it, ``rerank`` and the other arguments given (JSON values).

        Never the API key, nor ``client_kwargs`` (headers or a token provider may be credentials) or objects
        (``client``, ``aclient``, ``embed_model``, ``static_encoder``, ``hybrid_fusion_fn``): give them to
        ``from_dict(data, api_key=...)`` again. The store rebuilds its encoder from its recorded settings.

        :raises TypeError: for any argument (pydantic's ``model_dump`` options do not apply).
        :raises InvalidInputError: for a store reached through a client this cannot locate (a ``host=`` client).
        """
        if kwargs:
            raise TypeError(f"LandmarkVectorStore.to_dict() takes no arguments, got {', '.join(sorted(kwargs))}")
        rerank = {} if self.rerank is None else {"rerank": self.rerank}
        return {**self._config, **self._location(), "enable_hybrid": self._store.bm25, **rerank,
                "class_name": self.class_name()}

    def _location(self) -> dict[str, Any]:
        """Where the store is, as constructor arguments: ``path`` of an Edge store, else the ``url`` or the
        local-mode ``location`` its qdrant-client was made with (``init_options``), and ``collection_name``."""
        if self._store.collection_name is None:
            return {"path": self._store.where}
        options = self._client_options()
        place = {"url": options["url"]} if options.get("url") else {"location": options.get("path") or
                                                                     options.get("location")}
        if None in place.values():
            raise InvalidInputError(
                "LandmarkVectorStore.to_dict(): the store's client connects by host=, which from_dict cannot "
                "reopen; open it with url= (or a client made with url=) to serialise it"
            )
        return {**place, "collection_name": self._store.collection_name}

    def _client_options(self) -> dict[str, Any]:
        """The arguments the store's qdrant-client was made with (``QdrantClient.init_options``)."""
        return (self._store.client or self._store.aclient).init_options

    @property
    def url(self) -> str | None:
        """URL of the Qdrant server; None on Edge and in local mode (as ``QdrantVectorStore.url``)."""
        return None if self._store.collection_name is None else self._client_options().get("url")

    @property
    def batch_size(self) -> int:
        """Points per upsert request (on Edge, per update operation)."""
        return int(self._store.backend.batch_size)  # type: ignore[attr-defined]

    @property
    def parallel(self) -> int:
        """Processes uploading points to a server: 1 on Edge and in local mode, which upload in-process."""
        return int(getattr(self._store.backend, "parallel", 1))

    @property
    def enable_hybrid(self) -> bool:
        """Whether the store holds BM25 vectors, fused into every ranking (as the store records it)."""
        return self._store.bm25

    @property
    def flat_metadata(self) -> bool:
        """False: metadata may nest (dicts and lists of JSON values), as ``QdrantVectorStore(flat_metadata=False)``
        keeps it."""
        return False

    @property
    def store(self) -> LandmarkStore:
        """The underlying :class:`LandmarkStore`."""
        return self._store

    @property
    def client(self) -> Any:
        """The ``QdrantClient`` where the store has one (a server or local mode), None on Edge."""
        return self._store.client

    @property
    def aclient(self) -> Any:
        """The ``AsyncQdrantClient`` the async methods call, None where there is none (they run the sync calls in
        a worker thread then)."""
        return self._store.aclient

    @property
    def collection_name(self) -> str | None:
        """The collection on a qdrant-client backend, None on Edge (the store is its folder)."""
        return self._store.collection_name

    @property
    def embed_model(self) -> LandmarkEmbedding:
        """The embedding model of the store's vectors: the one given, else a :class:`LandmarkEmbedding` over the
        store's encoder (rebuilt from the store's recorded settings), so nothing else needs to be configured."""
        if self._embed_model is None:
            self._embed_model = LandmarkEmbedding(encoder=self._store.encoder)
        return self._embed_model

    def as_index(self, **kwargs: Any) -> VectorStoreIndex:
        """A ``VectorStoreIndex`` over this store that embeds with :attr:`embed_model`: opening an existing store
        in a new process needs neither ``Settings.embed_model`` nor LlamaIndex's OpenAI default.

        :param kwargs: other ``VectorStoreIndex.from_vector_store`` arguments.
        :return: the index.
        """
        return VectorStoreIndex.from_vector_store(self, embed_model=kwargs.pop("embed_model", self.embed_model),
                                                  **kwargs)

    # ------------------------------------------------------------------ writing

    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """Write nodes (with their embeddings) into their documents, keeping the documents' other stored nodes
        (:meth:`LandmarkStore.add_nodes`). Node ids are unique in the store: a node id already stored is overwritten,
        also when it was stored under another document; of one id given twice, the last wins.

        :param nodes: nodes with ``embedding`` set, grouped by ``ref_doc_id`` into documents (a node without one is
            a document of its own, see :data:`NO_SOURCE`).
        :return: the node ids.
        :raises InvalidInputError: for a node without an embedding, or a ``ref_doc_id`` starting with
            :data:`NO_SOURCE`.
        :raises SettingsMismatchError: for nodes embedded by another encoder than the store's.
        :raises TypeError: for any keyword argument (the store takes none here; nothing passed is ignored).
        """
        refuse_unknown("LandmarkVectorStore.add()", add_kwargs, ())
        if isinstance(nodes, (str, bytes, BaseNode)) or not isinstance(nodes, Sequence) or not all(
                isinstance(node, BaseNode) for node in nodes):
            raise InvalidInputError(f"nodes must be a list of LlamaIndex nodes (BaseNode), got {nodes!r:.80}")
        latest = {node.node_id: node for node in nodes}
        if latest:
            fingerprint = self._store.settings["encoder"]["fingerprint"]
            self._store.add_nodes([_to_record(node, fingerprint) for node in latest.values()])
        return [node.node_id for node in nodes]

    async def async_add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """:meth:`add`, awaitable: with an :attr:`aclient`, its engine calls are that client's (see
        :meth:`LandmarkStore.call_async`)."""
        return await self._store.call_async(self.add, nodes, **add_kwargs)

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Delete every node of a document (nodes without a SOURCE relationship are never a document's).

        :param ref_doc_id: the document id (the nodes' ``ref_doc_id``).
        :raises TypeError: for any keyword argument (the store takes none here; nothing passed is ignored).
        """
        refuse_unknown("LandmarkVectorStore.delete()", delete_kwargs, ())
        self._store.delete_document(ref_doc_id)

    async def adelete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """:meth:`delete`, awaitable (as :meth:`async_add`)."""
        await self._store.call_async(self.delete, ref_doc_id, **delete_kwargs)

    def delete_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None, **delete_kwargs: Any
    ) -> None:
        """Delete nodes by id and/or metadata filter (both None: every node); the other nodes of their documents
        stay.

        :param node_ids: node ids (an empty list deletes nothing).
        :param filters: metadata filters.
        :raises TypeError: for any other keyword argument.
        """
        refuse_unknown("LandmarkVectorStore.delete_nodes()", delete_kwargs, ())
        flt = to_store_filter(filters)
        self._store.delete_nodes(node_ids=node_ids, filter=flt)

    async def adelete_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None, **delete_kwargs: Any
    ) -> None:
        """:meth:`delete_nodes`, awaitable (as :meth:`async_add`)."""
        await self._store.call_async(self.delete_nodes, node_ids, filters, **delete_kwargs)

    def clear(self) -> None:
        """Delete every node (the store keeps its encoder settings)."""
        self._store.clear()

    async def aclear(self) -> None:
        """:meth:`clear`, awaitable (as :meth:`async_add`)."""
        await self._store.call_async(self.clear)

    # ------------------------------------------------------------------ reading

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """Search by the query's mode (``default``, ``hybrid``, ``sparse``, ``text_search``, ``mmr``; see
        :mod:`llama_index.vector_stores.landmark.search`).

        :param query: LlamaIndex's query: ``query_str`` (encoded once by the store) or, without it,
            ``query_embedding``; ``similarity_top_k``, ``filters``, ``doc_ids``, ``node_ids``, ``mode``, ``alpha``,
            ``mmr_threshold``. With a ``hybrid_fusion_fn``, a ``hybrid`` query runs the dense search
            (``similarity_top_k``) and the BM25 search (``sparse_top_k``) apart and returns the function's fusion of
            the two.
        :param kwargs: ``rerank`` (``"chunks"``, ``"static"``, ``"none"``) and ``alpha`` (weight of the rerank
            score against BM25, see :meth:`LandmarkStore.search`) override the store's defaults; ``mmr_threshold``
            overrides the query's; ``qdrant_filters`` (a qdrant-client ``models.Filter``, as ``QdrantVectorStore``
            takes it) must hold beside the query's ``filters`` (AND).
        :return: the nodes, their scores (in [-1, 1]) and ids, best first.
        :raises TypeError: for another keyword argument, naming the close ones.
        """
        refuse_unknown("LandmarkVectorStore.query() (a retriever's vector_store_kwargs)",
                       {name: value for name, value in kwargs.items() if name not in QUERY_OPTIONS}, QUERY_OPTIONS)
        fusion = self._hybrid_fusion_fn
        if fusion is None or query.mode != VectorStoreQueryMode.HYBRID or not query.query_str:
            return self._result(self._search(query, **kwargs))
        kwargs.pop("alpha", None)
        dense = self._search(replace(query, mode=VectorStoreQueryMode.DEFAULT), alpha=1.0, **kwargs)
        sparse = self._search(replace(query, mode=VectorStoreQueryMode.SPARSE), **kwargs)
        return fusion(self._result(dense), self._result(sparse), alpha=0.5 if query.alpha is None else query.alpha,
                      top_k=query.hybrid_top_k or query.similarity_top_k)

    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """:meth:`query`, awaitable (as :meth:`async_add`)."""
        return await self._store.call_async(self.query, query, **kwargs)

    def _search(
        self, query: VectorStoreQuery, rerank: Rerank | str | None = None, alpha: float | None = None, **kwargs: Any
    ) -> list[Hit]:
        """The store's hits for a LlamaIndex query."""
        return search(self._store, query, rerank or self.rerank, alpha, **kwargs)

    def _result(self, hits: list[Hit]) -> VectorStoreQueryResult:
        """LlamaIndex's result from store hits."""
        nodes = [_to_node(hit.node_id, hit.doc_id, hit.text, hit.span, hit.metadata) for hit in hits]
        return VectorStoreQueryResult(
            nodes=nodes, similarities=[hit.score for hit in hits], ids=[hit.node_id for hit in hits]
        )

    def get_nodes(self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None) -> list[BaseNode]:
        """Stored nodes by id and/or metadata filter, with their embeddings.

        :param node_ids: node ids (None: every node matching ``filters``; an empty list: none).
        :param filters: metadata filters.
        :return: the nodes, in no particular order.
        """
        flt = to_store_filter(filters)
        records = self._store.get_nodes(node_ids=node_ids, filter=flt)
        nodes = []
        for record in records:
            node = _to_node(record.node_id, record.doc_id, record.text, record.span, record.metadata)
            node.embedding = record.vector.tolist()
            nodes.append(node)
        return nodes

    async def aget_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None
    ) -> list[BaseNode]:
        """:meth:`get_nodes`, awaitable (as :meth:`async_add`)."""
        return await self._store.call_async(self.get_nodes, node_ids, filters)

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Close the store this vector store opened (flush, release its lock); one given as ``store=`` stays open."""
        if self._owns_store:
            self._store.close()

    def __enter__(self) -> LandmarkVectorStore:
        """Use as a context manager."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close on exit."""
        self.close()


def _node_metadata(node: BaseNode) -> dict[str, Any]:
    """The node as LlamaIndex's stores keep it (metadata plus the node's JSON, text left out), its metadata under
    the core API's policy (:func:`lmk_rag.adapters.clean_metadata`: dates as ISO strings, tuples and sets as
    lists; NaN, infinity and bytes refused, where pydantic's JSON dump would write null and text).

    :raises InvalidInputError: for metadata the store cannot keep, naming the node.
    """
    bare = without_encoder_key(node)
    bare.metadata = clean_metadata(bare.metadata, f"node {node.node_id!r}")
    try:
        return node_to_metadata_dict(bare, remove_text=True)
    except (ValueError, TypeError) as error:  # pydantic's serialisation errors are ValueErrors
        raise InvalidInputError(
            f"node {node.node_id!r}: its metadata cannot be serialised ({error}); use JSON values (str, numbers, "
            "bool, None, lists and dicts of those)"
        ) from None


def _to_record(node: BaseNode, fingerprint: str) -> NodeRecord:
    """A store record from a node: its embedding, its chunk vectors and its JSON. A :class:`LandmarkNode` brings its
    chunk vectors; another node from the landmark parser (through JSON: a docstore, the ingestion cache, another
    process) has them encoded again by the store; a node of another parser has its embedding as its one chunk vector.

    :param fingerprint: the store's encoder fingerprint, which the node's (``metadata[ENCODER_KEY]``) must equal.
    :raises InvalidInputError: for a node without an embedding, or a reserved ``ref_doc_id``.
    :raises SettingsMismatchError: for a node embedded by another encoder.
    """
    if node.embedding is None:
        raise InvalidInputError(
            f"node {node.node_id!r} has no embedding: parse with LandmarkNodeParser or set Settings.embed_model"
        )
    if node.ref_doc_id is not None and node.ref_doc_id.startswith(NO_SOURCE):
        raise InvalidInputError(f"node {node.node_id!r}: ref_doc_id may not start with {NO_SOURCE!r} (reserved)")
    made_by = node.metadata.get(ENCODER_KEY)
    if made_by is not None and made_by != fingerprint:
        raise SettingsMismatchError(
            f"node {node.node_id!r} was embedded by encoder {made_by}, the store holds vectors of {fingerprint}: "
            "parse with the store's encoder settings (LandmarkVectorStore.store.encoder.settings)"
        )
    vector = np.asarray(node.embedding, dtype=np.float32)
    chunk_vectors = node.chunk_vectors if isinstance(node, LandmarkNode) else None
    text, start, end = node.get_content(), getattr(node, "start_char_idx", None), getattr(node, "end_char_idx", None)
    return NodeRecord(
        node_id=node.node_id,
        doc_id=node.ref_doc_id or NO_SOURCE + node.node_id,
        text=text,
        span=(start or 0, end if end is not None else (start or 0) + len(text)),
        vector=vector,
        chunk_vectors=vector[None, :] if chunk_vectors is None and made_by is None else chunk_vectors,
        metadata=_node_metadata(node),
    )


def _to_node(node_id: str, doc_id: str, text: str, span: tuple[int, int], metadata: dict[str, Any]) -> BaseNode:
    """The LlamaIndex node of a stored node: rebuilt from its JSON when LlamaIndex wrote it, else from the fields."""
    if "_node_content" in metadata:
        return metadata_dict_to_node(metadata, text=text)
    return TextNode(
        id_=node_id,
        text=text,
        start_char_idx=span[0],
        end_char_idx=span[1],
        metadata=dict(metadata),
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=doc_id)},
    )
