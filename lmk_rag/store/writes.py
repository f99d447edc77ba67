"""The write half of :class:`~lmk_rag.store.LandmarkStore`: documents and nodes in, documents and nodes out.

A mixin like :class:`~lmk_rag.store.reads.StoreReads`: every change goes through the crash-safe protocol of
:mod:`~lmk_rag.store.versions` and is recorded in the store's :mod:`~lmk_rag.store.ledger`; a store opened
``read_only`` refuses them all.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from lmk_rag.checks import check_count
from lmk_rag.errors import InvalidInputError, StoreReadOnlyError
from lmk_rag.store import versions
from lmk_rag.store.filters import FilterLike
from lmk_rag.store.ingest import (
    Document,
    add_in_batches,
    check_doc_id,
    check_documents,
    check_records,
    clean_metadata,
    content_hash,
    upsert_in_batches,
)
from lmk_rag.store.types import NodeRecord

if TYPE_CHECKING:  # pragma: no cover
    from lmk_rag.encoder.protocols import DocumentEncoder
    from lmk_rag.store.base import Backend
    from lmk_rag.store.ledger import Ledger
    from lmk_rag.store.points import StoreVectors


class StoreWrites:
    """Writes and deletes of a store (see :class:`~lmk_rag.store.LandmarkStore`)."""

    _backend: Backend
    _vectors: StoreVectors
    _meta: dict[str, Any]
    _ledger: Ledger
    where: str
    read_only: bool
    document_batch_size: int
    encoder: DocumentEncoder
    node_tokens: int

    count: Callable[[], int]  # from StoreReads
    count_documents: Callable[[], int]

    def add_document(self, doc_id: str, text: str, metadata: dict[str, Any] | None = None) -> int:
        """Encode one document, cut it into nodes and write them (replacing an older version; an unchanged
        document is not written again).

        :return: the number of nodes written.
        :raises EmptyTextError: when the text is empty.
        """
        return self.add_documents([(doc_id, text, metadata)], show_progress_bar=False)

    def add_documents(
        self,
        documents: Iterable[Document],
        *,
        document_batch_size: int | None = None,
        show_progress_bar: bool | None = None,
        on_ack: Callable[[list[str]], None] | None = None,
        skip_unchanged: bool = True,
        sources: Mapping[str, str] | None = None,
    ) -> int:
        """Encode, cut and write ``(doc_id, text, metadata)`` documents (or ``(doc_id, text)``: no metadata) in
        batches, each durable before the next.

        :param document_batch_size: documents per batch (default: the store's ``document_batch_size``).
        :param show_progress_bar: show a tqdm bar (None: only on a terminal).
        :param on_ack: called with the doc ids of each batch once it is durable.
        :param skip_unchanged: leave out documents whose text and metadata the store already holds (by the content
            hash on their marker), without encoding them; False rewrites them.
        :param sources: ``{doc_id: file}``: the file each document was read from, recorded on its marker apart
            from its metadata (an unchanged document gets it too, without being rewritten); :meth:`sources` lists
            them. ``lmk-rag ingest --sync`` deletes only documents it recorded a source for.
        :return: the number of nodes written.
        :raises InvalidInputError: for a bad document, a doc id given twice, a ``document_batch_size`` that is not a
            positive integer or an ``on_ack`` that is not callable (nothing is written then).
        """
        batch_size = (self.document_batch_size if document_batch_size is None
                      else check_count("document_batch_size", document_batch_size))
        check_on_ack(on_ack)
        docs = check_documents(documents)
        sources = check_sources(sources, docs)
        if skip_unchanged:
            changes = self.changes(docs)
            unchanged = {doc_id: sources[doc_id] for doc_id, change in changes.items()
                         if change == "unchanged" and doc_id in sources}
            if unchanged:  # a marker's source only: no count changes, nothing for the ledger
                self._check_writable()
                versions.record_sources(self._backend, unchanged)
            docs = [doc for doc in docs if changes[doc[0]] != "unchanged"]
        if not docs:  # nothing to encode: the model is not even loaded
            return 0

        def write(writes: list[versions.DocumentWrite]) -> int:
            return self._write([dataclasses.replace(w, source=sources.get(w.doc_id)) for w in writes], on_ack)

        return add_in_batches(self.encoder, write, docs, self.node_tokens, self._meta["encoder"]["fingerprint"],
                              batch_size, show_progress_bar)

    def changes(self, documents: Iterable[Document]) -> dict[str, str]:
        """What writing these documents would do to each: ``"new"``, ``"changed"`` or ``"unchanged"`` (same text,
        metadata and encoder as the stored version; documents written without a content hash count as changed)."""
        docs = check_documents(documents)
        recorded = versions.recorded_hashes(self._backend, [doc_id for doc_id, _, _ in docs])
        fingerprint = self._meta["encoder"]["fingerprint"]
        return {
            doc_id: "new" if doc_id not in recorded
            else "unchanged" if recorded[doc_id] == content_hash(text, metadata, fingerprint) else "changed"
            for doc_id, text, metadata in docs
        }

    def upsert_nodes(self, doc_id: str, records: Sequence[NodeRecord], metadata: dict[str, Any] | None = None) -> int:
        """Write pre-encoded nodes as the new version of a document, replacing its old nodes safely.

        :param doc_id: the document; every record's ``doc_id`` must equal it.
        :param records: the document's nodes (node ids unique).
        :param metadata: the document's metadata (default: the first record's).
        :return: the number of nodes written.
        :raises VectorSizeError: when a vector's size differs from the store's.
        """
        records = check_records(doc_id, list(records))
        meta = dict(records[0].metadata) if metadata is None else clean_metadata(metadata, f"document {doc_id!r}")
        return self._write([versions.DocumentWrite(doc_id, records, meta)])

    def upsert_documents(
        self,
        documents: Iterable[tuple[str, Sequence[NodeRecord]]],
        *,
        document_batch_size: int = 64,
        on_ack: Callable[[list[str]], None] | None = None,
    ) -> int:
        """Write many pre-encoded ``(doc_id, records)`` documents, ``document_batch_size`` per write (as
        :meth:`upsert_nodes`; metadata from each document's first record), calling ``on_ack`` with each batch's ids
        once durable.

        :return: the number of nodes written.
        :raises InvalidInputError: for bad records, a ``document_batch_size`` that is not a positive integer or an
            ``on_ack`` that is not callable.
        """
        check_count("document_batch_size", document_batch_size)
        check_on_ack(on_ack)
        return upsert_in_batches(lambda writes: self._write(writes, on_ack), documents, document_batch_size)

    def _write(self, writes: list[versions.DocumentWrite], on_ack: Callable[[list[str]], None] | None = None) -> int:
        """Write the documents as new versions (every record checked first), then acknowledge them."""
        delta = versions.write_delta(self._backend, writes) if self._ledger.enabled else (0, 0)
        with self._changing(lambda now: (now[0] + delta[0], now[1] + delta[1])):
            written = versions.write_documents(self._backend, writes, self._vectors.points, self._vectors.check)
        if on_ack is not None:
            on_ack([write.doc_id for write in writes])
        return written

    def delete_document(self, doc_id: str) -> bool:
        """Delete a document and its nodes.

        :return: True if the document existed.
        :raises InvalidInputError: for a doc id that is not a non-empty string.
        """
        check_doc_id(doc_id)
        with self._changing(None):
            return versions.delete_document(self._backend, doc_id)

    def delete_nodes(self, node_ids: Sequence[str] | None = None, filter: FilterLike = None) -> int:
        """Delete nodes by id and/or metadata filter (both None: every node); a document left without nodes is
        deleted, the other documents keep the rest of their nodes.

        :param node_ids: node ids (an empty list deletes nothing).
        :param filter: metadata filter.
        :return: the number of nodes deleted.
        :raises InvalidInputError: when ``node_ids`` is not a list of strings (before anything is recorded).
        """
        if node_ids is None and filter is None:
            deleted = self.count()
            self.clear()
            return deleted
        wanted = versions.nodes_filter(self._backend, filter, node_ids)
        with self._changing(None):
            return versions.delete_nodes(self._backend, wanted)

    def clear(self) -> None:
        """Delete every document (the settings stay)."""
        with self._changing(lambda now: (0, 0)):
            versions.clear(self._backend)

    def optimize(self) -> None:
        """Build indexes now (Qdrant Edge optimizes only when asked; servers do it on their own)."""
        self._check_writable()
        self._backend.optimize()

    def _check_writable(self) -> None:
        """Refuse writes to a store opened ``read_only``."""
        if self.read_only:
            raise StoreReadOnlyError(f"{self.where} was opened read_only; open it without read_only=True to write")

    @contextmanager
    def _changing(self, after: Callable[[tuple[int, int]], tuple[int, int]] | None) -> Iterator[None]:
        """A write or delete: refused when read-only; recorded in the ledger with the ``(documents, nodes)`` it will
        leave, ``after(current counts)`` (None: unknown in advance)."""
        self._check_writable()
        upcoming = None
        if after is not None and self._ledger.enabled:
            upcoming = after(self._ledger.current() or (self.count_documents(), self.count()))
        with self._ledger.change(upcoming):
            yield


def check_on_ack(on_ack: Any) -> None:
    """Refuse an ``on_ack`` that could only fail after a batch is written.

    :raises InvalidInputError: when ``on_ack`` is neither None nor callable.
    """
    if on_ack is not None and not callable(on_ack):
        raise InvalidInputError(f"on_ack must be a function of the acknowledged doc ids (or None), got {on_ack!r}")


def check_sources(sources: Any, documents: Sequence[Document]) -> dict[str, str]:
    """The ``sources`` argument of ``add_documents`` as a dict (empty for None).

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
