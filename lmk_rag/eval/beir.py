"""Read a BEIR folder: ``corpus.jsonl[.gz]``, ``queries.jsonl`` and ``qrels/test.tsv``.

Every problem raises :class:`lmk_rag.errors.DatasetError` naming the file and, for a bad line,
its 1-based line number.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmk_rag.errors import DatasetError
from lmk_rag.jsonl import read_jsonl

CORPUS_NAMES = ("corpus.jsonl", "corpus.jsonl.gz")
QUERIES_NAME = "queries.jsonl"
QRELS_NAME = "qrels/test.tsv"


@dataclass(frozen=True)
class BeirDataset:
    """A BEIR test set, held in parallel lists.

    Only the queries named in the qrels are kept (as BEIR does). ``doc_texts`` and
    ``query_texts`` are all a pipeline ever sees; ids, qrels and metadata stay with the harness.

    :param name: a short name for reports (the folder path relative to its data root, or its name).
    :param doc_ids: corpus ids, in file order.
    :param doc_texts: corpus texts (``title`` and ``text`` joined by a newline when the title is set).
    :param query_ids: ids of the queries that have qrels, in file order.
    :param query_texts: their texts.
    :param query_metadata: their ``metadata`` objects (empty dicts when absent), for breakdowns only.
    :param qrels: ``{query_id: {doc_id: relevance}}``.
    """

    name: str
    doc_ids: list[str]
    doc_texts: list[str]
    query_ids: list[str]
    query_texts: list[str]
    query_metadata: list[dict[str, Any]]
    qrels: dict[str, dict[str, int]]


def load_beir(folder: str | Path, name: str | None = None) -> BeirDataset:
    """Load a BEIR folder.

    :param folder: the folder holding ``corpus.jsonl`` (or ``.jsonl.gz``), ``queries.jsonl`` and
        ``qrels/test.tsv``.
    :param name: the name to report; defaults to ``parent/folder`` when the parent holds only BEIR
        folders (``manpages-needle/L2048``), else the folder's name.
    :return: the dataset.
    :raises DatasetError: a file is missing, a line is not valid JSON or lacks ``_id``/``text``, an
        id repeats, a qrels line is malformed or names an unknown query or document, or no query
        has qrels. The message names the file and line.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise DatasetError(f"{folder}: not a folder")
    corpus_path = _corpus_path(folder)
    doc_ids, doc_texts = _read_corpus(corpus_path)
    queries = _read_queries(_require(folder / QUERIES_NAME))
    qrels = _read_qrels(_require(folder / QRELS_NAME), set(queries), set(doc_ids))
    kept = [query_id for query_id in queries if query_id in qrels]
    return BeirDataset(
        name=name or _default_name(folder),
        doc_ids=doc_ids,
        doc_texts=doc_texts,
        query_ids=kept,
        query_texts=[queries[query_id][0] for query_id in kept],
        query_metadata=[queries[query_id][1] for query_id in kept],
        qrels=qrels,
    )


def _default_name(folder: Path) -> str:
    """``parent/name`` when the parent holds nothing but BEIR folders (``manpages-needle/L2048``), else ``name``."""
    folder = folder.resolve()
    siblings = list(folder.parent.iterdir())
    if len(siblings) > 1 and all((sibling / QUERIES_NAME).is_file() for sibling in siblings):
        return f"{folder.parent.name}/{folder.name}"
    return folder.name


def _require(path: Path) -> Path:
    if not path.is_file():
        raise DatasetError(f"{path}: file not found")
    return path


def _corpus_path(folder: Path) -> Path:
    for name in CORPUS_NAMES:
        if (folder / name).is_file():
            return folder / name
    raise DatasetError(f"{folder / CORPUS_NAMES[0]}: file not found (nor {CORPUS_NAMES[1]})")


def _json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for each non-blank line, checking ``_id`` and ``text``."""
    for number, record in read_jsonl(path):
        for key in ("_id", "text"):
            if not isinstance(record.get(key), str):
                raise DatasetError(f"{path}:{number}: missing or non-string {key!r}")
        yield number, record


def _read_corpus(path: Path) -> tuple[list[str], list[str]]:
    ids: list[str] = []
    texts: list[str] = []
    seen: set[str] = set()
    for number, record in _json_lines(path):
        doc_id = record["_id"]
        if doc_id in seen:
            raise DatasetError(f"{path}:{number}: duplicate document id {doc_id!r}")
        seen.add(doc_id)
        title = record.get("title") or ""
        ids.append(doc_id)
        texts.append(f"{title}\n{record['text']}" if title else record["text"])
    if not ids:
        raise DatasetError(f"{path}: no documents")
    return ids, texts


def _read_queries(path: Path) -> dict[str, tuple[str, dict[str, Any]]]:
    queries: dict[str, tuple[str, dict[str, Any]]] = {}
    for number, record in _json_lines(path):
        query_id = record["_id"]
        if query_id in queries:
            raise DatasetError(f"{path}:{number}: duplicate query id {query_id!r}")
        metadata = record.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise DatasetError(f"{path}:{number}: 'metadata' must be a JSON object")
        queries[query_id] = (record["text"], metadata)
    return queries


def _read_qrels(path: Path, query_ids: set[str], doc_ids: set[str]) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            fields = line.rstrip("\n").split("\t")
            if number == 1 and fields[0] == "query-id":
                continue
            if not line.strip():
                continue
            if len(fields) != 3:
                raise DatasetError(f"{path}:{number}: expected 3 tab-separated fields, got {len(fields)}")
            query_id, doc_id, score = fields
            if query_id not in query_ids:
                raise DatasetError(f"{path}:{number}: unknown query id {query_id!r}")
            if doc_id not in doc_ids:
                raise DatasetError(f"{path}:{number}: unknown document id {doc_id!r}")
            try:
                qrels.setdefault(query_id, {})[doc_id] = int(score)
            except ValueError as error:
                raise DatasetError(f"{path}:{number}: score {score!r} is not an integer") from error
    if not qrels:
        raise DatasetError(f"{path}: no relevance judgements")
    return qrels
