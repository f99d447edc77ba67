"""LandmarkNodeParser: nodes cut on landmark boundaries, embedded by the same single encoding pass.

Chunk vectors travel outside the node: the parser keeps each node's landmark chunk vectors in a process-local
cache keyed by node id and text hash (:func:`cached_chunk_vectors`, bounded by :data:`CACHE_BYTES`), so nodes,
docstores and the ingestion cache stay light (a node carries its text, its embedding and the fingerprint of the
encoder that made its vectors in ``node.metadata[ENCODER_KEY]``, excluded from embeddings and LLM prompts).
``LandmarkVectorStore`` checks the fingerprint against the store's encoder and takes the chunk vectors from the
cache; a node that reaches it without them (another process, an ingestion-cache hit, an evicted entry) is encoded
again from its text by the store's encoder. Nodes written by earlier versions, with the vectors as base64 in
``node.metadata[CHUNK_VECTORS_KEY]`` (:func:`decode_chunk_vectors`), still load.
"""

from __future__ import annotations

import base64
import hashlib
import threading
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
from llama_index.core.bridge.pydantic import Field, ValidationError
from llama_index.core.node_parser import NodeParser
from llama_index.core.node_parser.interface import IdFuncCallable
from llama_index.core.schema import BaseNode, Document, MetadataMode, NodeRelationship, TextNode

from llama_index.embeddings.landmark import LandmarkEmbedding, pipeline_shows_progress
from lmk_rag import DEFAULT_NODE_TOKENS, NodeSlice, group_chunks
from lmk_rag.errors import InvalidInputError, invalid_fields

CHUNK_VECTORS_KEY = "lmk_chunk_vectors"
"""Node metadata key where earlier versions carried a node's chunk vectors as base64 (still read, never written)."""
ENCODER_KEY = "lmk_encoder"
"""Node metadata key holding the fingerprint of the encoder that made the node's vectors."""
SIDE_CHANNEL_KEYS = (CHUNK_VECTORS_KEY, ENCODER_KEY)

_NODE_ID_NAMESPACE = uuid.UUID("6f1c7a52-3f0e-4f57-9a8e-2d1f6c0b7a11")

CACHE_BYTES = 512 * 2**20
"""The most bytes of chunk vectors the parser keeps for the store in this process (the oldest go first)."""
_CACHE: OrderedDict[tuple[str, str], tuple[str, np.ndarray]] = OrderedDict()
_CACHE_LOCK = threading.Lock()
_cached_bytes = 0


def _text_key(node_id: str, text: str) -> tuple[str, str]:
    return node_id, hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()


def _remember(node_id: str, text: str, fingerprint: str, vectors: np.ndarray) -> None:
    """Keep a node's chunk vectors for the store (see the module docstring)."""
    global _cached_bytes
    key = _text_key(node_id, text)
    with _CACHE_LOCK:
        old = _CACHE.pop(key, None)
        _cached_bytes += vectors.nbytes - (old[1].nbytes if old else 0)
        _CACHE[key] = (fingerprint, vectors)
        while _cached_bytes > CACHE_BYTES and _CACHE:
            _cached_bytes -= _CACHE.popitem(last=False)[1][1].nbytes


def cached_chunk_vectors(node: BaseNode) -> tuple[str, np.ndarray] | None:
    """The chunk vectors the parser made for this node in this process, with their encoder's fingerprint, or None
    (another process made the node, its text changed since, or the entry was evicted).

    :param node: a node from :class:`LandmarkNodeParser`.
    :return: ``(fingerprint, vectors of shape (n_chunks, dim))`` or None.
    """
    with _CACHE_LOCK:
        return _CACHE.get(_text_key(node.node_id, node.get_content(metadata_mode=MetadataMode.NONE)))


def decode_chunk_vectors(value: str, dim: int) -> np.ndarray:
    """Unpack the chunk vectors earlier versions of :class:`LandmarkNodeParser` wrote into node metadata.

    :param value: the ``CHUNK_VECTORS_KEY`` metadata value.
    :param dim: the vector size (the length of the node's embedding).
    :return: float32 array, shape (n_chunks, dim).
    """
    return np.frombuffer(base64.b64decode(value), dtype="<f4").reshape(-1, dim).astype(np.float32)


def landmark_node_id(index: int, document: BaseNode) -> str:
    """The default node id: a UUID derived from the document id and the node's position.

    Deterministic, so that parsing the same document again yields the same ids and writing the
    nodes again overwrites instead of duplicating.

    :param index: the node's position in its document.
    :param document: the document.
    :return: the node id.
    """
    return str(uuid.uuid5(_NODE_ID_NAMESPACE, f"{document.node_id}/{index}"))


class LandmarkNodeParser(NodeParser):
    """Cut documents into runs of whole landmark chunks and embed them from one encoding pass.

    Every document is encoded once, in the encoder's context mode; each node gets its text
    ``document.text[start:end]`` (exact ``start_char_idx``/``end_char_idx``; the nodes tile the
    document), its vector (``node.embedding``, the normalised mean of its chunk vectors) and its
    chunk vectors (side channel, see :data:`CHUNK_VECTORS_KEY`), so ``VectorStoreIndex`` and
    ``IngestionPipeline`` embed nothing again. Nodes end on landmark boundaries; with
    ``LandmarkEmbedding(granularity="sentence")`` landmarks are sentences, so nodes end on
    sentence boundaries. Documents with no text give no nodes.

    Example::

        embed_model = LandmarkEmbedding()
        parser = LandmarkNodeParser(embed_model=embed_model, node_tokens=256)
        nodes = parser.get_nodes_from_documents(documents)
    """

    embed_model: LandmarkEmbedding = Field(
        default_factory=LandmarkEmbedding, description="The embedding model whose encoder cuts and embeds."
    )
    node_tokens: int = Field(
        default=DEFAULT_NODE_TOKENS,
        gt=0,
        description="Node size in tokens, rounded down to whole landmark chunks (>= one chunk).",
    )
    id_func: IdFuncCallable = Field(default=landmark_node_id, description="Function (index, document) -> node id.")

    def __init__(self, **data: Any) -> None:
        """Set the fields (see the class docstring).

        :raises InvalidInputError: for a field of the wrong type or range (``node_tokens=0``), naming it.
        """
        try:
            super().__init__(**data)
        except ValidationError as error:
            raise invalid_fields("LandmarkNodeParser", error) from None

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises this class under."""
        return "LandmarkNodeParser"

    def get_nodes_from_documents(self, documents: Sequence[Document], show_progress: bool = False,
                                 **kwargs: Any) -> list[BaseNode]:
        """Cut documents into landmark nodes (LlamaIndex's ``NodeParser`` API).

        :raises InvalidInputError: when ``documents`` is not a list of LlamaIndex documents or nodes (a string, say).
        """
        if isinstance(documents, (str, bytes)) or not isinstance(documents, Sequence) or not all(
                isinstance(document, BaseNode) for document in documents):
            raise InvalidInputError(
                f"get_nodes_from_documents takes a list of LlamaIndex Documents, got {documents!r:.80}; "
                "wrap a text as [Document(text=...)]"
            )
        return super().get_nodes_from_documents(documents, show_progress=show_progress, **kwargs)

    def _parse_nodes(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any) -> list[BaseNode]:
        # One encode call for all documents: windows of every document share batches. With show_progress, or inside
        # IngestionPipeline.run(show_progress=True), which does not pass it on, the encoder's bar shows tokens and
        # documents per window batch (without it, only on long jobs).
        documents = [node for node in nodes if node.get_content(metadata_mode=MetadataMode.NONE).strip()]
        texts = [document.get_content(metadata_mode=MetadataMode.NONE) for document in documents]
        if not texts:
            return []
        encoder = self.embed_model.encoder
        show = show_progress or pipeline_shows_progress()
        encoded, fingerprint = encoder.encode_documents(texts, show or None), encoder.fingerprint
        parsed: list[BaseNode] = []
        for document, text, encoding in zip(documents, texts, encoded):
            parsed.extend(self._build_nodes(document, text, group_chunks(encoding, self.node_tokens), fingerprint))
        return parsed

    def _build_nodes(self, document: BaseNode, text: str, slices: list[NodeSlice], fingerprint: str) -> list[TextNode]:
        """One TextNode per slice, carrying its span, vector and chunk vectors."""
        source = {NodeRelationship.SOURCE: document.as_related_node_info()}
        excluded_embed = [*document.excluded_embed_metadata_keys, ENCODER_KEY]
        excluded_llm = [*document.excluded_llm_metadata_keys, ENCODER_KEY]
        nodes = []
        for piece in slices:
            node_id, piece_text = self.id_func(piece.index, document), text[piece.span[0] : piece.span[1]]
            _remember(node_id, piece_text, fingerprint, piece.chunk_vectors)
            nodes.append(TextNode(
                id_=node_id,
                text=piece_text,
                start_char_idx=piece.span[0],
                end_char_idx=piece.span[1],
                embedding=piece.vector.tolist(),
                metadata={ENCODER_KEY: fingerprint},
                excluded_embed_metadata_keys=excluded_embed,
                excluded_llm_metadata_keys=excluded_llm,
                metadata_separator=document.metadata_separator,
                metadata_template=document.metadata_template,
                text_template=document.text_template,
                relationships=dict(source),
            ))
        return nodes

    def _postprocess_parsed_nodes(self, nodes: list[BaseNode], parent_doc_map: dict[str, Document]) -> list[BaseNode]:
        # The base class adds metadata and PREVIOUS/NEXT, but re-derives char indices with
        # str.find, which lands on an earlier copy of repeated text (keep the exact spans), and
        # copies each neighbour's metadata into PREVIOUS/NEXT (keep the side channel out of it).
        spans = [(node.start_char_idx, node.end_char_idx) for node in nodes]
        nodes = super()._postprocess_parsed_nodes(nodes, parent_doc_map)
        for node, (start, end) in zip(nodes, spans):
            node.start_char_idx, node.end_char_idx = start, end
            _drop_side_channel_from_relationships(node)
        return nodes


def without_side_channel(node: BaseNode) -> BaseNode:
    """A copy of a node with no trace of the side channel (metadata, excluded keys, relationships).

    :param node: a node, e.g. from :class:`LandmarkNodeParser`.
    :return: the copy; ``node`` is unchanged.
    """
    keep = [k for k in node.metadata if k not in SIDE_CHANNEL_KEYS]
    clean = node.model_copy(
        deep=True,
        update={
            "metadata": {k: node.metadata[k] for k in keep},
            "excluded_embed_metadata_keys": [k for k in node.excluded_embed_metadata_keys if k in keep],
            "excluded_llm_metadata_keys": [k for k in node.excluded_llm_metadata_keys if k in keep],
        },
    )
    _drop_side_channel_from_relationships(clean)
    return clean


def _drop_side_channel_from_relationships(node: BaseNode) -> None:
    """Remove side-channel keys from the metadata copied into a node's related-node infos."""
    for related in node.relationships.values():
        for info in related if isinstance(related, list) else [related]:
            if info.metadata:
                info.metadata = {k: v for k, v in info.metadata.items() if k not in SIDE_CHANNEL_KEYS}
