"""What a write takes: documents, each checked, its metadata cleaned under one policy, and the hash that tells an
unchanged document; and encodings cut into node records (one encoder call per batch of documents, each encoding cut
into runs of whole landmark chunks by :func:`lmk_rag.nodes.group_chunks`), as the :class:`DocumentWrite` s a write
takes."""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from lmk_rag.errors import InvalidInputError
from lmk_rag.store.filters import PATH_CHARS
from lmk_rag.store.records import node_id_for
from lmk_rag.store.store_encoder import is_static_encoder
from lmk_rag.store.types import NodeRecord

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
        if record.chunk_spans is not None and not _chunk_spans_fit(record):
            raise InvalidInputError(
                f"node {record.node_id!r}: chunk_spans {record.chunk_spans!r:.120} must be one (start, end) per chunk "
                f"vector, each inside the node's span {tuple(record.span)}; or None where they are unknown"
            )
        cleaned.append(record if metadata == record.metadata else dataclasses.replace(record, metadata=metadata))
    return cleaned


def _chunk_spans_fit(record: NodeRecord) -> bool:
    """Whether a record's chunk spans are spans inside its span, one per chunk vector (when it has them)."""
    spans = record.chunk_spans
    if not isinstance(spans, (tuple, list)) or not spans or not all(_is_span(span) for span in spans):
        return False
    if record.chunk_vectors is not None and len(spans) != len(record.chunk_vectors):
        return False
    return all(record.span[0] <= start <= end <= record.span[1] for start, end in spans)


def _is_span(span: Any) -> bool:
    """Whether ``span`` is a char span ``(start, end)`` of integers with 0 <= start <= end."""
    if not isinstance(span, (tuple, list)) or len(span) != 2:
        return False
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in span):
        return False
    return 0 <= span[0] <= span[1]


def check_on_ack(on_ack: Any) -> None:
    """Refuse an ``on_ack`` that could only fail after a batch is written.

    :raises InvalidInputError: when ``on_ack`` is neither None nor callable.
    """
    if on_ack is not None and not callable(on_ack):
        raise InvalidInputError(f"on_ack must be a function of the acknowledged doc ids (or None), got {on_ack!r}")


def check_sources(sources: Any, documents: Sequence[Document]) -> dict[str, str]:
    """The ``sources`` argument of ``upsert_documents`` as a dict (empty for None).

    :raises InvalidInputError: for a mapping that is not of doc ids given in the same call to non-empty strings.
    """
    if sources is None:
        return {}
    if not isinstance(sources, Mapping):
        raise InvalidInputError(f"sources must map doc ids to the files they were read from, got {sources!r}")
    given = {doc_id for doc_id, _, _ in documents}
    bad = [key for key, value in sources.items() if key not in given or not isinstance(value, str) or not value]
    if bad:
        raise InvalidInputError(
            f"sources: {bad[:3]} are not doc ids of this call mapped to a non-empty file path string"
        )
    return dict(sources)


@dataclass(frozen=True)
class DocumentWrite:
    """One document to write.

    :param doc_id: the document.
    :param records: its nodes.
    :param metadata: its metadata.
    :param content_hash: the hash of its text and metadata, recorded on its marker (None for pre-encoded nodes).
    :param source: the file it was read from, recorded on its marker
        (see :func:`~lmk_rag.store.records.marker_payload`).
    """

    doc_id: str
    records: list[NodeRecord]
    metadata: dict[str, Any] = field(default_factory=dict)
    content_hash: str | None = None
    source: str | None = None


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
            chunk_spans=tuple(encoded.spans[node.chunk_range[0] : node.chunk_range[1]]),
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

    :param hashes: each document's content hash (:func:`content_hash`), recorded on its
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
    found: dict[str, tuple[np.ndarray, tuple[tuple[int, int], ...]]] = {}
    for (_, parts), encoded in zip(jobs, encoder.encode_documents([text for text, _ in jobs]) if jobs else []):
        for record, start in parts:
            end, shift = start + len(record.text), record.span[0] - start  # the record's end; text to document
            rows = [row for row, (chunk_start, _) in enumerate(encoded.spans) if start <= chunk_start < end]
            if rows:
                spans = tuple((chunk_start + shift, min(chunk_end, end) + shift)
                              for chunk_start, chunk_end in (encoded.spans[row] for row in rows))
                found[record.node_id] = encoded.chunk_vectors[rows], spans
    return [
        record if record.chunk_vectors is not None else _with_chunks(record, found.get(record.node_id))
        for record in records
    ]


def _with_chunks(record: NodeRecord, found: tuple[np.ndarray, tuple[tuple[int, int], ...]] | None) -> NodeRecord:
    """A record with the chunk vectors and spans encoded for it, or (a blank text) its node vector as its one chunk
    vector, spanning the node."""
    if found is None:
        vectors, spans = np.asarray(record.vector, dtype=np.float32)[None, :], (tuple(record.span),)
    else:
        vectors, spans = found
    return dataclasses.replace(record, chunk_vectors=vectors, chunk_spans=spans)


def _tile(records: list[NodeRecord]) -> bool:
    """Whether records sorted by span cover a text from 0 end to end, each span as long as its text."""
    end = 0
    for record in records:
        if tuple(record.span) != (end, end + len(record.text)):
            return False
        end = record.span[1]
    return True
