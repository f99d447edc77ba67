"""EvidenceContext: each retrieved node cut down to the passage that matched and the text around it, under a token
budget per node; and the cut itself, which :class:`~llama_index.vector_stores.landmark.MaxContextTokens` also uses.

A node from :class:`~llama_index.vector_stores.landmark.LandmarkVectorStore` carries its evidence
(:data:`~llama_index.vector_stores.landmark.evidence.EVIDENCE_KEY`): the chunks that carried its rerank score, with
their share of it, and the query's score of each of its chunks
(:data:`~llama_index.vector_stores.landmark.evidence.CHUNK_SCORES_KEY`). The cut keeps the best chunk, then widens
word by word while the node (as the LLM sees it, counted with the given tokenizer) stays within the budget, each next
word taken on the side whose chunk the query scores higher (ties: after), so that the cut grows by whole chunks toward
where the match goes on; where a side's next word lies in no scored chunk, or the node has no chunk scores (a static
rerank's token evidence), it takes a word after, then one before, in turn. Where the cut reaches an edge of the node
and the store is given, it widens on into the adjacent node of the same document (a passage that straddles two nodes
is then kept whole), its text still one span of the document, and that node's chunks are scored as the store scores
its hits' (the query's vectors, encoded once by the store's encoder, against the chunk vectors it holds). The
evidence is *weak* when the best chunk carries less than :data:`MIN_SHARE` of the node's rerank score (a query whose
vectors matched several far-apart chunks), or when there is no passage to cut to (a BM25-only hit, a node whose chunk
spans are unknown): the node then stays whole. A budget that holds not one word of the passage raises
:class:`NoRoomError`.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
from llama_index.core.bridge.pydantic import Field, PrivateAttr, ValidationError
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, QueryBundle, TextNode
from llama_index.core.utils import get_tokenizer

from llama_index.vector_stores.landmark.base import LandmarkVectorStore
from llama_index.vector_stores.landmark.evidence import node_chunk_scores, node_evidence
from lmk_rag.adapters import invalid_fields
from lmk_rag.errors import InvalidInputError, refuse_unknown
from lmk_rag.store import ChunkScore

MIN_SHARE = 0.5
"""The share of a node's rerank score its best piece of evidence must carry; below it the evidence is weak and the
node stays whole (a query of one vector has one piece of evidence carrying all of it)."""
_WORD = re.compile(r"\S+")
Scorer = Callable[[int], "float | None"]
"""The query's score of the chunk at a char of the document, None where no scored chunk holds it
(:func:`chunk_scorer`)."""


class Adjacent(NamedTuple):
    """The document text around a node (:func:`adjacent_text`).

    :param start: the char of the document ``text`` starts at.
    :param text: the text from the start of the node before to the end of the node after.
    :param chunks: the adjacent nodes' chunks with the query's scores of them, in document order; empty where the
        query is not known.
    """

    start: int
    text: str
    chunks: tuple[ChunkScore, ...] = ()


Around = Callable[[BaseNode], "Adjacent | None"]
"""The document text around a node (:func:`adjacent_text`), or None where unknown."""


def init_fields(postprocessor: BaseNodePostprocessor, arguments: tuple[str, ...], **fields: object) -> None:
    """Set a postprocessor's pydantic fields, refusing what a user mistyped: a keyword that is neither a field nor
    one of ``arguments`` (``TypeError`` naming the close ones), a value of the wrong type or range
    (:class:`~lmk_rag.errors.InvalidInputError` naming the field).

    :param postprocessor: the postprocessor being built.
    :param arguments: its ``__init__``'s own arguments that are not fields (``tokenizer``, ...).
    :param fields: the fields given.
    """
    owner, known = type(postprocessor).__name__, type(postprocessor).model_fields
    refuse_unknown(f"{owner}()", {name: value for name, value in fields.items() if name not in known},
                   (*known, *arguments))
    try:
        BaseNodePostprocessor.__init__(postprocessor, **fields)
    except ValidationError as error:
        raise invalid_fields(owner, error) from None


class NoRoomError(InvalidInputError):
    """Not one word of a node's evidence fits in the tokens left for it (its metadata may take them all)."""


def cut_to_evidence(node: BaseNode, budget: int, count: Callable[[BaseNode], int],
                    around: Around | None = None) -> TextNode | None:
    """A copy of ``node`` cut to its best evidence and the words around it, as much as ``budget`` tokens hold (the
    passage itself cut at its end when it alone does not fit).

    :param node: a retrieved node with evidence (:func:`~llama_index.vector_stores.landmark.evidence.node_evidence`)
        and its ``start_char_idx``; its chunk scores
        (:func:`~llama_index.vector_stores.landmark.evidence.node_chunk_scores`), where it has them, say which side
        the cut grows toward.
    :param budget: the most tokens the cut node may count.
    :param count: the tokens a node counts (as the LLM sees it).
    :param around: where the cut reaches an edge of the node (it holds every word of the node on that side), the
        document text around the node, holding the node's span, and the query's scores of its chunks
        (:func:`adjacent_text`), which the cut may then widen into; None: the node's own text only.
    :return: the cut node (``text``, ``start_char_idx`` and ``end_char_idx`` of the kept passage of the document;
        the rest of the node as it was), or None where the evidence is weak: keep the node whole.
    :raises NoRoomError: when not one word of the passage fits in ``budget``.
    """
    evidence = [piece for piece in node_evidence(node) if piece.kind in ("chunk", "token") and piece.score is not None]
    start = getattr(node, "start_char_idx", None)
    if not evidence or start is None or not isinstance(node, TextNode):
        return None
    best, total = evidence[0], sum(piece.score for piece in evidence)
    if total > 0 and best.score < MIN_SHARE * total:  # weak: the query matched several chunks, none of them most
        return None
    clone = node.model_copy()
    low, high = max(best.start - start, 0), min(best.end - start, len(node.text))
    origin, text = start, node.text
    chunks = node_chunk_scores(node)
    kept = _cut(clone, text, (low, high), budget, count, _shifted(chunk_scorer(chunks), origin))
    at_edge = not _WORD.search(text, 0, kept[0]) or not _WORD.search(text, kept[1])
    wider = around(node) if around is not None and at_edge else None
    if wider is not None and wider.text != text:
        shift = start - wider.start
        origin, text = wider.start, wider.text
        score = chunk_scorer(sorted([*chunks, *wider.chunks], key=lambda chunk: chunk.start) if chunks else [])
        kept = _cut(clone, text, (low + shift, high + shift), budget, count, _shifted(score, origin))
    clone.text = text[kept[0] : kept[1]]
    clone.start_char_idx, clone.end_char_idx = origin + kept[0], origin + kept[1]
    return clone


def chunk_scorer(chunks: Sequence[ChunkScore]) -> Scorer | None:
    """The query's score at each char of the document from chunk scores in document order: the score of the last
    chunk starting at or before the char (the blank after a chunk belongs to it), None before the first chunk and
    after the last. None without chunks."""
    if not chunks:
        return None
    starts, scores, first, last = [c.start for c in chunks], [c.score for c in chunks], chunks[0].start, chunks[-1].end

    def score(char: int) -> float | None:
        return scores[bisect_right(starts, char) - 1] if first <= char < last else None

    return score


def _shifted(score: Scorer | None, origin: int) -> Scorer | None:
    """``score`` at chars of a text that starts at char ``origin`` of the document."""
    return None if score is None else (lambda char: score(origin + char))


def _cut(clone: TextNode, text: str, passage: tuple[int, int], budget: int, count: Callable[[BaseNode], int],
         score: Scorer | None) -> tuple[int, int]:
    """The widest span of ``text`` around ``passage`` (see :func:`_steps`, growing toward the side ``score`` ranks
    higher) whose words, as ``clone``'s text, count at most ``budget`` tokens; the passage's longest run of whole
    words from its start when it alone does not fit.

    :raises NoRoomError: when not one word of the passage fits.
    """
    low, high = passage

    def fits(span: tuple[int, int]) -> bool:
        clone.text = text[span[0] : span[1]]
        return count(clone) <= budget

    steps = _steps(text, low, high, score)
    if not fits(steps[0]):  # the passage alone is too long: its longest run of whole words from its start
        steps = [(low, end) for end in (match.end() for match in _WORD.finditer(text, low, high))]
        if not steps or not fits(steps[0]):
            clone.text = ""
            raise NoRoomError(
                f"node {clone.node_id!r}: not one word of its evidence fits in {budget} tokens ({count(clone)} with "
                "no text: its metadata as the LLM sees it); give it more tokens, or render less metadata"
            )
    return steps[_longest(steps, fits)]


def adjacent_text(node: BaseNode, vector_store: LandmarkVectorStore,
                  queries: Callable[[], np.ndarray | None] | None = None) -> Adjacent | None:
    """The document text from the start of the node before ``node`` to the end of the node after it: the stored
    nodes of its document (``ref_doc_id``) whose spans touch or overlap its own, one on each side, joined by their
    char spans (a side with no such node adds nothing); with ``queries``, their chunks scored as the store scores a
    hit's (:attr:`lmk_rag.store.Hit.chunk_scores`: the mean over the query vectors of their cosines with each chunk
    vector).

    :param queries: gives the query's unit vectors, (q, dim), or None where the query is not known; called only when
        an adjacent node with chunk vectors and spans is found.
    :return: None for a node without a document or a span.
    """
    start, end = getattr(node, "start_char_idx", None), getattr(node, "end_char_idx", None)
    if node.ref_doc_id is None or start is None or end is None or not isinstance(node, TextNode) \
            or len(node.text) != end - start:
        return None
    records = [record for record in vector_store.store.get_nodes(filter={"doc_id": node.ref_doc_id})
               if len(record.text) == record.span[1] - record.span[0]]  # a text that is its span (else unknown)
    before = [r for r in records if r.span[0] < start <= r.span[1] and r.node_id != node.node_id]
    after = [r for r in records if r.span[0] <= end < r.span[1] and r.node_id != node.node_id]
    text, first, adjacent = node.text, start, []
    if before:
        previous = min(before, key=lambda record: record.span[0])
        text, first = previous.text[: start - previous.span[0]] + text, previous.span[0]
        adjacent.append(previous)
    if after:
        following = max(after, key=lambda record: record.span[1])
        text += following.text[end - following.span[0] :]
        adjacent.append(following)
    scored = [r for r in adjacent if r.chunk_vectors is not None and r.chunk_spans is not None
              and len(r.chunk_spans) == len(r.chunk_vectors)]
    query = queries() if queries is not None and scored else None
    if query is None:
        return Adjacent(first, text)
    chunks = [ChunkScore(int(low), int(high), float(score)) for record in scored for (low, high), score in
              zip(record.chunk_spans, (query @ np.asarray(record.chunk_vectors, dtype=np.float32).T).mean(axis=0))
              if (low < start and record.span[0] < start) or (high > end and record.span[1] > end)]
    return Adjacent(first, text, tuple(sorted(chunks, key=lambda chunk: chunk.start)))


def _longest(steps: list[tuple[int, int]], fits: Callable[[tuple[int, int]], bool]) -> int:
    """The last of ``steps`` (growing spans, the first of which fits) that fits: a binary search, then back down
    until one fits (a tokenizer may count fewer tokens on a longer text)."""
    first, last = 0, len(steps) - 1
    while first < last:
        middle = (first + last + 1) // 2
        first, last = (middle, last) if fits(steps[middle]) else (first, middle - 1)
    while first > 0 and not fits(steps[first]):
        first -= 1
    return first


def _steps(text: str, low: int, high: int, score: Scorer | None) -> list[tuple[int, int]]:
    """The spans a cut tries, from the passage ``[low, high)`` to the whole text, each one word wider: the next word
    after it or the next one before it, whichever starts in the chunk ``score`` ranks higher (ties: after); where
    either is in no scored chunk (or without ``score``), after and before in turn. One side alone once the other has
    none left."""
    after = [(match.start(), match.end()) for match in _WORD.finditer(text, high)]
    before = [match.start() for match in _WORD.finditer(text, 0, low)][::-1]
    steps, start, end = [(low, high)], low, high
    taken_after = taken_before = 0
    while taken_after < len(after) or taken_before < len(before):
        if taken_before == len(before):
            go_after = True
        elif taken_after == len(after):
            go_after = False
        else:
            after_score = None if score is None else score(after[taken_after][0])
            before_score = None if score is None else score(before[taken_before])
            if after_score is None or before_score is None:  # a side not scored: in turn
                go_after = taken_after <= taken_before
            else:
                go_after = after_score >= before_score
        if go_after:
            end = after[taken_after][1]
            taken_after += 1
        else:
            start = before[taken_before]
            taken_before += 1
        steps.append((start, end))
    if steps[-1] != (0, len(text)):
        steps.append((0, len(text)))
    return steps


class EvidenceContext(BaseNodePostprocessor):
    """Cut each retrieved node down to its evidence and the text around it, under ``tokens_per_node`` tokens each
    (counted on the node as the LLM sees it, with the LLM's tokenizer), grown toward the neighbouring chunks the
    query scores higher; a node whose evidence is weak stays whole
    (see :mod:`~llama_index.vector_stores.landmark.context`). With ``vector_store``, a cut that reaches an edge of
    its node widens into the adjacent node of the same document (:func:`adjacent_text`), so that evidence at a
    node's edge keeps the words on both sides of it. The nodes keep their order and scores; a cut node's ``text``,
    ``start_char_idx`` and ``end_char_idx`` are the kept passage's.

    Example::

        engine = index.as_query_engine(similarity_top_k=3, node_postprocessors=[
            EvidenceContext(tokens_per_node=256, vector_store=vector_store)])
    """

    tokens_per_node: int = Field(gt=0, description="The most tokens one cut node may count.")
    metadata_mode: MetadataMode = Field(default=MetadataMode.LLM, description="How node content is rendered.")

    _tokenizer: Callable[[str], list] = PrivateAttr()
    _vector_store: LandmarkVectorStore | None = PrivateAttr(default=None)

    def __init__(self, tokens_per_node: int, tokenizer: Callable[[str], list] | None = None,
                 vector_store: LandmarkVectorStore | None = None, **kwargs: object) -> None:
        """Set the budget.

        :param tokens_per_node: the most tokens one cut node may count.
        :param tokenizer: a function text -> tokens, the LLM's; default: ``llama_index.core.utils.get_tokenizer()``
            (``Settings.tokenizer`` when set, else tiktoken ``cl100k_base``).
        :param vector_store: the store the nodes were retrieved from, whose adjacent nodes a cut at a node's edge
            may widen into (their chunks scored with the query of the ``query_bundle``, encoded by the store's
            encoder once, when a cut first widens); None: each cut stays inside its node.
        :param kwargs: other fields (``metadata_mode``).
        :raises InvalidInputError: for a ``vector_store`` that is not a :class:`LandmarkVectorStore`, or a field of
            the wrong type or range (``tokens_per_node=0``), naming it.
        :raises TypeError: for a keyword this class does not take, naming the close ones.
        """
        if vector_store is not None and not isinstance(vector_store, LandmarkVectorStore):
            raise InvalidInputError(f"vector_store must be the LandmarkVectorStore the nodes come from, or None, got "
                                    f"{type(vector_store).__name__}")
        init_fields(self, ("tokenizer", "vector_store"), tokens_per_node=tokens_per_node, **kwargs)
        self._tokenizer = tokenizer or get_tokenizer()
        self._vector_store = vector_store

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises this class under."""
        return "EvidenceContext"

    def count_tokens(self, node: BaseNode) -> int:
        """The tokens a node adds to the context (its content as :attr:`metadata_mode` renders it)."""
        return len(self._tokenizer(node.get_content(metadata_mode=self.metadata_mode)))

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        store = self._vector_store
        known: list[np.ndarray | None] = []  # the query's unit vectors, encoded on first use

        def queries() -> np.ndarray | None:
            if not known:
                text = None if query_bundle is None else query_bundle.query_str
                vectors = None if not text or store is None else np.atleast_2d(
                    np.asarray(store.store.encoder.encode_queries(text).chunk_vectors, dtype=np.float32))
                known.append(None if vectors is None else vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
            return known[0]

        around = None if store is None else (lambda node: adjacent_text(node, store, queries))
        out = []
        for scored in nodes:
            cut = cut_to_evidence(scored.node, self.tokens_per_node, self.count_tokens, around)
            out.append(scored if cut is None else NodeWithScore(node=cut, score=scored.score))
        return out
