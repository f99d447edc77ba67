"""What the store accepts to write: documents checked, hashed and cut into node records; pre-encoded nodes checked."""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import math
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from lmk_rag.errors import InvalidInputError
from lmk_rag.store import records as rec
from lmk_rag.store.filters import PATH_CHARS
from lmk_rag.store.modes import is_static_encoder
from lmk_rag.store.types import NodeRecord
from lmk_rag.store.versions import DocumentWrite

if TYPE_CHECKING:
    from lmk_rag.encoder.protocols import DocumentEncoder
    from lmk_rag.encoder.types import EncodedText

#: ``(doc_id, text, metadata)`` of a document to encode.
Document = tuple[str, str, "dict[str, Any] | None"]


def check_documents(documents: Iterable[Document] | Iterable[tuple[str, str]]) -> list[Document]:
    """The documents as a list of ``(doc_id, text, metadata)``, each checked and its metadata as stored
    (:func:`clean_metadata`; ``(doc_id, text)`` means no metadata); a doc id given twice is an error (never "the
    last one wins").

    :raises InvalidInputError: naming the document and the problem.
    """
    if isinstance(documents, (str, bytes, dict)) or not isinstance(documents, Iterable):
        raise InvalidInputError(
            f"documents must be an iterable of (doc_id, text) or (doc_id, text, metadata) tuples, "
            f"got {type(documents).__name__}"
        )
    docs: list[Document] = []
    seen: set[str] = set()
    for item in documents:
        if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
            raise InvalidInputError(
                f"a document must be (doc_id, text) or (doc_id, text, metadata), got {_describe(item)}"
            )
        doc_id, text, metadata = (*item, None) if len(item) == 2 else item
        metadata = check_document(doc_id, text, metadata)
        if doc_id in seen:
            raise InvalidInputError(f"doc_id {doc_id!r} is given twice in one call; give each document once")
        seen.add(doc_id)
        docs.append((doc_id, text, metadata))
    return docs


def _describe(item: Any) -> str:
    """A short description of a bad document item for messages."""
    if isinstance(item, (tuple, list)):
        return f"a {type(item).__name__} of {len(item)} items"
    return f"{type(item).__name__} {str(item)[:40]!r}"


def check_doc_id(doc_id: Any) -> None:
    """Reject a doc id the store cannot hold: anything but a non-empty, valid Unicode str."""
    if not isinstance(doc_id, str) or not doc_id:
        raise InvalidInputError(f"doc_id must be a non-empty string, got {doc_id!r}")
    _check_unicode(doc_id, f"doc_id {doc_id!r}")


def check_document(doc_id: Any, text: Any, metadata: Any) -> dict[str, Any] | None:
    """Reject a document the store cannot hold, naming it.

    :return: its metadata as stored (:func:`clean_metadata`), or None.
    """
    check_doc_id(doc_id)
    if not isinstance(text, str):
        raise InvalidInputError(f"document {doc_id!r}: text must be a str, got {type(text).__name__}")
    _check_unicode(text, f"document {doc_id!r}: text")
    return None if metadata is None else clean_metadata(metadata, f"document {doc_id!r}")


#: The largest integer Qdrant keeps exactly (payload integers are 64-bit).
MAX_INT = 2**63 - 1


def clean_metadata(metadata: Any, owner: str) -> dict[str, Any]:
    """Metadata as the store keeps it, one policy for the core API and the LlamaIndex store: a dict with non-empty
    str keys without :data:`PATH_CHARS`, of str, bool, int (64-bit), finite float, None, and lists and dicts of
    those, nested at most :data:`MAX_DEPTH` deep. Dates and datetimes become RFC 3339 / ISO 8601 strings
    (``date.isoformat()``, ``datetime.isoformat()``), tuples lists, sets sorted lists; anything else (bytes, NaN,
    infinity, ids, numpy values) is an error naming the key, not a silent conversion.

    :param owner: names the document or node in the message.
    :return: a copy with the conversions made.
    :raises InvalidInputError: for the first value the store cannot keep.
    """
    if not isinstance(metadata, dict):
        raise InvalidInputError(f"{owner}: metadata must be a dict, got {type(metadata).__name__}")
    return _clean(metadata, owner, "metadata", 0)


#: How deep metadata may nest (a deeper value is refused, not walked until the interpreter's stack ends).
MAX_DEPTH = 32


def _clean(value: Any, owner: str, path: str, depth: int) -> Any:
    """Walk one metadata value (see :func:`clean_metadata`)."""
    if depth > MAX_DEPTH:
        raise InvalidInputError(f"{owner}: {path} nests deeper than {MAX_DEPTH} levels; flatten it")
    if value is None or isinstance(value, (str, bool)):
        if isinstance(value, str):
            _check_unicode(value, f"{owner}: {path}")
        return value
    if isinstance(value, int):
        if not -MAX_INT - 1 <= value <= MAX_INT:
            raise InvalidInputError(f"{owner}: {path} = {value} does not fit 64 bits; store it as a string")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInputError(f"{owner}: {path} = {value} is not a finite number; use None or a string")
        return value
    if isinstance(value, datetime.date):  # datetimes too
        return value.isoformat()
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=lambda item: (type(item).__name__, repr(item))) if isinstance(
            value, (set, frozenset)) else value
        return [_clean(item, owner, f"{path}[{index}]", depth + 1) for index, item in enumerate(items)]
    if isinstance(value, dict):
        cleaned: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInputError(f"{owner}: {path} has the key {key!r}; metadata keys must be strings")
            if not key or any(char in key for char in PATH_CHARS):
                raise InvalidInputError(
                    f"{owner}: {path} has the key {key!r}, which no filter can name (an empty key, or one holding "
                    f"{' or '.join(map(repr, PATH_CHARS))}: filters read 'a.b' as metadata['a']['b']); "
                    "use another character, such as '_'"
                )
            cleaned[key] = _clean(item, owner, f"{path}[{key!r}]", depth + 1)
        return cleaned
    raise InvalidInputError(
        f"{owner}: {path} is a {type(value).__name__}, which the store cannot keep as given; "
        "use str, int, float, bool, None, a date, list, tuple, set or dict (convert ids and bytes to strings)"
    )


def _check_unicode(text: str, what: str) -> None:
    """Reject strings with lone surrogates (they cannot be stored as UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidInputError(f"{what} is not valid Unicode ({error.reason} at character {error.start})") from None


def content_hash(text: str, metadata: dict[str, Any] | None, fingerprint: str) -> str:
    """The hash that tells an unchanged document: its text, its metadata and the encoder's fingerprint.

    Documents are checked first (:func:`check_document`), so metadata is plain JSON.
    """
    payload = json.dumps([fingerprint, text, metadata or {}], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def encode_documents(
    encoder: DocumentEncoder, documents: Sequence[Document], node_tokens: int, fingerprint: str
) -> tuple[list[DocumentWrite], int]:
    """Encode documents in one encoder call and cut each into node records (with its content hash).

    :return: the writes and the number of tokens encoded.
    """
    encoded = encoder.encode_documents([text for _, text, _ in documents])
    writes = [
        DocumentWrite(
            doc_id,
            node_records(encoder, doc_id, text, enc, node_tokens, metadata),
            dict(metadata or {}),
            content_hash(text, metadata, fingerprint),
        )
        for (doc_id, text, metadata), enc in zip(documents, encoded)
    ]
    return writes, sum(sum(enc.token_counts) for enc in encoded)


def node_records(
    encoder: DocumentEncoder, doc_id: str, text: str, encoded: EncodedText, node_tokens: int,
    metadata: dict[str, Any] | None = None,
) -> list[NodeRecord]:
    """Cut an encoded document into node records (:func:`~lmk_rag.store.records.records_from_encoding`); a static
    encoder's records carry their static token vectors, cut from the tokens the document was encoded with.

    :param encoder: the encoder that made ``encoded``.
    """
    records = rec.records_from_encoding(doc_id, text, encoded, node_tokens, metadata)
    if not is_static_encoder(encoder):
        return records
    static = encoder.encode_node_tokens(encoded, [record.span for record in records])
    return [dataclasses.replace(record, static_vectors=vectors) for record, vectors in zip(records, static)]


def check_records(doc_id: str, records: Sequence[NodeRecord]) -> list[NodeRecord]:
    """Reject the pre-encoded nodes of one document: none, another document's, repeated node ids, bad texts,
    metadata or spans.

    :return: the records with their metadata as stored (:func:`clean_metadata`).
    """
    if not records:
        raise InvalidInputError(f"document {doc_id!r}: no records; use delete_document to remove a document")
    bad = [r.node_id for r in records if r.doc_id != doc_id]
    if bad:
        raise InvalidInputError(f"document {doc_id!r}: records {bad[:3]} belong to other documents")
    if len({r.node_id for r in records}) != len(records):
        raise InvalidInputError(f"document {doc_id!r}: node ids are not unique")
    cleaned = []
    for record in records:
        if not isinstance(record.node_id, str) or not record.node_id or not isinstance(record.text, str):
            raise InvalidInputError(f"document {doc_id!r}: node ids and texts must be non-empty strings / strings")
        _check_unicode(record.text, f"node {record.node_id!r}: text")
        metadata = clean_metadata(record.metadata, f"node {record.node_id!r}")
        if not _is_span(record.span):
            raise InvalidInputError(
                f"node {record.node_id!r}: span {record.span!r} is not (start, end) with integers 0 <= start <= end"
            )
        cleaned.append(record if metadata == record.metadata else dataclasses.replace(record, metadata=metadata))
    return cleaned


def _is_span(span: Any) -> bool:
    """Whether ``span`` is a char span ``(start, end)`` of integers with 0 <= start <= end."""
    if not isinstance(span, (tuple, list)) or len(span) != 2:
        return False
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in span):
        return False
    return 0 <= span[0] <= span[1]


#: Writes a batch of documents durably and returns the number of nodes written.
WriteBatch = Callable[[list[DocumentWrite]], int]


def add_in_batches(
    encoder: DocumentEncoder, write: WriteBatch, documents: Sequence[Document], node_tokens: int, fingerprint: str,
    batch_size: int, show_progress_bar: bool | None,
) -> int:
    """Encode, cut and write checked documents ``batch_size`` at a time (each batch durable before the next).

    :return: the number of nodes written.
    """
    from tqdm.auto import tqdm

    total = tokens = 0
    disable = not show_progress_bar if show_progress_bar is not None else None
    with tqdm(total=len(documents), desc="ingest", unit="doc", disable=disable) as bar:
        for start in range(0, len(documents), batch_size):
            batch = documents[start : start + batch_size]
            writes, encoded = encode_documents(encoder, batch, node_tokens, fingerprint)
            total += write(writes)
            tokens += encoded
            bar.update(len(batch))
            bar.set_postfix_str(f"{tokens / max(bar.format_dict['elapsed'], 1e-9):,.0f} tokens/s")
    return total


def upsert_in_batches(write: WriteBatch, documents: Iterable[tuple[str, Sequence[NodeRecord]]], batch_size: int) -> int:
    """Check and write pre-encoded documents ``batch_size`` at a time; metadata comes from each first record.

    :return: the number of nodes written.
    :raises InvalidInputError: for bad records, or a doc id given twice.
    """
    total, batch, seen = 0, [], set()
    for doc_id, records in documents:
        records = check_records(doc_id, list(records))
        if doc_id in seen:
            raise InvalidInputError(f"doc_id {doc_id!r} is given twice in one call; give each document once")
        seen.add(doc_id)
        batch.append(DocumentWrite(doc_id, records, dict(records[0].metadata)))
        if len(batch) == batch_size:
            total, batch = total + write(batch), []
    return total + (write(batch) if batch else 0)
