"""Documents cut into nodes: one encoder call per batch of documents, each encoding cut into runs of whole landmark
chunks (:func:`lmk_rag.nodes.group_chunks`), the records a write takes."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from lmk_rag.store.documents import Document
from lmk_rag.store.modes import is_static_encoder
from lmk_rag.store.records import node_id_for
from lmk_rag.store.types import NodeRecord
from lmk_rag.store.versions import DocumentWrite

if TYPE_CHECKING:
    from lmk_rag.encoder.protocols import DocumentEncoder
    from lmk_rag.encoder.types import EncodedText


def records_from_encoding(
    doc_id: str, text: str, encoded: EncodedText, node_tokens: int, metadata: dict[str, Any] | None = None
) -> list[NodeRecord]:
    """Cut an encoded document into nodes (runs of whole landmark chunks) and make their records.

    :param doc_id: the document id.
    :param text: the document text ``encoded`` was made from.
    :param encoded: the document's encoding.
    :param node_tokens: the node size in tokens (see :func:`lmk_rag.nodes.group_chunks`).
    :param metadata: the document's metadata, copied into every node.
    :return: one record per node, ids ``"<doc_id>#<index>"``.
    """
    from lmk_rag.nodes import group_chunks

    return [
        NodeRecord(
            node_id=node_id_for(doc_id, node.index),
            doc_id=doc_id,
            text=text[node.span[0] : node.span[1]],
            span=node.span,
            vector=node.vector,
            chunk_vectors=node.chunk_vectors,
            metadata=dict(metadata or {}),
        )
        for node in group_chunks(encoded, node_tokens)
    ]


def node_records(
    encoder: DocumentEncoder, doc_id: str, text: str, encoded: EncodedText, node_tokens: int,
    metadata: dict[str, Any] | None = None,
) -> list[NodeRecord]:
    """Cut an encoded document into node records (:func:`records_from_encoding`); a static encoder's records carry
    their static token vectors, cut from the tokens the document was encoded with.

    :param encoder: the encoder that made ``encoded``.
    """
    records = records_from_encoding(doc_id, text, encoded, node_tokens, metadata)
    if not is_static_encoder(encoder):
        return records
    static = encoder.encode_node_tokens(encoded, [record.span for record in records])
    return [dataclasses.replace(record, static_vectors=vectors) for record, vectors in zip(records, static)]


def cut_documents(
    encoder: DocumentEncoder, documents: Sequence[Document], node_tokens: int, hashes: Mapping[str, str],
    show_progress_bar: bool | None = None,
) -> tuple[list[DocumentWrite], int]:
    """Encode documents in one encoder call and cut each into node records.

    :param hashes: each document's content hash (:func:`~lmk_rag.store.documents.content_hash`), recorded on its
        marker.
    :param show_progress_bar: show the encoder's bar (tokens, advancing per window batch; None: the encoder's
        default, only for long jobs).
    :return: the writes and the number of tokens encoded.
    """
    encoded = encoder.encode_documents([text for _, text, _ in documents], show_progress_bar)
    writes = [
        DocumentWrite(doc_id, node_records(encoder, doc_id, text, enc, node_tokens, metadata), dict(metadata or {}),
                      hashes[doc_id])
        for (doc_id, text, metadata), enc in zip(documents, encoded)
    ]
    return writes, sum(sum(enc.token_counts) for enc in encoded)


def fill_chunk_vectors(encoder: DocumentEncoder, records: Sequence[NodeRecord]) -> list[NodeRecord]:
    """The records, each with chunk vectors: those with none get them from one encoder call.

    The records of one document that tile it from its start (each span starts where the one before ends, from 0,
    and is as long as its text) are joined back into the document's text and encoded as the document, so their
    vectors are those a parse of the document made. Any other record's text is encoded alone: the same chunks,
    each seeing only its own node in context, so close vectors, not equal. A record whose text holds no chunk (blank)
    gets its node vector as its one chunk vector.

    :param encoder: the store's encoder.
    :param records: node records, some with ``chunk_vectors`` None.
    :return: the records in their order.
    """
    by_doc: dict[str, list[NodeRecord]] = {}
    for record in records:
        if record.chunk_vectors is None:
            by_doc.setdefault(record.doc_id, []).append(record)
    jobs: list[tuple[str, list[tuple[NodeRecord, int]]]] = []  # a text, and each record's offset in it
    for group in by_doc.values():
        group.sort(key=lambda record: record.span[0])
        if _tile(group):
            jobs.append(("".join(record.text for record in group), [(record, record.span[0]) for record in group]))
        else:
            jobs.extend((record.text, [(record, 0)]) for record in group)
    jobs = [job for job in jobs if job[0].strip()]
    found: dict[str, np.ndarray] = {}
    for (_, parts), encoded in zip(jobs, encoder.encode_documents([text for text, _ in jobs]) if jobs else []):
        for record, start in parts:
            rows = [row for row, (chunk_start, _) in enumerate(encoded.spans)
                    if start <= chunk_start < start + len(record.text)]
            if rows:
                found[record.node_id] = encoded.chunk_vectors[rows]
    return [
        record if record.chunk_vectors is not None else dataclasses.replace(
            record, chunk_vectors=found.get(record.node_id, np.asarray(record.vector, dtype=np.float32)[None, :]))
        for record in records
    ]


def _tile(records: list[NodeRecord]) -> bool:
    """Whether records sorted by span cover a text from 0 end to end, each span as long as its text."""
    end = 0
    for record in records:
        if tuple(record.span) != (end, end + len(record.text)):
            return False
        end = record.span[1]
    return True
