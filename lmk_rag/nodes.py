"""Nodes from one encoding: runs of whole landmark chunks, each with its vector and its chunk vectors.

This is how a long document yields its three granularities from a single encoding pass: the
document vector (:attr:`EncodedText.vector`), one vector per landmark chunk, and node vectors
(the normalised mean of a node's chunk vectors). The LlamaIndex node parser and the store's
ingestion both cut nodes here, so a node's chunk vectors double as its multi-vector.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lmk_rag.encoder.types import EncodedText
from lmk_rag.errors import InvalidInputError
from lmk_rag.vector_math import l2_normalize

DEFAULT_NODE_TOKENS = 256
"""The node size in tokens of a new store and of the LlamaIndex node parser."""


@dataclass(frozen=True)
class NodeSlice:
    """A node: consecutive whole landmark chunks of one document.

    :param index: the node's position in its document (0-based).
    :param span: char span ``(start, end)`` in the document; the nodes' spans tile the document.
    :param chunk_range: chunk indices ``[start, end)``.
    :param vector: the node vector, shape (dim,): normalised mean of its chunk vectors.
    :param chunk_vectors: the node's chunk vectors, shape (n_chunks, dim), L2-normalised.
    :param token_count: content tokens in the node.
    """

    index: int
    span: tuple[int, int]
    chunk_range: tuple[int, int]
    vector: np.ndarray
    chunk_vectors: np.ndarray
    token_count: int


def group_chunks(encoded: EncodedText, node_tokens: int = DEFAULT_NODE_TOKENS) -> list[NodeSlice]:
    """Group a document's landmark chunks into nodes of about ``node_tokens`` tokens.

    A node takes whole chunks while it stays within ``node_tokens`` (a chunk longer than that is a
    node on its own), so node boundaries always fall on landmark boundaries.

    :param encoded: the encoded document.
    :param node_tokens: the node size in tokens, rounded down to whole chunks (at least one chunk).
    :return: the nodes in document order.
    :raises InvalidInputError: when ``node_tokens`` < 1.
    """
    if node_tokens < 1:
        raise InvalidInputError(f"node_tokens must be >= 1, got {node_tokens}")
    counts = encoded.token_counts or [1] * encoded.n_chunks
    nodes: list[NodeSlice] = []
    start = 0
    while start < encoded.n_chunks:
        end, tokens = start + 1, counts[start]
        while end < encoded.n_chunks and tokens + counts[end] <= node_tokens:
            tokens += counts[end]
            end += 1
        chunk_vectors = encoded.chunk_vectors[start:end]
        nodes.append(
            NodeSlice(
                index=len(nodes),
                span=(encoded.spans[start][0], encoded.spans[end - 1][1]),
                chunk_range=(start, end),
                vector=l2_normalize(chunk_vectors.mean(axis=0)),
                chunk_vectors=chunk_vectors,
                token_count=tokens,
            )
        )
        start = end
    return nodes
