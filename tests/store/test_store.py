"""The store's behaviour, one test body per backend (Edge on disk, qdrant-client local, real server if set)."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from dataclasses import astuple, replace
from functools import partial
from itertools import pairwise
from typing import Any

import numpy as np
import pytest

from lmk_rag.errors import CorruptStoreError, InvalidInputError, SettingsMismatchError, VectorSizeError
from lmk_rag.store import FieldCondition, Filter, NodeRecord, SearchOptions
from lmk_rag.store.query import DEFAULT_ALPHA, DOCUMENT_WEIGHT, is_question, length_penalty, query_alpha
from lmk_rag.store.records import node_point_id


def _fill(store: Any, doc_records: dict[str, list[NodeRecord]]) -> int:
    return sum(store.upsert_encoded_document(doc_id, records) for doc_id, records in doc_records.items())


def _first_sentence(text: str) -> str:
    return text.split(". ")[0][:200]


def _dense_by_hand(store: Any, doc_records: dict[str, list[NodeRecord]], query: Any) -> dict[str, float]:
    """Every node's dense side by hand: ``(1 - w) * (chunk MaxSim - b * ln(n)) + w * document cosine``, the document
    vector being the unit mean of all its document's ``n`` chunk vectors, ``w`` the store's document weight and ``b``
    the length penalty at that weight."""
    weight, dense = store.document_weight, {}
    penalty = length_penalty(weight)
    for records in doc_records.values():
        chunks = np.concatenate([r.chunk_vectors for r in records]).astype(np.float64)
        mean = chunks.mean(axis=0)
        cosine = float(query.vector @ (mean / np.linalg.norm(mean)))
        for record in records:
            maxsim = float(np.mean((record.chunk_vectors @ query.chunk_vectors.T).max(axis=0)))
            dense[record.node_id] = (1 - weight) * (maxsim - penalty * np.log(len(chunks))) + weight * cosine
    return dense


@pytest.mark.slow
def test_ingest_and_search_find_each_document_by_its_own_words(open_store, docs) -> None:
    store = open_store()
    items = [(doc_id, text, {"rank": i}) for i, (doc_id, text) in enumerate(docs.items())]
    n_nodes = store.upsert_documents(items[:4], document_batch_size=2)
    assert n_nodes == store.count() > 4  # long pages make several nodes
    assert store.doc_ids() == sorted(doc_id for doc_id, _, _ in items[:4])
    for doc_id, text, _ in items[:4]:
        hits = store.search(_first_sentence(text), k=3)
        assert hits[0].doc_id == doc_id
        assert hits[0].text == text[hits[0].span[0] : hits[0].span[1]]
        assert len({h.doc_id for h in hits}) == len(hits)  # document-level: best node per document
        assert hits[0].metadata == {"rank": items.index((doc_id, text, {"rank": hits[0].metadata["rank"]}))}


@pytest.mark.slow
def test_node_level_search_and_rerank_modes(open_store, doc_records, docs) -> None:
    store = open_store()
    _fill(store, doc_records)
    doc_id = next(iter(docs))
    node = doc_records[doc_id][1]
    for rerank in ("chunks", "node"):
        hits = store.search(node.text[:300], k=5, rerank=rerank, one_per_document=False)
        assert hits[0].node_id == node.node_id
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        assert len({h.node_id for h in hits}) == 5
    landmark_score = store.search(node.text[:300], k=1, rerank="chunks", one_per_document=False, alpha=1.0)[0].score
    query = store.encoder.encode_queries(node.text[:300])
    maxsim = np.mean([float(np.max(node.chunk_vectors @ q)) for q in query.chunk_vectors])  # by hand, per q
    assert store.document_weight == DOCUMENT_WEIGHT  # whole manual pages: the document cosine counts
    expected = _dense_by_hand(store, doc_records, query)[node.node_id]
    assert landmark_score == pytest.approx(expected, rel=1e-3, abs=1e-3) != pytest.approx(maxsim, abs=1e-3)


def test_search_by_a_vector_scores_by_the_node_vectors_cosine(open_store, doc_records, docs) -> None:
    store = open_store()
    _fill(store, doc_records)
    node = doc_records[next(iter(docs))][1]
    hits = store.search_vector(node.vector.tolist(), k=3, one_per_document=False)
    nodes = [record for records in doc_records.values() for record in records]
    expected = sorted((float(record.vector @ node.vector) for record in nodes), reverse=True)[:3]
    assert hits[0].node_id == node.node_id
    assert [hit.score for hit in hits] == pytest.approx(expected, abs=1e-4)


def _bm25_by_hand(store: Any, nodes: list[NodeRecord], text: str) -> dict[str, float]:
    """BM25 of every node as Qdrant's IDF modifier computes it over the store's BM25 vectors."""
    from lmk_rag.store.bm25 import Bm25Encoder

    bm25 = Bm25Encoder()
    vectors = {n.node_id: dict(zip(*astuple(bm25.embed_document(n.text)))) for n in nodes}
    terms = bm25.embed_query(text).indices
    df = {t: sum(t in v for v in vectors.values()) for t in terms}
    idf = {t: np.log(1 + (len(nodes) - df[t] + 0.5) / (df[t] + 0.5)) for t in terms}
    return {node_id: sum(idf[t] * v.get(t, 0.0) for t in terms) for node_id, v in vectors.items()}


def test_alpha_one_ranks_by_the_dense_side_and_alpha_zero_by_bm25(open_store, doc_records, docs) -> None:
    store = open_store()
    _fill(store, doc_records)
    nodes = [r for records in doc_records.values() for r in records]
    text = _first_sentence(docs["page2.txt"])
    query = store.encoder.encode_queries(text)
    maxsim = _dense_by_hand(store, doc_records, query)
    hits = store.search(text, k=len(nodes), one_per_document=False, alpha=1.0)  # the prefetch holds every node
    assert [h.node_id for h in hits] == sorted(maxsim, key=lambda n: (-maxsim[n], node_point_id(n, 0)))[: len(hits)]
    np.testing.assert_allclose([h.score for h in hits], [maxsim[h.node_id] for h in hits], atol=1e-4)
    bm25 = _bm25_by_hand(store, nodes, text)
    matching = [n for n in bm25 if bm25[n] > 0]
    hits = store.search(text, k=len(nodes), one_per_document=False, alpha=0.0)
    assert [h.node_id for h in hits] == sorted(matching, key=lambda n: (-bm25[n], node_point_id(n, 0)))
    top = max(bm25.values())
    np.testing.assert_allclose([h.score for h in hits], [bm25[h.node_id] / top for h in hits], rtol=1e-4)
    fused = store.search(text, k=len(nodes), one_per_document=False)  # the default alpha mixes both
    assert store.alpha == DEFAULT_ALPHA == store.settings["alpha"]
    expected = {n: DEFAULT_ALPHA * maxsim[n] + (1 - DEFAULT_ALPHA) * bm25[n] / top for n in maxsim}
    np.testing.assert_allclose([h.score for h in fused], [expected[h.node_id] for h in fused], atol=1e-4)


def test_a_question_leans_on_the_dense_side(open_store, doc_records, docs) -> None:
    """A query asked as a question, searched without an alpha, is ranked as with ``query_alpha`` (0.7 -> 0.8); the
    same words as a statement keep the store's alpha, and an alpha given with the query wins."""
    store = open_store()
    _fill(store, doc_records)
    statement = _first_sentence(docs["page2.txt"]).rstrip(".?! ")
    question = f"How does {statement[0].lower()}{statement[1:]}?"
    nodes = sum(len(records) for records in doc_records.values())

    def scores(text: str, **alpha: float) -> list[tuple[str, float]]:
        return [(h.node_id, round(h.score, 4)) for h in store.search(text, k=nodes, one_per_document=False, **alpha)]

    assert query_alpha(DEFAULT_ALPHA, question) == pytest.approx(0.8)
    assert scores(question) == scores(question, alpha=0.8) != scores(question, alpha=DEFAULT_ALPHA)
    assert scores(question, alpha=0.5) != scores(question)
    assert scores(statement) == scores(statement, alpha=DEFAULT_ALPHA) != scores(statement, alpha=0.8)


def _fixture_documents(folder: Any) -> list[tuple[str, str]]:
    with gzip.open(folder / "corpus.jsonl.gz", "rt") as handle:
        return [(row["_id"], row["text"]) for row in map(json.loads, handle)]


@pytest.mark.slow
def test_the_document_cosine_counts_in_a_store_of_pages_not_in_one_of_glued_texts(open_store, fixture_data) -> None:
    """Whole manual pages agree with themselves beyond what two pages do; needle haystacks (unrelated pages glued
    together) do not: the first store blends the document cosine into its rerank, the second ranks by chunk MaxSim
    alone."""
    pages = open_store("pages")
    pages.upsert_documents(_fixture_documents(fixture_data / "manpages-longdoc"))
    assert pages.document_weight == DOCUMENT_WEIGHT == pages.info()["document_weight"]
    if pages.collection_name is None:  # Edge: the length penalty's formula reads the chunk count from an index
        assert "document.chunks" in pages.backend.shard.info().payload_schema
    haystacks = open_store("haystacks")
    haystacks.upsert_documents(_fixture_documents(fixture_data / "manpages-needle" / "L2048"))
    assert haystacks.document_weight == 0.0
    empty = open_store("empty")
    assert empty.document_weight == 0.0 and empty.search("exit status", k=3) == []


@pytest.mark.parametrize("weight", [0.0, 0.6])
def test_a_handle_may_set_the_document_weight(open_store, doc_records, docs, weight) -> None:
    """``SearchOptions(document_weight=...)`` replaces the store's measure for one handle: 0 ranks by chunk MaxSim
    alone; the store's record is not changed."""
    store = open_store(search=SearchOptions(document_weight=weight))
    _fill(store, doc_records)
    assert store.document_weight == weight and "document_weight" not in store.settings
    text = _first_sentence(docs["page2.txt"])
    dense = _dense_by_hand(store, doc_records, store.encoder.encode_queries(text))
    hits = store.search(text, k=len(dense), one_per_document=False, alpha=1.0)
    np.testing.assert_allclose([h.score for h in hits], [dense[h.node_id] for h in hits], atol=1e-4)
    for bad in (-0.1, 1.5, "high", True):
        with pytest.raises(InvalidInputError, match="document_weight must be a number from 0"):
            SearchOptions(document_weight=bad)


@pytest.mark.parametrize(("text", "asked"), [
    ("How do I trap errors?", True), ("How can I do an atexit()? (Exception handling)", True),
    ("What is a closure ? ", True), ("get/set resource limits", False), ("Is $x ? $y : $z the ternary", False),
    ("How to hack on Perl", False), ("", False), (None, False),
])
def test_what_counts_as_a_question(text, asked) -> None:
    assert is_question(text) is asked
    assert query_alpha(DEFAULT_ALPHA, text) == (pytest.approx(0.8) if asked else DEFAULT_ALPHA)
    assert query_alpha(1.0, text) == 1.0 and query_alpha(0.0, text) == 0.0  # one side alone stays alone


def test_scores_are_cosine_like_for_long_queries(open_store, doc_records, docs) -> None:
    store = open_store()
    _fill(store, doc_records)
    text = " ".join(docs.values())[:3000]
    assert len(store.encoder.encode_queries(text).chunk_vectors) >= 10
    for alpha in (0.0, 0.5, 1.0):
        for rerank in ("chunks", "node"):
            scores = [h.score for h in store.search(text, k=8, rerank=rerank, alpha=alpha, one_per_document=False)]
            assert scores and all(-1.0 <= score <= 1.0 for score in scores)
    with pytest.raises(InvalidInputError, match="alpha"):
        store.search(text, alpha=1.5)


@pytest.mark.slow
def test_reingest_replaces_the_old_version(open_store, doc_records, docs) -> None:
    store = open_store()
    _fill(store, doc_records)
    doc_id, before = next(iter(doc_records.items()))
    total = store.count()
    new_text = "Penguins live in Antarctica and eat fish. They cannot fly but swim very well."
    assert store.upsert_document(doc_id, new_text, {"rank": 99}) == 1
    nodes = store.get_nodes(filter={"doc_id": doc_id})
    assert [n.text for n in nodes] == [new_text] and nodes[0].metadata == {"rank": 99}
    assert store.count() == total - len(before) + 1
    assert store.search("penguins in Antarctica", k=1)[0].doc_id == doc_id
    # writing the same version twice keeps one copy
    store.upsert_document(doc_id, new_text, {"rank": 99})
    assert Counter(n.node_id for n in store.get_nodes()).most_common(1)[0][1] == 1


def test_delete_document(open_store, doc_records, docs) -> None:
    store = open_store()
    _fill(store, doc_records)
    doc_id = next(iter(doc_records))
    assert store.delete_document(doc_id) is True
    assert store.delete_document(doc_id) is False
    assert doc_id not in store.doc_ids()
    assert store.get_nodes(filter={"doc_id": doc_id}) == []
    assert all(h.doc_id != doc_id for h in store.search(_first_sentence(docs[doc_id]), k=8))
    assert store.count() == sum(len(r) for d, r in doc_records.items() if d != doc_id)
    store.clear()
    assert store.count() == 0 and store.doc_ids() == []


def test_filters(open_store, doc_records, docs) -> None:
    store = open_store()
    _fill(store, doc_records)
    query = _first_sentence(next(iter(docs.values())))
    even = store.search(query, k=8, filter={"group": "even"})
    assert even and {h.metadata["group"] for h in even} == {"even"}
    ranks = store.search(query, k=8, filter={"rank": [1, 2]})
    assert {h.metadata["rank"] for h in ranks} == {1, 2}
    ranged = Filter(must=[FieldCondition("rank", "gte", 2), FieldCondition("rank", "lt", 5)],
                    must_not=[FieldCondition("doc_id", "eq", "page3.txt")])
    assert {h.metadata["rank"] for h in store.search(query, k=8, filter=ranged)} == {2, 4}
    either = Filter(should=[FieldCondition("rank", "eq", 0), FieldCondition("group", "eq", "odd")])
    assert {h.metadata["rank"] for h in store.search(query, k=8, filter=either)} == {0, 1, 3, 5, 7}
    assert {n.doc_id for n in store.get_nodes(filter=Filter(must=[FieldCondition("rank", "ne", 0)]))} == set(
        list(doc_records)[1:])
    wanted = [doc_records["page1.txt"][0].node_id]
    assert [n.node_id for n in store.get_nodes(node_ids=wanted)] == wanted


def test_reopen_rebuilds_the_encoder_and_keeps_everything(open_store, doc_records, docs) -> None:
    store = open_store()
    _fill(store, doc_records)
    query = _first_sentence(docs["page2.txt"])
    before = [(h.node_id, round(h.score, 4)) for h in store.search(query, k=5)]
    count = store.count()
    store.close()
    again = open_store(encoder=None)
    assert again.encoder.settings == store.encoder.settings
    assert again.count() == count and again.doc_ids() == sorted(doc_records)
    assert [(h.node_id, round(h.score, 4)) for h in again.search(query, k=5)] == before


@pytest.mark.slow
def test_other_encoder_settings_are_refused(open_store, doc_records) -> None:
    from lmk_rag.encoder import LandmarkEncoder

    store = open_store()
    _fill(store, dict(list(doc_records.items())[:1]))
    store.close()
    with pytest.raises(SettingsMismatchError, match="granularity"):
        open_store(encoder=LandmarkEncoder(granularity=16))
    with pytest.raises(SettingsMismatchError, match="bm25"):
        open_store(bm25=False)  # built with the default, BM25 on


def test_vector_size_mismatch(open_store, doc_records) -> None:
    store = open_store()
    good = doc_records["page0.txt"][0]
    bad_vector = NodeRecord("x#0", "x", "t", (0, 1), np.ones(8, np.float32), good.chunk_vectors)
    with pytest.raises(VectorSizeError, match=r"\(384,\)"):
        store.upsert_encoded_document("x", [bad_vector])
    bad_chunks = NodeRecord("x#0", "x", "t", (0, 1), good.vector, np.ones((2, 10), np.float32))
    with pytest.raises(VectorSizeError):
        store.upsert_encoded_document("x", [bad_chunks])
    with pytest.raises(InvalidInputError):
        store.upsert_encoded_document("x", [good])  # belongs to page0.txt
    assert store.count() == 0


def test_static_slot_and_static_rerank(open_store, doc_records, docs, static_encoder) -> None:
    store = open_store(static_encoder=static_encoder)
    _fill(store, doc_records)
    node = store.get_nodes(node_ids=["page3.txt#0"])[0]
    assert node.static_vectors is not None and node.static_vectors.shape[1] == 16
    hits = store.search(_first_sentence(docs["page3.txt"]), k=3, rerank="static")
    assert hits[0].doc_id == "page3.txt"
    store.close()
    with pytest.raises(SettingsMismatchError, match="static"):
        # no static vectors, no static encoder
        open_store().upsert_encoded_document("page0.txt", doc_records["page0.txt"])


@pytest.mark.slow
def test_bm25_hybrid_prefetch(open_store, doc_records, docs) -> None:
    store = open_store()
    assert store.bm25 and store.info()["bm25"] is True  # on by default
    _fill(store, doc_records)
    text = docs["page5.txt"]
    rare = max(set(text.split()), key=len)  # a long, rare token from the page
    for rerank in ("chunks", "node"):
        assert store.search(rare, k=8, rerank=rerank)
    assert store.search(_first_sentence(text), k=1)[0].doc_id == "page5.txt"


def test_hits_read_after_ranking_are_the_hits_of_one_call_and_never_a_marker(open_store, doc_records, docs,
                                                                             monkeypatch) -> None:
    """Where the store has one writer, a search ranks its candidates by their ids and versions and reads the final
    hits' payloads after (one call more); a server search gets them with the candidates. Both give the same hits.
    No search filters on ``kind``: a marker, which carries the document's metadata too, has no vectors, so even a
    search whose filter the markers match and whose candidates are every node returns nodes alone."""
    store = open_store(search=SearchOptions(prefetch_limit=1000))
    _fill(store, doc_records)
    even = sum(len(records) for records in doc_records.values() if records[0].metadata["group"] == "even")
    searches = [{"k": 5}, {"k": 5, "one_per_document": False, "rerank": "node"},
                {"k": 1000, "one_per_document": False, "filter": {"group": "even"}}, {"k": 3, "alpha": 0.0}]
    query = _first_sentence(docs["page2.txt"])
    monkeypatch.setattr(store.backend, "single_writer", True)  # Edge, a local-mode folder (a server in this test)
    ranked_first = [store.search(query, **kwargs) for kwargs in searches]
    monkeypatch.setattr(store.backend, "single_writer", False)
    assert ranked_first == [store.search(query, **kwargs) for kwargs in searches]
    assert len(ranked_first[2]) == even and {h.metadata["group"] for h in ranked_first[2]} == {"even"}
    assert all(hit.text and hit.node_id and hit.span[1] > hit.span[0] for hits in ranked_first for hit in hits)
    monkeypatch.setattr(store.backend, "single_writer", True)
    monkeypatch.setattr(store.backend, "retrieve", lambda ids, with_vectors: [])  # the engine lost the points
    with pytest.raises(CorruptStoreError, match="was ranked but cannot be read back; run lmk-rag check"):
        store.search(query, k=5)


def test_reranked_hits_rank_ties_by_point_id(open_store, doc_records, docs) -> None:
    """Qdrant returns equal scores in no fixed order (differently in two stores written alike); the store sorts
    ties by point id, so when the prefetch holds every node two stores give the same hits in the same order."""
    copies = {f"{doc_id}{tag}": [replace(r, doc_id=f"{doc_id}{tag}", node_id=f"{r.node_id}{tag}") for r in records]
              for doc_id, records in doc_records.items() for tag in ("", "~a", "~b")}  # triplets: ties everywhere
    runs = []
    for name in ("first", "second"):
        store = open_store(name, search=SearchOptions(prefetch_limit=1000))
        store.upsert_encoded_documents(copies.items())  # one write: Edge stores its points in a random internal order
        runs.append([[(h.node_id, h.score) for h in store.search(_first_sentence(text), k=5, one_per_document=False)]
                     for text in docs.values()])
    assert [[node for node, _ in hits] for hits in runs[0]] == [[node for node, _ in hits] for hits in runs[1]]
    for first, second in zip(runs[0], runs[1]):  # a score on a rounding boundary may differ in its 6th decimal
        assert [score for _, score in first] == pytest.approx([score for _, score in second], abs=2e-6)
    ties = [(a, b) for hits in runs[0] for a, b in pairwise(hits) if a[1] == b[1]]
    point_id = partial(node_point_id, slot=0)  # each document was written once: slot 0
    assert ties and all(point_id(a[0]) < point_id(b[0]) for a, b in ties)
