"""Evidence through LlamaIndex: on ``NodeWithScore.node.metadata`` (hidden from the LLM and embeddings), and the
context postprocessors that cut a node down to it (EvidenceContext, MaxContextTokens). Real MiniLM, a real Edge
store, LlamaIndex's own retriever; budgets counted with real tokenizers (tiktoken's, MiniLM's)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, TextNode
from llama_index.core.utils import get_tokenizer
from llama_index.core.vector_stores import SimpleVectorStore
from llama_index.core.vector_stores.types import VectorStoreQueryMode
from transformers import AutoTokenizer

from llama_index.embeddings.landmark import LandmarkEmbedding
from llama_index.node_parser.landmark import LandmarkNodeParser
from llama_index.vector_stores.landmark import (
    CHUNK_SCORES_KEY,
    EVIDENCE_KEY,
    EvidenceContext,
    LandmarkVectorStore,
    MaxContextTokens,
    NoRoomError,
    node_chunk_scores,
    node_evidence,
)
from llama_index.vector_stores.landmark.context import adjacent_text
from lmk_rag.errors import InvalidInputError
from lmk_rag.store import Evidence
from tests.conftest import _FILLER, NEEDLE_QUERY, NEEDLE_SENTENCE

OTHER = "gzip reduces the size of the named files using Lempel-Ziv coding (LZ77)."


@pytest.fixture(scope="module")
def sentence_embedding() -> LandmarkEmbedding:
    """Real MiniLM with one landmark chunk per sentence."""
    return LandmarkEmbedding(granularity="sentence")


@pytest.fixture
def retrieved(tmp_path: Path, sentence_embedding, needle_document) -> list[NodeWithScore]:
    """The needle document and another one, parsed into 256-token nodes, stored, and retrieved for the question."""
    text, _ = needle_document
    documents = [Document(text=text, id_="doc", metadata={"page": "p1"}), Document(text=OTHER, id_="gz")]
    nodes = LandmarkNodeParser(embed_model=sentence_embedding, node_tokens=256).get_nodes_from_documents(documents)
    with LandmarkVectorStore(path=tmp_path / "store", embed_model=sentence_embedding) as vector_store:
        vector_store.add(nodes)
        index = VectorStoreIndex.from_vector_store(vector_store, embed_model=sentence_embedding)
        return index.as_retriever(similarity_top_k=2).retrieve(NEEDLE_QUERY)


def _count_with(tokenizer: Callable[[str], list]) -> Callable[[BaseNode], int]:
    return lambda node: len(tokenizer(node.get_content(metadata_mode=MetadataMode.LLM)))


def test_a_retrieved_node_carries_its_evidence_hidden_from_llm_and_embeddings(retrieved, needle_document) -> None:
    _, (start, end) = needle_document
    best = retrieved[0].node
    assert best.ref_doc_id == "doc"
    assert node_evidence(best)[0] == Evidence(start, end + 1, node_evidence(best)[0].score, "chunk")
    assert best.metadata[EVIDENCE_KEY][0] == {"start": start, "end": end + 1, "score": node_evidence(best)[0].score,
                                              "kind": "chunk"}
    for key in (EVIDENCE_KEY, CHUNK_SCORES_KEY):
        assert key in best.excluded_llm_metadata_keys and key in best.excluded_embed_metadata_keys
    for mode in (MetadataMode.LLM, MetadataMode.EMBED):
        content = best.get_content(metadata_mode=mode)
        assert EVIDENCE_KEY not in content and CHUNK_SCORES_KEY not in content and "page: p1" in content
    scores = node_chunk_scores(best)  # every chunk (sentence) of the node, in document order; the best is the needle
    assert [chunk.start for chunk in scores] == sorted(chunk.start for chunk in scores) and len(scores) > 1
    assert max(scores, key=lambda chunk: chunk.score).span == node_evidence(best)[0].span
    passage = best.text[start - best.start_char_idx : end + 1 - best.start_char_idx]
    assert passage.strip() == NEEDLE_SENTENCE


@pytest.mark.parametrize("tokenizer", ["tiktoken", "minilm"])
@pytest.mark.parametrize("budget", [24, 64, 128])
def test_evidence_context_keeps_the_budget_exactly(retrieved, needle_document, minilm_path, tokenizer,
                                                   budget) -> None:
    count_text = get_tokenizer() if tokenizer == "tiktoken" else AutoTokenizer.from_pretrained(
        minilm_path).tokenize
    count = _count_with(count_text)
    _, (start, end) = needle_document
    cut = EvidenceContext(tokens_per_node=budget, tokenizer=count_text).postprocess_nodes(retrieved)
    assert [n.node.node_id for n in cut] == [n.node.node_id for n in retrieved]
    assert [n.score for n in cut] == [n.score for n in retrieved]
    node, whole = cut[0].node, retrieved[0].node
    assert count(node) <= budget < count(whole)
    offset = node.start_char_idx - whole.start_char_idx
    assert whole.text[offset : offset + len(node.text)] == node.text  # a passage of the node, where it says
    assert node.end_char_idx - node.start_char_idx == len(node.text)
    before, after = whole.text[:offset].rsplit(maxsplit=1), whole.text[offset + len(node.text):].split(maxsplit=1)
    wider = TextNode(text=f"{before[-1]} {node.text} {after[0]}", metadata=node.metadata,
                     excluded_llm_metadata_keys=node.excluded_llm_metadata_keys)
    assert count(wider) > budget  # a word more on each side would overflow: the budget is used
    if budget >= 64:
        assert node.start_char_idx <= start and end <= node.end_char_idx  # the whole needle sentence is in


def test_weak_evidence_keeps_the_node_whole(retrieved) -> None:
    bm25 = Evidence(retrieved[0].node.start_char_idx, retrieved[0].node.end_char_idx, None, "bm25")
    node = retrieved[0].node.model_copy(update={"metadata": {**retrieved[0].node.metadata,
                                                             EVIDENCE_KEY: [bm25.as_dict()]}})
    thirds = [{**e.as_dict(), "score": 0.3} for e in node_evidence(retrieved[0].node) * 3]
    diffuse = retrieved[0].node.model_copy(update={"metadata": {**retrieved[0].node.metadata, EVIDENCE_KEY: thirds}})
    context = EvidenceContext(tokens_per_node=32)
    for weak in (node, diffuse):  # BM25 alone; the best piece carries a third of the score
        assert context.postprocess_nodes([NodeWithScore(node=weak, score=1.0)])[0].node is weak
    plain = NodeWithScore(node=TextNode(text="no evidence here " * 40), score=1.0)
    assert context.postprocess_nodes([plain]) == [plain]


#: Two more sentences of the answer, after the needle sentence: an answer of three chunks (one per sentence).
FOLLOW_UP = ("Keyrotate then re-encrypts the Zanzibar archives with the new encryption keys.",
             "Rotating the Zanzibar keys more often than every ninety days gains nothing.")


def test_evidence_context_grows_toward_the_chunks_the_query_scores_higher(tmp_path: Path, sentence_embedding) -> None:
    answer = " ".join((NEEDLE_SENTENCE, *FOLLOW_UP))
    text = f"{' '.join(_FILLER[:5])} {answer} {' '.join(_FILLER[5:10])}"
    with LandmarkVectorStore(path=tmp_path / "store", embed_model=sentence_embedding) as vector_store:
        vector_store.add(LandmarkNodeParser(embed_model=sentence_embedding).get_nodes_from_documents(
            [Document(text=text, id_="doc")]))
        index = VectorStoreIndex.from_vector_store(vector_store, embed_model=sentence_embedding)
        (hit,) = index.as_retriever(similarity_top_k=1).retrieve(NEEDLE_QUERY)
    assert hit.node.text == text and node_evidence(hit.node)[0].span in {c.span for c in node_chunk_scores(hit.node)}
    budget = len(get_tokenizer()(answer)) + 2  # the three answer sentences (and a space the best chunk may end with)
    (cut,) = EvidenceContext(tokens_per_node=budget).postprocess_nodes([hit])
    assert all(sentence in cut.node.text for sentence in (NEEDLE_SENTENCE, *FOLLOW_UP))  # grown by whole chunks
    assert cut.node.text == text[cut.node.start_char_idx : cut.node.end_char_idx]  # toward the answer's other chunks
    metadata = {key: value for key, value in hit.node.metadata.items() if key != CHUNK_SCORES_KEY}
    unscored = NodeWithScore(node=hit.node.model_copy(update={"metadata": metadata}), score=hit.score)
    (evenly,) = EvidenceContext(tokens_per_node=budget).postprocess_nodes([unscored])  # without chunk scores: a word
    assert not all(sentence in evenly.node.text for sentence in (NEEDLE_SENTENCE, *FOLLOW_UP))  # after, one before


def test_a_bm25_only_query_says_so_through_llama_index(tmp_path: Path, sentence_embedding, needle_document) -> None:
    text, _ = needle_document
    with LandmarkVectorStore(path=tmp_path / "store", embed_model=sentence_embedding) as vector_store:
        nodes = LandmarkNodeParser(embed_model=sentence_embedding).get_nodes_from_documents([Document(text=text)])
        vector_store.add(nodes)
        index = VectorStoreIndex.from_vector_store(vector_store, embed_model=sentence_embedding)
        (hit,) = index.as_retriever(similarity_top_k=1, vector_store_query_mode=VectorStoreQueryMode.SPARSE,
                                    sparse_top_k=1).retrieve("Zanzibar keyrotate")
    assert [e.kind for e in node_evidence(hit.node)] == ["bm25"] and node_evidence(hit.node)[0].score is None


def test_a_budget_below_the_metadata_is_an_error(retrieved) -> None:
    with pytest.raises(NoRoomError, match="not one word of its evidence fits in 3 tokens"):
        EvidenceContext(tokens_per_node=3).postprocess_nodes(retrieved)


def test_max_context_tokens_keeps_the_evidence_when_it_must_cut(retrieved, needle_document) -> None:
    _, (start, end) = needle_document
    budget = MaxContextTokens(max_context_tokens=80)
    assert budget.count_tokens(retrieved[0]) > 80
    (kept,) = budget.postprocess_nodes(retrieved)  # the rest is cut to what is left: nothing
    assert budget.count_tokens(kept) <= 80 and kept.node.start_char_idx <= start and end <= kept.node.end_char_idx


@pytest.fixture(scope="module")
def straddling(tmp_path_factory: pytest.TempPathFactory, minilm_path) -> tuple[str, tuple[int, int], Path]:
    """A document whose one answer sentence straddles the boundary between its first two 256-token nodes (64-token
    chunks: half of its tokens in each), parsed, stored in an Edge store; the text, the sentence's span, the store."""
    tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    words, taken, used = " ".join(_FILLER * 3).split(), 0, 0
    while used + len(tokenizer.tokenize(words[taken])) <= 256 - len(tokenizer.tokenize(NEEDLE_SENTENCE)) // 2:
        used, taken = used + len(tokenizer.tokenize(words[taken])), taken + 1
    before = " ".join(words[:taken])
    text = f"{before} {NEEDLE_SENTENCE} {' '.join(words[taken:])}"
    embedding, path = LandmarkEmbedding(), tmp_path_factory.mktemp("straddling") / "store"
    with LandmarkVectorStore(path=path, embed_model=embedding) as vector_store:
        vector_store.add(LandmarkNodeParser(embed_model=embedding).get_nodes_from_documents(
            [Document(text=text, id_="doc")]))
    return text, (len(before) + 1, len(before) + 1 + len(NEEDLE_SENTENCE)), path


def test_evidence_context_widens_into_the_adjacent_node(straddling) -> None:
    text, (start, end) = straddling[:2]
    embedding = LandmarkEmbedding()
    with LandmarkVectorStore(path=straddling[2], embed_model=embedding) as vector_store:
        index = VectorStoreIndex.from_vector_store(vector_store, embed_model=embedding)
        (hit,) = index.as_retriever(similarity_top_k=1).retrieve(NEEDLE_QUERY)
        whole = hit.node
        assert whole.start_char_idx < start < whole.end_char_idx < end or start < whole.start_char_idx < end
        count = _count_with(get_tokenizer())
        (inside,) = EvidenceContext(tokens_per_node=128).postprocess_nodes([hit])
        (wide,) = EvidenceContext(tokens_per_node=128, vector_store=vector_store).postprocess_nodes([hit])
        (scored,) = EvidenceContext(tokens_per_node=128, vector_store=vector_store).postprocess_nodes(
            [hit], query_str=NEEDLE_QUERY)  # the adjacent node's chunks scored with the query
        queries = vector_store.store.encoder.encode_queries(NEEDLE_QUERY).chunk_vectors
        queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
        adjacent = adjacent_text(whole, vector_store, lambda: queries)
        others = [record for record in vector_store.store.get_nodes() if record.node_id != whole.node_id
                  and record.span[1] >= whole.start_char_idx and record.span[0] <= whole.end_char_idx]
    assert not (inside.node.start_char_idx <= start and end <= inside.node.end_char_idx)  # part of the sentence
    assert whole.start_char_idx <= inside.node.start_char_idx and inside.node.end_char_idx <= whole.end_char_idx
    node = wide.node
    assert node.start_char_idx <= start and end <= node.end_char_idx  # the whole sentence
    assert node.text == text[node.start_char_idx : node.end_char_idx]  # one span of the document, where it says
    assert (node.start_char_idx < whole.start_char_idx) != (node.end_char_idx > whole.end_char_idx)
    assert count(node) <= 128 < count(node.model_copy(update={  # a word more on each side would overflow
        "text": text[: node.start_char_idx].rsplit(maxsplit=1)[-1] + " " + node.text + " "
        + text[node.end_char_idx :].split(maxsplit=1)[0]}))
    assert wide.score == hit.score and node.node_id == whole.node_id
    assert scored.node.start_char_idx <= start and end <= scored.node.end_char_idx  # the whole sentence
    assert scored.node.text == text[scored.node.start_char_idx : scored.node.end_char_idx]
    assert adjacent.text == text[adjacent.start : adjacent.start + len(adjacent.text)] and adjacent.chunks
    by_span = {span: score for other in others  # the adjacent nodes' chunks, scored as the store scores its hits'
               for span, score in zip(other.chunk_spans, (queries @ other.chunk_vectors.T).mean(axis=0))}
    assert all(chunk.score == pytest.approx(by_span[chunk.span], abs=1e-5) for chunk in adjacent.chunks)


def test_evidence_context_refuses_a_store_that_is_not_landmarks() -> None:
    with pytest.raises(InvalidInputError, match="vector_store must be the LandmarkVectorStore"):
        EvidenceContext(tokens_per_node=128, vector_store=SimpleVectorStore())


@pytest.mark.parametrize(("make", "typo", "close"), [
    (lambda **kw: EvidenceContext(**{"tokens_per_node": 64, **kw}), "metadata_mod", "metadata_mode"),
    (lambda **kw: MaxContextTokens(**{"max_context_tokens": 64, **kw}), "metadata_mod", "metadata_mode"),
])
def test_the_context_postprocessors_refuse_mistyped_keywords_and_bad_values(make, typo, close) -> None:
    with pytest.raises(TypeError, match=f"'{typo}' \\(did you mean '{close}'\\?\\)"):
        make(**{typo: "llm"})  # silently ignored before: a misspelled option must not fall back to the default
    with pytest.raises(InvalidInputError, match=r"(tokens_per_node|max_context_tokens)=0: Input should be greater"):
        make(**{"max_context_tokens" if "max_context_tokens" in make().model_fields else "tokens_per_node": 0})
    with pytest.raises(TypeError, match="'min_share'"):  # no option: its effect measured null (docs/decisions.md)
        EvidenceContext(tokens_per_node=64, min_share=0.5)
    assert type(make()).from_dict(make().to_dict()).to_dict() == make().to_dict()  # serialisation still round-trips
