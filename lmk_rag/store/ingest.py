"""What the store accepts to write: documents checked and cut into node records, pre-encoded nodes checked."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from lmk_rag.errors import InvalidInputError
from lmk_rag.store import records as rec
from lmk_rag.store.types import NodeRecord

#: ``(doc_id, text, metadata)`` of a document to encode.
Document = tuple[str, str, "dict[str, Any] | None"]


def check_document(doc_id: Any, text: Any, metadata: Any) -> None:
    """Reject a document the store cannot hold, naming it."""
    if not isinstance(doc_id, str) or not doc_id:
        raise InvalidInputError(f"doc_id must be a non-empty string, got {doc_id!r}")
    if not isinstance(text, str):
        raise InvalidInputError(f"document {doc_id!r}: text must be a str, got {type(text).__name__}")
    if metadata is not None and not isinstance(metadata, dict):
        raise InvalidInputError(f"document {doc_id!r}: metadata must be a dict, got {type(metadata).__name__}")


def encode_documents(
    encoder: Any, documents: Sequence[Document], node_tokens: int
) -> list[tuple[str, list[NodeRecord], dict[str, Any]]]:
    """Encode documents in one encoder call and cut each into node records.

    :return: ``(doc_id, records, metadata)`` per document, ready for :func:`lmk_rag.store.versions.write_documents`.
    """
    encoded = encoder.encode_documents([text for _, text, _ in documents])
    return [
        (doc_id, rec.records_from_encoding(doc_id, text, enc, node_tokens, metadata), dict(metadata or {}))
        for (doc_id, text, metadata), enc in zip(documents, encoded)
    ]


def check_records(doc_id: str, records: Sequence[NodeRecord]) -> None:
    """Reject the pre-encoded nodes of one document: none, another document's, or repeated node ids."""
    if not records:
        raise InvalidInputError(f"document {doc_id!r}: no records; use delete_document to remove a document")
    bad = [r.node_id for r in records if r.doc_id != doc_id]
    if bad:
        raise InvalidInputError(f"document {doc_id!r}: records {bad[:3]} belong to other documents")
    if len({r.node_id for r in records}) != len(records):
        raise InvalidInputError(f"document {doc_id!r}: node ids are not unique")


#: Writes a batch of documents durably and returns the number of nodes written.
WriteBatch = Callable[[list[tuple[str, list[NodeRecord], dict[str, Any]]]], int]


def add_in_batches(
    encoder: Any, write: WriteBatch, documents: Iterable[Document], node_tokens: int, batch_size: int,
    show_progress_bar: bool | None,
) -> int:
    """Check every document, then encode, cut and write them ``batch_size`` at a time (each batch durable
    before the next is encoded).

    :return: the number of nodes written.
    """
    from tqdm.auto import tqdm

    docs = list(documents)
    for doc_id, text, metadata in docs:
        check_document(doc_id, text, metadata)
    total = 0
    disable = not show_progress_bar if show_progress_bar is not None else None
    with tqdm(total=len(docs), desc="ingest", unit="doc", disable=disable) as bar:
        for start in range(0, len(docs), batch_size):
            batch = docs[start : start + batch_size]
            total += write(encode_documents(encoder, batch, node_tokens))
            bar.update(len(batch))
    return total


def upsert_in_batches(write: WriteBatch, documents: Iterable[tuple[str, Sequence[NodeRecord]]], batch_size: int) -> int:
    """Check and write pre-encoded documents ``batch_size`` at a time; metadata comes from each first record.

    :return: the number of nodes written.
    """
    total, batch = 0, []
    for doc_id, records in documents:
        records = list(records)
        check_records(doc_id, records)
        batch.append((doc_id, records, dict(records[0].metadata)))
        if len(batch) == batch_size:
            total, batch = total + write(batch), []
    return total + (write(batch) if batch else 0)
