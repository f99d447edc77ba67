"""LandmarkVectorStore: LlamaIndex's vector store interface over :class:`lmk_rag.store.LandmarkStore`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.indices.vector_store.base import VectorStoreIndex
from llama_index.core.schema import BaseNode, MetadataMode, NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryResult,
)
from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict

from llama_index.embeddings.landmark import LandmarkEmbedding
from llama_index.node_parser.landmark import (
    CHUNK_VECTORS_KEY,
    ENCODER_KEY,
    cached_chunk_vectors,
    decode_chunk_vectors,
    without_side_channel,
)
from llama_index.vector_stores.landmark.filters import to_store_filter
from llama_index.vector_stores.landmark.search import search
from lmk_rag.errors import InvalidInputError, SettingsMismatchError
from lmk_rag.store import FieldCondition, Filter, Hit, LandmarkStore, NodeRecord, Rerank
from lmk_rag.store.ingest import clean_metadata
from lmk_rag.store.query import check_rerank
from lmk_rag.store.types import StoreMode

logger = logging.getLogger(__name__)

NO_SOURCE = "lmk-rag:no-source:"
"""Prefix of the store document that holds a node without a SOURCE relationship (``NO_SOURCE + node_id``): such a
node is a document of its own, which ``delete(ref_doc_id)`` never reaches. Reserved: no ``ref_doc_id`` may start
with it."""


class LandmarkVectorStore(BasePydanticVectorStore):
    """Landmark nodes in Qdrant (Edge in-process, or a server), searched in two stages.

    The store encodes each query once (``is_embedding_query`` is False, so LlamaIndex does not
    embed it first) and runs one Query API call: candidates by node vector and by BM25, each scored by
    a rerank (MaxSim over the nodes' chunk vectors with ``rerank="chunks"``, over static token vectors
    with ``"static"``, which needs a store opened with ``static_encoder=``, or the node vector's cosine
    with ``"none"``; by default the store's: ``"chunks"``, or ``"static"`` in a static store) fused with its BM25
    score. Nodes from :class:`LandmarkNodeParser` bring their chunk vectors; other nodes with an embedding are
    written with that embedding as their only chunk vector. A static store (no transformer) comes from a static
    embedding: ``LandmarkVectorStore(path, embed_model=LandmarkEmbedding(static=True))``, parsed by the same
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
    _owns_store: bool = PrivateAttr(default=True)
    _embed_model: LandmarkEmbedding | None = PrivateAttr(default=None)

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        url: str | None = None,
        api_key: str | None = None,
        client: Any = None,
        location: str | None = None,
        store: LandmarkStore | None = None,
        embed_model: LandmarkEmbedding | None = None,
        static_encoder: Any = None,
        rerank: Rerank | str | None = None,
        **store_options: Any,
    ) -> None:
        """Open a store, or wrap one.

        :param path: folder of an embedded Qdrant Edge store (created when missing).
        :param url: URL of a Qdrant server; ``api_key`` authenticates.
        :param api_key: API key for ``url``.
        :param client: an existing ``qdrant_client.QdrantClient``.
        :param location: qdrant-client local mode, ``":memory:"`` or a folder.
        :param store: an open :class:`LandmarkStore` to use instead of the arguments above (:meth:`close` leaves it
            open: it is the caller's).
        :param embed_model: share this model's encoder with the store (else the store builds its own
            from its recorded settings).
        :param static_encoder: a ``StaticTokenEncoder`` to fill and search static token vectors.
        :param rerank: the default second stage (None: the store's, ``"chunks"`` or ``"static"`` in a static store).
        :param store_options: other :class:`LandmarkStore` arguments (``collection``, ``bm25``, ``alpha``,
            ``text_keys`` (metadata keys indexed for ``TEXT_MATCH``), ...).
        :raises InvalidInputError: when ``store`` is given with location arguments.
        """
        if store is not None and (path, url, client, location) != (None, None, None, None):
            raise InvalidInputError("give either store= or one of path, url, client, location, not both")
        super().__init__(rerank=None if rerank is None else check_rerank(rerank))
        self._owns_store = store is None
        self._store = store or LandmarkStore(
            path,
            url=url,
            api_key=api_key,
            client=client,
            location=location,
            encoder=embed_model.encoder if embed_model is not None else None,
            static_encoder=static_encoder,
            **store_options,
        )
        self._embed_model = embed_model

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises this class under."""
        return "LandmarkVectorStore"

    @property
    def client(self) -> LandmarkStore:
        """The underlying :class:`LandmarkStore`."""
        return self._store

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
        """Write nodes (with their embeddings). Node ids are unique in the store: a node id already stored is
        overwritten, also when it was stored under another document.

        :param nodes: nodes with ``embedding`` set, grouped by ``ref_doc_id`` into documents (a node without one is
            a document of its own, see :data:`NO_SOURCE`).
        :return: the node ids.
        :raises InvalidInputError: for a node without an embedding, or a ``ref_doc_id`` starting with
            :data:`NO_SOURCE`.
        :raises SettingsMismatchError: for nodes embedded by another encoder than the store's.
        """
        merged, moved = self._merged_records(nodes)
        if moved:
            self._store.delete_nodes(node_ids=moved)
        for doc_id, records in merged.items():
            self._store.upsert_nodes(doc_id, records)
        return [node.node_id for node in nodes]

    async def async_add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """:meth:`add` in a worker thread."""
        return await asyncio.to_thread(self.add, nodes, **add_kwargs)

    def _merged_records(self, nodes: Sequence[BaseNode]) -> tuple[dict[str, list[NodeRecord]], list[str]]:
        """Per document, the records to write (its stored nodes, overwritten or extended by ``nodes``), and the ids
        of incoming nodes now stored under other documents.

        ``LandmarkStore.upsert_nodes`` replaces a whole document; LlamaIndex's ``add`` only adds, so nodes of a
        document already stored are read back and kept (one read for both lists).
        """
        if isinstance(nodes, (str, bytes, BaseNode)) or not isinstance(nodes, Sequence):
            raise InvalidInputError(f"nodes must be a list of LlamaIndex nodes, got {type(nodes).__name__}")
        fingerprint = self._store.settings["encoder"]["fingerprint"]
        latest: dict[str, BaseNode] = {}
        for node in nodes:
            if not isinstance(node, BaseNode):
                raise InvalidInputError(f"nodes must be LlamaIndex nodes (BaseNode), got a {type(node).__name__}")
            latest[node.node_id] = node  # the last one of an id wins
        chunks = self._chunk_vectors(list(latest.values()), fingerprint)
        owner = {node_id: self._to_record(node, fingerprint, chunks[node_id]) for node_id, node in latest.items()}
        if not owner:
            return {}, []
        incoming: dict[str, dict[str, NodeRecord]] = {}
        for record in owner.values():
            incoming.setdefault(record.doc_id, {})[record.node_id] = record
        either = (FieldCondition("doc_id", "in", list(incoming)), FieldCondition("node_id", "in", list(owner)))
        stored = self._store.get_nodes(filter=Filter(should=either))
        merged: dict[str, dict[str, NodeRecord]] = {doc_id: {} for doc_id in incoming}
        moved = []
        for record in sorted(stored, key=lambda r: r.span):
            arriving = owner.get(record.node_id)
            if arriving is not None and arriving.doc_id != record.doc_id:
                if record.doc_id not in incoming:
                    moved.append(record.node_id)
            elif record.doc_id in incoming:
                merged[record.doc_id][record.node_id] = record
        for doc_id, records in incoming.items():
            merged[doc_id].update(records)
        return {doc_id: list(records.values()) for doc_id, records in merged.items()}, moved

    def _chunk_vectors(self, nodes: list[BaseNode], fingerprint: str) -> dict[str, np.ndarray | None]:
        """Each node's chunk vectors: those the parser made in this process (:func:`cached_chunk_vectors`), else
        the base64 metadata of earlier versions, else, for a landmark node of this store's encoder (a node from
        another process or the ingestion cache), encoded again by the store's encoder (:meth:`_encoded_again`),
        else None (a node of another parser: its embedding is its only chunk vector).
        """
        found: dict[str, np.ndarray | None] = {}
        again: list[BaseNode] = []
        for node in nodes:
            cached = cached_chunk_vectors(node)
            packed = node.metadata.get(CHUNK_VECTORS_KEY)
            if cached is not None and cached[0] == fingerprint:
                found[node.node_id] = cached[1]
            elif packed is not None and node.embedding is not None:
                found[node.node_id] = decode_chunk_vectors(packed, len(node.embedding))
            elif node.metadata.get(ENCODER_KEY) == fingerprint and self._store.mode == StoreMode.TRANSFORMER:
                again.append(node)
            else:
                found[node.node_id] = None
        if again:
            logger.debug("%d node(s) reached the store without their chunk vectors: encoding them again", len(again))
            found.update(self._encoded_again(again))
        return found

    def _encoded_again(self, nodes: list[BaseNode]) -> dict[str, np.ndarray | None]:
        """Chunk vectors of landmark nodes, encoded again in one encoder call. The nodes of a document that arrive
        together and tile it from its start (``start_char_idx``/``end_char_idx``, as the parser cuts them) are
        joined back into the document's text and encoded as the parser did, so their vectors are the parser's;
        any other node is encoded alone (the same chunks, each seeing only its node's neighbours in document
        context, so close to the parser's, not equal).
        """
        by_doc: dict[str | None, list[BaseNode]] = {}
        for node in nodes:
            by_doc.setdefault(node.ref_doc_id, []).append(node)
        jobs: list[tuple[str, list[tuple[BaseNode, int, int]]]] = []
        for doc_id, group in by_doc.items():
            texts = [node.get_content(metadata_mode=MetadataMode.NONE) for node in group]
            ordered = sorted(zip(group, texts), key=lambda pair: pair[0].start_char_idx or 0)
            ends = [0]
            for node, text in ordered:
                ends.append(ends[-1] + len(text) if node.start_char_idx == ends[-1] else -1)
            if doc_id is not None and min(ends) >= 0:
                jobs.append(("".join(text for _, text in ordered),
                             [(node, start, end) for (node, _), start, end in zip(ordered, ends, ends[1:])]))
            else:
                jobs.extend((text, [(node, 0, len(text))]) for node, text in zip(group, texts))
        worded = [(text, parts) for text, parts in jobs if text.strip()]
        found: dict[str, np.ndarray | None] = {node.node_id: None for node in nodes}
        encoded = self._store.encoder.encode_documents([text for text, _ in worded]) if worded else []
        for (_, parts), enc in zip(worded, encoded):
            for node, start, end in parts:
                rows = [index for index, (chunk_start, _) in enumerate(enc.spans) if start <= chunk_start < end]
                found[node.node_id] = enc.chunk_vectors[rows] if rows else None
        return found

    @staticmethod
    def _to_record(node: BaseNode, fingerprint: str, chunk_vectors: np.ndarray | None) -> NodeRecord:
        """A store record from a node: its embedding, chunk vectors and full node JSON.

        :param node: the node.
        :param fingerprint: the store's encoder fingerprint, which the node's must equal when it has one.
        :param chunk_vectors: the node's chunk vectors (:meth:`_chunk_vectors`), or None: its embedding alone.
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
                "parse with the store's encoder settings (LandmarkVectorStore.client.encoder.settings)"
            )
        vector = np.asarray(node.embedding, dtype=np.float32)
        chunk_vectors = vector[None, :] if chunk_vectors is None else chunk_vectors
        text = node.get_content()
        start = getattr(node, "start_char_idx", None)
        end = getattr(node, "end_char_idx", None)
        return NodeRecord(
            node_id=node.node_id,
            doc_id=node.ref_doc_id or NO_SOURCE + node.node_id,
            text=text,
            span=(start or 0, end if end is not None else (start or 0) + len(text)),
            vector=vector,
            chunk_vectors=chunk_vectors,
            metadata=_node_metadata(node),
        )

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Delete every node of a document (nodes without a SOURCE relationship are never a document's).

        :param ref_doc_id: the document id (the nodes' ``ref_doc_id``).
        """
        self._store.delete_document(ref_doc_id)

    async def adelete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """:meth:`delete` in a worker thread."""
        await asyncio.to_thread(self.delete, ref_doc_id, **delete_kwargs)

    def delete_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None, **delete_kwargs: Any
    ) -> None:
        """Delete nodes by id and/or metadata filter (both None: every node); the other nodes of their documents
        stay.

        :param node_ids: node ids (an empty list deletes nothing).
        :param filters: metadata filters.
        """
        flt = to_store_filter(filters, text_keys=self._store.text_keys)
        self._store.delete_nodes(node_ids=node_ids, filter=flt)

    async def adelete_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None, **delete_kwargs: Any
    ) -> None:
        """:meth:`delete_nodes` in a worker thread."""
        await asyncio.to_thread(self.delete_nodes, node_ids, filters, **delete_kwargs)

    def clear(self) -> None:
        """Delete every node (the store keeps its encoder settings)."""
        self._store.clear()

    async def aclear(self) -> None:
        """:meth:`clear` in a worker thread."""
        await asyncio.to_thread(self.clear)

    # ------------------------------------------------------------------ reading

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """Search by the query's mode (``default``, ``hybrid``, ``sparse``, ``text_search``, ``mmr``; see
        :mod:`llama_index.vector_stores.landmark.search`).

        :param query: LlamaIndex's query: ``query_str`` (encoded once by the store) or, without it,
            ``query_embedding``; ``similarity_top_k``, ``filters``, ``doc_ids``, ``node_ids``, ``mode``, ``alpha``,
            ``mmr_threshold``.
        :param kwargs: ``rerank`` (``"chunks"``, ``"static"``, ``"none"``) and ``alpha`` (weight of the rerank
            score against BM25, see :meth:`LandmarkStore.search`) override the store's defaults; ``mmr_threshold``
            overrides the query's.
        :return: the nodes, their scores (in [-1, 1]) and ids, best first.
        """
        return self._result(self._search(query, **kwargs))

    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """:meth:`query` with the search in a worker thread."""
        return self._result(await asyncio.to_thread(self._search, query, **kwargs))

    def _search(
        self, query: VectorStoreQuery, rerank: Rerank | str | None = None, alpha: float | None = None, **kwargs: Any
    ) -> list[Hit]:
        """The store's hits for a LlamaIndex query."""
        rerank = rerank or self.rerank
        return search(self._store, query, None if rerank is None else check_rerank(rerank), alpha, **kwargs)

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
        flt = to_store_filter(filters, text_keys=self._store.text_keys)
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
        """:meth:`get_nodes` in a worker thread."""
        return await asyncio.to_thread(self.get_nodes, node_ids, filters)

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
    the core API's policy (:func:`lmk_rag.store.ingest.clean_metadata`: dates as ISO strings, tuples and sets as
    lists; NaN, infinity and bytes refused, where pydantic's JSON dump would write null and text).

    :raises InvalidInputError: for metadata the store cannot keep, naming the node.
    """
    bare = without_side_channel(node)
    bare.metadata = clean_metadata(bare.metadata, f"node {node.node_id!r}")
    try:
        return node_to_metadata_dict(bare, remove_text=True)
    except (ValueError, TypeError) as error:  # pydantic's serialisation errors are ValueErrors
        raise InvalidInputError(
            f"node {node.node_id!r}: its metadata cannot be serialised ({error}); use JSON values (str, numbers, "
            "bool, None, lists and dicts of those)"
        ) from None


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
