"""A hit's evidence (``Hit.evidence``): the passage that carried its score, on a constructed document whose one
matching sentence is known; real MiniLM, real stores on every backend."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from lmk_rag.encoder import LandmarkEncoder
from lmk_rag.errors import InvalidInputError
from lmk_rag.static.document_encoder import StaticDocumentEncoder
from lmk_rag.store import ChunkScore, Evidence, NodeRecord, SearchOptions
from tests.conftest import NEEDLE_QUERY, NEEDLE_SENTENCE

OTHER = "gzip reduces the size of the named files using Lempel-Ziv coding (LZ77)."


@pytest.fixture(scope="module")
def sentence_encoder() -> LandmarkEncoder:
    """The real MiniLM with one landmark chunk per sentence: the needle sentence is one chunk."""
    return LandmarkEncoder(granularity="sentence", context="document")


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> int:
    return max(0, min(a[1], b[1]) - max(a[0], b[0]))


def test_the_evidence_is_the_one_matching_sentence(open_store, needle_document, sentence_encoder) -> None:
    text, (start, end) = needle_document
    store = open_store(encoder=sentence_encoder)
    store.upsert_documents([("doc", text, None), ("other", OTHER, None)])
    (hit,) = store.search(NEEDLE_QUERY, k=1)
    best = hit.evidence[0]
    assert (hit.doc_id, best.kind) == ("doc", "chunk")
    assert (best.start, best.end) == (start, end + 1)  # the sentence's chunk: the sentence and the space after it
    assert hit.passage().strip() == NEEDLE_SENTENCE == text[best.start : best.end].strip()
    assert hit.span[0] <= best.start < best.end <= hit.span[1] and hit.span != best.span


def test_evidence_scores_add_up_to_the_hits_maxsim(open_store, needle_document, minilm_encoder) -> None:
    text, needle = needle_document
    store = open_store(encoder=minilm_encoder, search=SearchOptions(document_weight=0.0))
    store.upsert_documents([("doc", text, None), ("other", OTHER, None)])
    hits = store.search(NEEDLE_QUERY + " " + " ".join(["Also, the rotation schedule."] * 12), k=2, alpha=1.0)
    for hit in hits:  # alpha 1, no document cosine: the score is the chunk MaxSim over the query vectors
        assert hit.evidence and all(e.kind == "chunk" and e.score is not None for e in hit.evidence)
        assert sum(e.score for e in hit.evidence) == pytest.approx(hit.score, abs=1e-4)
        assert [e.score for e in hit.evidence] == sorted((e.score for e in hit.evidence), reverse=True)
    (node,) = store.get_nodes(node_ids=[hits[0].node_id])
    assert {e.span for e in hits[0].evidence} <= set(node.chunk_spans)
    assert _overlap(hits[0].evidence[0].span, needle) > 0  # the best chunk holds part of the needle sentence


def test_each_hit_scores_every_chunk_of_its_node(open_store, needle_document, minilm_encoder) -> None:
    text, _ = needle_document
    store = open_store(encoder=minilm_encoder)
    store.upsert_documents([("doc", text, None), ("other", OTHER, None)])
    long_query = NEEDLE_QUERY + " " + " ".join(["Also, the rotation schedule."] * 12)
    for query in (NEEDLE_QUERY, long_query):
        (hit,) = store.search(query, k=1, alpha=1.0)
        (node,) = store.get_nodes(node_ids=[hit.node_id])
        vectors = minilm_encoder.encode_queries(query).chunk_vectors
        vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        expected = (vectors @ node.chunk_vectors.T).mean(axis=0)  # each chunk's MaxSim with the query, over q
        assert [(c.start, c.end) for c in hit.chunk_scores] == list(node.chunk_spans)  # document order
        assert [c.score for c in hit.chunk_scores] == pytest.approx(expected.tolist(), abs=1e-4)
        if len(vectors) == 1:  # one query vector: the best chunk is the evidence, its score the whole MaxSim
            best = max(hit.chunk_scores, key=lambda chunk: chunk.score)
            assert (best.span, best.score) == (hit.evidence[0].span, hit.evidence[0].score)
    assert ChunkScore(3, 9, 0.25).as_dict() == {"start": 3, "end": 9, "score": 0.25}


def test_a_bm25_only_search_says_its_hits_have_no_rerank_evidence(open_store, needle_document,
                                                                    minilm_encoder) -> None:
    text, _ = needle_document
    store = open_store(encoder=minilm_encoder)
    store.upsert_documents([("doc", text, None), ("other", OTHER, None)])
    (hit,) = store.search("Zanzibar keyrotate", k=1, alpha=0.0)
    assert hit.evidence == (Evidence(hit.span[0], hit.span[1], None, "bm25"),) and hit.chunk_scores == ()


def test_nodes_without_chunk_spans_give_the_whole_node(open_store, minilm_encoder) -> None:
    store = open_store(encoder=minilm_encoder)
    vector = minilm_encoder.encode_documents(OTHER)
    record = NodeRecord("n1", "gz", OTHER, (10, 10 + len(OTHER)), vector.vector, vector.chunk_vectors)
    store.upsert_encoded_document("gz", [record])
    (hit,) = store.search("compress files", k=1)
    ((evidence),) = hit.evidence
    assert (evidence.span, evidence.kind) == ((10, 10 + len(OTHER)), "node") and evidence.score is not None
    # the store encodes it: spans known
    store.upsert_encoded_document("gz", [dataclasses.replace(record, chunk_vectors=None)])
    (hit,) = store.search("compress files", k=1)
    assert hit.evidence[0].kind == "chunk" and hit.span[0] <= hit.evidence[0].start < hit.evidence[0].end <= hit.span[1]


def test_chunk_spans_that_do_not_fit_their_node_are_refused(open_store, minilm_encoder) -> None:
    store = open_store(encoder=minilm_encoder)
    vector = minilm_encoder.encode_documents(OTHER)
    record = NodeRecord("n1", "gz", OTHER, (0, len(OTHER)), vector.vector, vector.chunk_vectors)
    for spans in [((0, len(OTHER) + 5),), ((0, 5), (5, 9)) * len(vector.chunk_vectors), ((5, 2),)]:
        with pytest.raises(InvalidInputError, match="chunk_spans"):
            store.upsert_encoded_document("gz", [dataclasses.replace(record, chunk_spans=spans)])


def test_a_static_store_gives_the_token_that_matched(open_store, needle_document) -> None:
    text, (start, end) = needle_document
    store = open_store(encoder=StaticDocumentEncoder())
    store.upsert_documents([("doc", text, None), ("other", OTHER, None)])
    (hit,) = store.search("Zanzibar", k=1, alpha=1.0)
    best = hit.evidence[0]
    assert best.kind == "token" and start <= best.start < best.end <= end and hit.chunk_scores == ()
    assert text[best.start : best.end].lower() in "zanzibar"  # a word piece of it


def test_a_diverse_search_has_no_evidence(open_store, needle_document, minilm_encoder) -> None:
    text, _ = needle_document
    store = open_store(encoder=minilm_encoder)
    store.upsert_documents([("doc", text, None), ("other", OTHER, None)])
    assert all(hit.evidence == () == hit.chunk_scores for hit in store.search_mmr(NEEDLE_QUERY, k=2))


def test_evidence_is_read_with_the_hits_and_shown_as_json_values() -> None:
    evidence = Evidence(3, 9, 0.5, "chunk")
    assert evidence.as_dict() == {"start": 3, "end": 9, "score": 0.5, "kind": "chunk"} and evidence.span == (3, 9)
    assert np.isfinite(evidence.score)


def test_a_store_other_processes_write_reads_the_hits_vectors_after_ranking(needle_document, sentence_encoder) -> None:
    from lmk_rag.store import LandmarkStore

    text, (start, end) = needle_document
    with LandmarkStore(location=":memory:", encoder=sentence_encoder) as store:  # not its only writer: payloads
        assert not store.backend.single_writer  # come with the ranking, the hits' vectors in one more call
        store.upsert_documents([("doc", text, None), ("other", OTHER, None)])
        (hit,) = store.search(NEEDLE_QUERY, k=1)
    assert hit.evidence[0] == Evidence(start, end + 1, hit.evidence[0].score, "chunk")
