"""LandmarkVectorStore: LlamaIndex's vector store interface over :class:`lmk_rag.store.LandmarkStore`."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

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
from llama_index.vector_stores.landmark.evidence import add_evidence
from llama_index.vector_stores.landmark.filters import to_store_filter
from lmk_rag import TokenEncoder
from lmk_rag.adapters import clean_metadata, invalid_fields
from lmk_rag.errors import EmptyTextError, InvalidInputError, SettingsMismatchError, refuse_unknown
from lmk_rag.store import Hit, LandmarkStore, NodeRecord, Rerank, ServerOptions

NO_SOURCE = "lmk-rag:no-source:"
"""Prefix of the store document that holds a node without a SOURCE relationship (``NO_SOURCE + node_id``): such a
node is a document of its own, which ``delete(ref_doc_id)`` never reaches. Reserved: no ``ref_doc_id`` may start
with it."""


HybridFusionCallable = Callable[..., VectorStoreQueryResult]
"""QdrantVectorStore's ``hybrid_fusion_fn``: ``fn(dense_result, sparse_result, alpha=..., top_k=...)``, the dense and
the sparse results of one query fused into one (``alpha``: 1 dense only, 0 sparse only)."""

QUERY_OPTIONS = ("rerank", "alpha", "mmr_threshold", "qdrant_filters")
"""The keyword arguments of :meth:`LandmarkVectorStore.query` (a retriever's ``vector_store_kwargs``)."""
FUSED_MODES = {VectorStoreQueryMode.DEFAULT: None, VectorStoreQueryMode.HYBRID: None,
               VectorStoreQueryMode.SPARSE: 0.0, VectorStoreQueryMode.TEXT_SEARCH: 0.0}
"""The modes the store's fused search runs, and the ``alpha`` each fixes (None: ``VectorStoreQuery.alpha`` in
``hybrid``, else the query kwarg's, else the store's; 0: BM25 alone)."""
LEXICAL = (VectorStoreQueryMode.SPARSE, VectorStoreQueryMode.TEXT_SEARCH)
"""The modes that rank by BM25 alone: a query without BM25 terms (stop words only, or words no node holds) finds
nothing; they never answer with the dense ranking."""
MMR_DEFAULT = 0.5
"""``mmr_threshold`` when neither the query nor its kwargs give one (LlamaIndex's default)."""


UNSUPPORTED = {
    "sparse_doc_fn": "the sparse side is Qdrant's own BM25, computed by the engine from each node's text with IDF "
                     "at query time (bm25_language= picks its stop words and stemmer)",
    "sparse_query_fn": "the sparse side is Qdrant's own BM25, computed by the engine from the query text",
    **dict.fromkeys(("dense_vector_name", "sparse_vector_name"),
                    "the store's named vectors are fixed (node, chunks, bm25, ...: docs/store.md)"),
    "dense_config": "the store sets its own vector parameters (cosine node vectors, MaxSim chunk multivectors)",
    "sparse_config": "the store sets its own sparse parameters (BM25 with Qdrant's IDF modifier)",
    "quantization_config": "each named vector has its own: open the store with LandmarkStore(..., storage="
                           "StorageOptions(quantization=..., node_quantization=...)) ('int8', 'binary' or 'turbo4') "
                           "and pass it as store=",
    **dict.fromkeys(("sharding_method", "shard_key_selector_fn", "shard_keys"),
                    "custom sharding is not offered; shard_number= spreads a collection over a cluster"),
}
"""``QdrantVectorStore`` arguments with no meaning here, and why (given, even as None, they raise
``NotImplementedError``)."""


class LandmarkVectorStore(BasePydanticVectorStore):
    """Landmark nodes in Qdrant (Edge in-process, or a server), searched in two stages by the
    :class:`LandmarkStore` it opens or wraps (:meth:`LandmarkStore.search`), which encodes each query once
    (``is_embedding_query`` is False). Nodes from :class:`LandmarkNodeParser` bring their chunk vectors; other nodes
    with an embedding are written with it as their one chunk vector. A static store (no transformer) comes from
    ``embed_model=LandmarkEmbedding(static=True)``. Pass ``rerank``, ``alpha``, ``mmr_threshold`` or
    ``qdrant_filters`` per query with ``index.as_retriever(vector_store_kwargs={"rerank": "static"})``. Query
    modes, filters and what is not supported: docs/llamaindex.md.

    Example::

        with LandmarkVectorStore(path="./lmk_store", embed_model=LandmarkEmbedding()) as vector_store:
            index = vector_store.as_index()
            nodes = index.as_retriever(similarity_top_k=5).retrieve("compress a file")
    """

    stores_text: bool = True
    is_embedding_query: bool = False
    rerank: Rerank | None = Field(
        default=None, description="Default second stage: chunks, static or node (None: the store's)."
    )

    _store: LandmarkStore = PrivateAttr()
    _config: dict[str, Any] = PrivateAttr(default_factory=dict)
    _owns_store: bool = PrivateAttr(default=True)
    _embed_model: LandmarkEmbedding | None = PrivateAttr(default=None)
    _hybrid_fusion_fn: HybridFusionCallable | None = PrivateAttr(default=None)
    _not_serialised: list[str] = PrivateAttr(default_factory=list)

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
        create: bool = True,
        **kwargs: Any,
    ) -> None:
        """Open a store, or wrap one. The arguments of ``QdrantVectorStore`` keep their meaning (a table in
        docs/llamaindex.md says which are mapped, accepted with a warning, or refused and why); the others are
        lmk-rag's. Any other :class:`LandmarkStore` option (``quantization``, ``on_disk``, ``hnsw_ef``, ...): open the
        store yourself and pass it as ``store``.

        :param collection_name: the collection on a Qdrant server or in local mode (default ``"lmk_rag"``); an
            Edge store (``path``) is its folder.
        :param client: an existing ``qdrant_client.QdrantClient``; ``aclient`` an ``AsyncQdrantClient`` the async
            methods call natively (beside ``client``, or alone in local mode; built from ``url`` when not given).
        :param url: URL of a Qdrant server; ``api_key`` authenticates; ``client_kwargs`` are the other arguments of
            the clients built for ``url`` or ``location``.
        :param batch_size: points per upsert request (None: 64); ``parallel`` processes upload to a server (1),
            ``max_retries`` times a failed upsert is sent again (3); ``shard_number``, ``replication_factor`` and
            ``write_consistency_factor`` shape a new collection on a cluster (:class:`lmk_rag.store.ServerOptions`).
        :param enable_hybrid: BM25 sparse vectors fused into every ranking (the store's ``bm25``); None = as
            recorded (on for a new store). ``fastembed_sparse_model`` is accepted with a warning and turns it on.
        :param hybrid_fusion_fn: a :data:`HybridFusionCallable` for ``hybrid`` queries, which then run the dense and
            the BM25 search apart and pass both; None: the store's own fusion (one Query API call; two on Edge).
        :param payload_indexes: ``[{"field_name": key, "field_schema": type}, ...]``: metadata keys to index.
        :param index_doc_id: the ``doc_id`` index is always made; False warns. ``text_key``: ``"text"`` only.
        :param path: folder of an Edge store (the default ``./lmk_store``); ``location`` qdrant-client local mode
            (``":memory:"`` or a folder); ``read_only``, ``alpha``, ``static_encoder`` as :class:`LandmarkStore`'s.
        :param store: an open :class:`LandmarkStore` instead of the arguments above, the way to give any other
            store option (:meth:`close` leaves it open: it is the caller's).
        :param embed_model: share this model's encoder with the store (else the store builds its own).
        :param rerank: the default second stage (None: the store's, ``"chunks"`` or ``"static"`` in a static store).
        :param create: create the store when it is missing (False: :class:`~lmk_rag.errors.StoreNotFoundError`, as
            :meth:`from_dict` and unpickling open it).
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
        if text_key != "text":
            error = NotImplementedError if text_key is None or isinstance(text_key, str) else InvalidInputError
            raise error(f"text_key={text_key!r}: a LandmarkVectorStore keeps node text under 'text'")
        if index_doc_id is False:
            warnings.warn("index_doc_id=False has no effect: the store always indexes doc_id (its deletes and "
                          "versions filter by it)", stacklevel=2)
        if hybrid_fusion_fn is not None and not callable(hybrid_fusion_fn):
            raise InvalidInputError(f"hybrid_fusion_fn must be a callable (dense_result, sparse_result, alpha, "
                                    f"top_k) -> VectorStoreQueryResult, got {hybrid_fusion_fn!r}")
        config = {"alpha": alpha, "read_only": read_only, "payload_indexes": payload_indexes, "batch_size": batch_size,
                  "parallel": parallel, "max_retries": max_retries, "shard_number": shard_number,
                  "replication_factor": replication_factor, "write_consistency_factor": write_consistency_factor}
        config = {name: value for name, value in config.items() if value is not None}  # what to_dict records
        opening = {"path": path, "url": url, "api_key": api_key, "client": client, "aclient": aclient,
                   "location": location, "collection_name": collection_name, "enable_hybrid": enable_hybrid,
                   "client_kwargs": client_kwargs, "static_encoder": static_encoder}
        given = {**{name: value for name, value in opening.items() if value is not None}, **config}
        if store is not None and given:
            raise InvalidInputError(f"give either store= or the arguments that open one ({', '.join(sorted(given))}), "
                                    "not both")
        try:  # Rerank itself names a mode's new name (a config recorded "none": now "node")
            super().__init__(rerank=None if rerank is None else Rerank(rerank))
        except ValidationError as error:
            raise invalid_fields("LandmarkVectorStore", error) from None
        self._config, self._owns_store = config, store is None
        self._not_serialised = sorted(name for name, value in (
            ("api_key", api_key), ("client_kwargs", client_kwargs), ("static_encoder", static_encoder),
            ("hybrid_fusion_fn", hybrid_fusion_fn)) if value is not None)
        if store is None:  # enable_hybrid is the store's bm25, the qdrant-client options its server=ServerOptions(...)
            server = {option.name: given.pop(option.name) for option in fields(ServerOptions) if option.name in given}
            store = LandmarkStore(encoder=None if embed_model is None else embed_model.encoder,
                                  bm25=given.pop("enable_hybrid", None), create=create,
                                  server=ServerOptions(**server) if server else None, **given)
        self._store, self._embed_model, self._hybrid_fusion_fn = store, embed_model, hybrid_fusion_fn

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

    @classmethod
    def from_dict(cls, data: dict[str, Any], **kwargs: Any) -> LandmarkVectorStore:
        """Reopen the store :meth:`to_dict` describes (its folder is absolute: from any working directory). It never
        creates one: a store that is not there any more is an error, not a new empty store.

        :param data: what :meth:`to_dict` returned (``class_name`` is left out).
        :param kwargs: the arguments ``to_dict`` leaves out (``api_key=``, ``embed_model=``, ...); ``create=True``
            creates a missing store after all.
        :raises StoreNotFoundError: when no store is at the recorded folder (or collection), naming it.
        """
        return super().from_dict(data, **{"create": False, **kwargs})

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the configuration, not the open store: :meth:`to_dict`'s (the store's absolute folder or its
        collection; no model weights), which unpickling reopens as :meth:`from_dict` does (docs/llamaindex.md,
        "Serialisation and pickling").

        :raises InvalidInputError: for a store given what ``to_dict`` leaves out (``api_key``, ``client_kwargs``,
            ``static_encoder``, ``hybrid_fusion_fn``), which its copy would silently lack: serialise it with
            ``to_dict()`` and give those to ``from_dict(data, ...)`` again.
        """
        if self._not_serialised:
            raise InvalidInputError(
                f"LandmarkVectorStore cannot be pickled: it was given {', '.join(self._not_serialised)}, which a "
                "pickle does not carry (no credentials, no objects); serialise it with to_dict() and reopen it with "
                f"LandmarkVectorStore.from_dict(data, {', '.join(f'{name}=...' for name in self._not_serialised)})"
            )
        data = self.to_dict()
        data.pop("class_name")
        return data

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Reopen the pickled configuration (see :meth:`__getstate__`); a store no longer there is an error.

        :raises StoreNotFoundError: when no store is at the recorded folder (or collection).
        """
        self.__init__(**state, create=False)  # type: ignore[misc]

    def _location(self) -> dict[str, Any]:
        """Where the store is, as constructor arguments: ``path`` of an Edge store, else the ``url`` or the
        local-mode ``location`` its qdrant-client was made with (``init_options``), and ``collection_name``."""
        if self._store.collection_name is None:
            return {"path": self._store.where}
        options = self._client_options()
        folder = options.get("path")  # a client the caller made may name its folder relative to where it ran
        place = {"url": options["url"]} if options.get("url") else {
            "location": str(Path(folder).resolve()) if folder else options.get("location")}
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
        """Whether the store holds BM25 vectors, fused into every ranking (the store's ``bm25``)."""
        return self._store.bm25

    @property
    def flat_metadata(self) -> bool:
        """False: metadata may nest, as ``QdrantVectorStore(flat_metadata=False)`` keeps it."""
        return False

    @property
    def store(self) -> LandmarkStore:
        """The underlying :class:`LandmarkStore`: its ``client``, ``aclient`` and ``collection_name`` are this
        store's (None on Edge; without an ``aclient`` the async methods run the sync calls in a worker thread)."""
        return self._store

    @property
    def client(self) -> Any:
        """The store's ``QdrantClient``, None on Edge."""
        return self._store.client

    @property
    def aclient(self) -> Any:
        """The store's ``AsyncQdrantClient``, None where there is none."""
        return self._store.aclient

    @property
    def collection_name(self) -> str | None:
        """The store's collection, None on Edge (the store is its folder)."""
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
        (:meth:`LandmarkStore.upsert_nodes`). Node ids are unique in the store: a node id already stored is overwritten,
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
            self._store.upsert_nodes([_to_record(node, fingerprint) for node in latest.values()])
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
        self._store.delete_nodes(node_ids=node_ids, filter=to_store_filter(filters))

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
        """Search by the query's mode: ``default`` and ``hybrid`` (``VectorStoreQuery.alpha``, ``hybrid_top_k``)
        are the store's fused search, ``sparse`` (``sparse_top_k``) and ``text_search`` BM25 alone, ``mmr``
        maximal marginal relevance; without ``query_str``, the nearest node vectors (docs/llamaindex.md).

        :param query: LlamaIndex's query: ``query_str`` (encoded once by the store) or, without it,
            ``query_embedding``; ``similarity_top_k``, ``filters``, ``doc_ids``, ``node_ids``, ``mode``, ``alpha``,
            ``mmr_threshold``. With a ``hybrid_fusion_fn``, a ``hybrid`` query runs the dense search
            (``similarity_top_k``) and the BM25 search (``sparse_top_k``) apart and returns the function's fusion of
            the two.
        :param kwargs: ``rerank`` (``"chunks"``, ``"static"``, ``"node"``) and ``alpha`` (weight of the rerank
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
            return _result(self._search(query, **kwargs))
        kwargs.pop("alpha", None)
        dense = self._search(replace(query, mode=VectorStoreQueryMode.DEFAULT), alpha=1.0, **kwargs)
        sparse = self._search(replace(query, mode=VectorStoreQueryMode.SPARSE), **kwargs)
        return fusion(_result(dense), _result(sparse), alpha=0.5 if query.alpha is None else query.alpha,
                      top_k=query.hybrid_top_k or query.similarity_top_k)

    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """:meth:`query`, awaitable (as :meth:`async_add`)."""
        return await self._store.call_async(self.query, query, **kwargs)

    def _search(
        self, query: VectorStoreQuery, rerank: Rerank | str | None = None, alpha: float | None = None,
        qdrant_filters: Any = None, **kwargs: Any
    ) -> list[Hit]:
        """The store's hits for a LlamaIndex query, by its mode (see :meth:`query`; ``mmr_threshold`` given, even as
        None, overrides the query's, else 0.5). An empty ``doc_ids`` list restricts to nothing (no hits: an allow-list
        an application emptied, e.g. by the user's permissions, never opens the whole store), as in
        ``SimpleVectorStore``; an empty ``node_ids`` list restricts nothing, as in ``QdrantVectorStore``:
        ``VectorStoreIndex.as_retriever`` passes its index struct's node ids, ``[]`` for a store that keeps the text.

        :raises InvalidInputError: for a query with neither text nor embedding, or a lexical query without text.
        :raises EmptyTextError: for an empty or whitespace-only ``query_str`` in a lexical mode or without an
            embedding (with one, the embedding is searched).
        :raises SettingsMismatchError: for a lexical query on a store without BM25.
        :raises NotImplementedError: for the learner modes and ``semantic_hybrid``.
        """
        mode, store, k = VectorStoreQueryMode(query.mode), self._store, query.similarity_top_k
        flt = to_store_filter(query.filters, query.node_ids or None, query.doc_ids, qdrant_filters)
        blank = isinstance(query.query_str, str) and not query.query_str.strip()
        text = None if blank else query.query_str
        if blank and (mode in LEXICAL or query.query_embedding is None):
            raise EmptyTextError(f"query mode {mode.value!r}: VectorStoreQuery.query_str is empty or "
                                 "whitespace-only: there is nothing to search for")
        if mode == VectorStoreQueryMode.MMR:
            threshold = kwargs.get("mmr_threshold", query.mmr_threshold)
            return store.search_mmr(text or _embedding(query, mode), k,
                                    lambda_=MMR_DEFAULT if threshold is None else threshold, filter=flt)
        if mode not in FUSED_MODES:
            raise NotImplementedError(
                f"LandmarkVectorStore does not run query mode {mode.value!r}: use 'default' (fused rerank + BM25), "
                "'hybrid' (with VectorStoreQuery.alpha), 'sparse'/'text_search' (BM25) or 'mmr'"
            )
        fixed_alpha = FUSED_MODES[mode]
        if text is None:
            if mode in LEXICAL:
                raise InvalidInputError(
                    f"query mode {mode.value!r} scores words with BM25: VectorStoreQuery.query_str is None; give the "
                    "query's text"
                )
            return store.search_vector(_embedding(query, mode), k=k, filter=flt, one_per_document=False)
        if mode in LEXICAL and not store.bm25:
            raise SettingsMismatchError(
                f"query mode {mode.value!r} ranks by BM25 keyword vectors, and {store.where} was built without them "
                "(enable_hybrid=False): query in mode 'default', or ingest into a new store with enable_hybrid=True"
            )
        if mode == VectorStoreQueryMode.HYBRID and query.alpha is not None:
            alpha = query.alpha
        top_k = {VectorStoreQueryMode.HYBRID: query.hybrid_top_k, VectorStoreQueryMode.SPARSE: query.sparse_top_k}
        return store.search(text, k=top_k.get(mode) or k, rerank=rerank or self.rerank, filter=flt,
                            one_per_document=False, alpha=alpha if fixed_alpha is None else fixed_alpha)

    def get_nodes(self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None) -> list[BaseNode]:
        """Stored nodes by id and/or metadata filter, with their embeddings.

        :param node_ids: node ids (None: every node matching ``filters``; an empty list: none).
        :param filters: metadata filters.
        :return: the nodes, in no particular order.
        """
        records = self._store.get_nodes(node_ids=node_ids, filter=to_store_filter(filters))
        return [_to_node(record, embedding=record.vector.tolist()) for record in records]

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
    chunk_spans = node.chunk_spans if isinstance(node, LandmarkNode) else None
    text, start, end = node.get_content(), getattr(node, "start_char_idx", None), getattr(node, "end_char_idx", None)
    return NodeRecord(
        node_id=node.node_id,
        doc_id=node.ref_doc_id or NO_SOURCE + node.node_id,
        text=text,
        span=(start or 0, end if end is not None else (start or 0) + len(text)),
        vector=vector,
        chunk_vectors=vector[None, :] if chunk_vectors is None and made_by is None else chunk_vectors,
        metadata=_node_metadata(node),
        chunk_spans=chunk_spans,
    )


def _to_node(stored: Hit | NodeRecord, embedding: list[float] | None = None) -> BaseNode:
    """The LlamaIndex node of a stored node: rebuilt from its JSON when LlamaIndex wrote it, else from the fields."""
    if "_node_content" in stored.metadata:
        node = metadata_dict_to_node(stored.metadata, text=stored.text)
    else:
        node = TextNode(id_=stored.node_id, text=stored.text, start_char_idx=stored.span[0],
                        end_char_idx=stored.span[1], metadata=dict(stored.metadata),
                        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=stored.doc_id)})
    node.embedding = embedding
    return node


def _result(hits: list[Hit]) -> VectorStoreQueryResult:
    """LlamaIndex's result from store hits, each node with its hit's evidence and chunk scores
    (:func:`add_evidence`)."""
    return VectorStoreQueryResult(nodes=[add_evidence(_to_node(hit), hit.evidence, hit.chunk_scores) for hit in hits],
                                  similarities=[hit.score for hit in hits], ids=[hit.node_id for hit in hits])


def _embedding(query: VectorStoreQuery, mode: VectorStoreQueryMode) -> np.ndarray:
    """The query's embedding as float32, shape (dim,).

    :raises InvalidInputError: when the query has neither text nor embedding.
    """
    if query.query_embedding is None:
        raise InvalidInputError(
            f"query mode {mode.value!r}: the query has neither query_str (which the store encodes) nor query_embedding"
        )
    return np.asarray(query.query_embedding, dtype=np.float32)
