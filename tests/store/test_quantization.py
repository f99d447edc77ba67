"""A store with quantized multivectors ranks as the float32 store does: Qdrant rescores the MaxSim rerank's
candidates with the original vectors (its quantization ``rescore``, on by default; with ``rescore=False`` a binary
multivector scores in Hamming units, 86.0 for one node here), so quantization never moves a hit."""

from __future__ import annotations

import pytest

from lmk_rag.store import StorageOptions

QUERIES = ["copy files between hosts", "print the lines that match a pattern", "show disk usage of a folder"]


@pytest.mark.parametrize("quantization", ["int8", "binary"])
def test_quantized_multivectors_give_the_float32_hits_and_scores(open_store, doc_records, minilm_encoder,
                                                                 quantization: str) -> None:
    exact = open_store("float32")
    quantized = open_store(f"q-{quantization}", storage=StorageOptions(quantization=quantization))
    assert quantized.settings["quantization"] == quantization
    for store in (exact, quantized):
        for doc_id, records in doc_records.items():
            store.upsert_encoded_document(doc_id, records)
    for query in minilm_encoder.encode_queries(QUERIES):
        for alpha in (1.0, 0.7):  # the rerank alone, and fused with BM25
            want = exact.search_encoded(query, k=10, one_per_document=False, alpha=alpha)
            got = quantized.search_encoded(query, k=10, one_per_document=False, alpha=alpha)
            assert [h.node_id for h in got] == [h.node_id for h in want]
            assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=2e-6)
