"""LandmarkNodeParser: nodes cut on landmark boundaries, embedded by the same single encoding pass.

Chunk vectors travel on the node, in memory only: the parser returns :class:`LandmarkNode` s, TextNodes holding their
landmark chunk vectors in a private attribute, which LlamaIndex's node copies keep and its serialisation (docstores,
the ingestion cache, ``model_dump``) leaves out, so stored nodes stay light and reload as plain TextNodes. A node
carries the fingerprint of the encoder that made its vectors in ``node.metadata[ENCODER_KEY]`` (excluded from
embeddings and LLM prompts): ``LandmarkVectorStore`` checks it against the store's encoder, and a node that reaches
the store without its chunk vectors (through JSON, an ingestion-cache hit, another process) is encoded again from its
text by the store (``LandmarkStore.upsert_nodes``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np
from llama_index.core.bridge.pydantic import Field, PrivateAttr, ValidationError
from llama_index.core.node_parser import NodeParser
from llama_index.core.node_parser.interface import IdFuncCallable
from llama_index.core.schema import BaseNode, Document, MetadataMode, NodeRelationship, TextNode

from llama_index.embeddings.landmark import LandmarkEmbedding, pipeline_shows_progress
from lmk_rag import DEFAULT_NODE_TOKENS
from lmk_rag.adapters import NodeSlice, group_chunks, invalid_fields
from lmk_rag.errors import InvalidInputError

ENCODER_KEY = "lmk_encoder"
"""Node metadata key holding the fingerprint of the encoder that made the node's vectors."""

_NODE_ID_NAMESPACE = uuid.UUID("6f1c7a52-3f0e-4f57-9a8e-2d1f6c0b7a11")


class LandmarkNode(TextNode):
    """A TextNode with its landmark chunk vectors, in memory only.

    The vectors are a private attribute: copies (``model_copy``, ``copy.deepcopy``, as ``VectorStoreIndex`` makes
    them) keep them; ``model_dump``, ``to_dict`` and pickling leave them out, and the serialised node names class
    ``TextNode``, so docstores and the ingestion cache reload it as a plain TextNode (without vectors: the store
    encodes them again).

    :param chunk_vectors: float32, shape (n_chunks, dim), of the node's text as given, or None.
    :param chunk_spans: each chunk's char span ``(start, end)`` in the document, or None.
    :param data: TextNode's fields.
    """

    _chunk_vectors: np.ndarray | None = PrivateAttr(default=None)
    _chunk_spans: tuple[tuple[int, int], ...] | None = PrivateAttr(default=None)
    _encoded_text: str | None = PrivateAttr(default=None)

    def __init__(self, chunk_vectors: np.ndarray | None = None,
                 chunk_spans: tuple[tuple[int, int], ...] | None = None, **data: Any) -> None:
        """Make the node (see the class docstring)."""
        super().__init__(**data)
        self._chunk_vectors, self._chunk_spans, self._encoded_text = chunk_vectors, chunk_spans, self.text

    @property
    def chunk_vectors(self) -> np.ndarray | None:
        """The node's landmark chunk vectors, shape (n_chunks, dim); None when it has none, or when its text changed
        since they were encoded (a later transformation edited it)."""
        return self._chunk_vectors if self.text == self._encoded_text else None

    @property
    def chunk_spans(self) -> tuple[tuple[int, int], ...] | None:
        """Each chunk vector's char span ``(start, end)`` in the document (what a hit's evidence points at); None
        where :attr:`chunk_vectors` is."""
        return self._chunk_spans if self.chunk_vectors is not None else None


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
    chunk vectors (in memory, see :class:`LandmarkNode`), so ``VectorStoreIndex`` and
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
            parsed.extend(self._build_nodes(document, text, group_chunks(encoding, self.node_tokens), fingerprint,
                                            encoding.spans))
        return parsed

    def _build_nodes(self, document: BaseNode, text: str, slices: list[NodeSlice], fingerprint: str,
                     chunk_spans: list[tuple[int, int]]) -> list[LandmarkNode]:
        """One LandmarkNode per slice, carrying its span, vector, chunk vectors and their spans (of ``chunk_spans``,
        the document's)."""
        source = {NodeRelationship.SOURCE: document.as_related_node_info()}
        excluded_embed = [*document.excluded_embed_metadata_keys, ENCODER_KEY]
        excluded_llm = [*document.excluded_llm_metadata_keys, ENCODER_KEY]
        nodes = []
        for piece in slices:
            nodes.append(LandmarkNode(
                chunk_vectors=piece.chunk_vectors,
                chunk_spans=tuple(chunk_spans[piece.chunk_range[0] : piece.chunk_range[1]]),
                id_=self.id_func(piece.index, document),
                text=text[piece.span[0] : piece.span[1]],
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
        # copies each neighbour's metadata into PREVIOUS/NEXT (keep the encoder key out of it).
        spans = [(node.start_char_idx, node.end_char_idx) for node in nodes]
        nodes = super()._postprocess_parsed_nodes(nodes, parent_doc_map)
        for node, (start, end) in zip(nodes, spans):
            node.start_char_idx, node.end_char_idx = start, end
            _drop_encoder_key(node)
        return nodes


def without_encoder_key(node: BaseNode) -> BaseNode:
    """A copy of a node with no trace of :data:`ENCODER_KEY` (metadata, excluded keys, relationships).

    :param node: a node, e.g. from :class:`LandmarkNodeParser`.
    :return: the copy; ``node`` is unchanged.
    """
    keep = [k for k in node.metadata if k != ENCODER_KEY]
    clean = node.model_copy(
        deep=True,
        update={
            "metadata": {k: node.metadata[k] for k in keep},
            "excluded_embed_metadata_keys": [k for k in node.excluded_embed_metadata_keys if k in keep],
            "excluded_llm_metadata_keys": [k for k in node.excluded_llm_metadata_keys if k in keep],
        },
    )
    _drop_encoder_key(clean)
    return clean


def _drop_encoder_key(node: BaseNode) -> None:
    """Remove :data:`ENCODER_KEY` from the metadata copied into a node's related-node infos."""
    for related in node.relationships.values():
        for info in related if isinstance(related, list) else [related]:
            if info.metadata:
                info.metadata = {k: v for k, v in info.metadata.items() if k != ENCODER_KEY}
