"""Needle in a haystack through LlamaIndex: real manpages-train pairs (the test fixture), ~20k-token documents,
real Edge shard."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.ingestion import IngestionPipeline

from llama_index.embeddings.landmark import LandmarkEmbedding
from llama_index.node_parser.landmark import LandmarkNodeParser
from llama_index.vector_stores.landmark import LandmarkVectorStore

N_DOCUMENTS = 20
HAYSTACK_TOKENS = 20_000


def _haystack_documents(pairs: list[dict], tokenizer) -> tuple[list[Document], list[str], list[tuple[int, int]]]:
    """``N_DOCUMENTS`` documents; document j is other pairs' passages, then pair j's positive at the very end.

    The passages of the pairs that are not needles (80 fixture pairs, ~15k tokens) are fewer than 20
    haystacks of 20k tokens need, so each haystack cycles through them from its own offset; no needle
    appears in any haystack.

    :return: the documents, their queries, and the char span of each needle.
    """
    needles, pool = pairs[:N_DOCUMENTS], [pair["positive"] for pair in pairs[N_DOCUMENTS:]]
    lengths = [len(ids) for ids in tokenizer(pool, add_special_tokens=False)["input_ids"]]
    documents, spans = [], []
    for index, needle in enumerate(needles):
        parts: list[str] = []
        position, tokens = index * len(pool) // N_DOCUMENTS, 0
        while tokens < HAYSTACK_TOKENS:
            parts.append(pool[position % len(pool)])
            tokens += lengths[position % len(pool)]
            position += 1
        haystack = "\n\n".join(parts) + "\n\n"
        documents.append(Document(text=haystack + needle["positive"], id_=f"haystack-{index}"))
        spans.append((len(haystack), len(haystack) + len(needle["positive"])))
    return documents, [needle["query"] for needle in needles], spans


@pytest.mark.slow
def test_needle_at_the_end_of_20k_tokens_is_in_the_top_3(
    fixture_data: Path, tmp_path: Path, embed_model: LandmarkEmbedding, minilm_encoder, forward_counter
) -> None:
    with open(fixture_data / "manpages-train" / "pairs.jsonl", encoding="utf-8") as lines:
        pairs = [json.loads(line) for line in lines]
    documents, queries, needle_spans = _haystack_documents(pairs, minilm_encoder.tokenizer)
    vector_store = LandmarkVectorStore(path=tmp_path / "store", embed_model=embed_model)
    try:
        IngestionPipeline(transformations=[LandmarkNodeParser(embed_model=embed_model)], vector_store=vector_store).run(
            documents=documents
        )
        retriever = VectorStoreIndex.from_vector_store(vector_store, embed_model=embed_model).as_retriever(
            similarity_top_k=3
        )
        forward_counter.reset()
        ranks = []
        for document, query, (start, end) in zip(documents, queries, needle_spans):
            found = retriever.retrieve(query)
            hits = [
                n.node.ref_doc_id == document.doc_id and n.node.start_char_idx < end and n.node.end_char_idx > start
                for n in found
            ]
            ranks.append(hits.index(True) + 1 if any(hits) else None)
        assert forward_counter.batches == [1] * len(queries)
    finally:
        vector_store.store.close()
    print(f"needle ranks (top 3; None = missed) for {len(queries)} queries: {ranks}")
    assert ranks[0] is not None, f"the first train query ({queries[0]!r}) missed its needle: ranks {ranks}"
    assert sum(rank is not None for rank in ranks) > len(ranks) / 2, f"most needles missed: ranks {ranks}"
