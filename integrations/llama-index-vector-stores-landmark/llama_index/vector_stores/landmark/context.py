"""EvidenceContext: each retrieved node cut down to the passage that matched and the text around it, under a token
budget per node; and the cut itself, which :class:`~llama_index.vector_stores.landmark.MaxContextTokens` also uses.

A node from :class:`~llama_index.vector_stores.landmark.LandmarkVectorStore` carries its evidence
(:data:`~llama_index.vector_stores.landmark.evidence.EVIDENCE_KEY`): the chunks that carried its rerank score, with
their share of it. The cut keeps the best chunk, then widens word by word, alternately after and before it, while the
node (as the LLM sees it, counted with the given tokenizer) stays within the budget. The evidence is *weak* when the
cut cannot hold chunks carrying :data:`MIN_SHARE` of the node's rerank score (a query whose vectors matched several
far-apart chunks), or when there is no passage to cut to (a BM25-only hit, a node whose chunk spans are unknown): the
node then stays whole. A budget that holds not one word of the passage raises :class:`NoRoomError`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, QueryBundle, TextNode
from llama_index.core.utils import get_tokenizer

from llama_index.vector_stores.landmark.evidence import node_evidence
from lmk_rag.errors import InvalidInputError

MIN_SHARE = 0.5
"""The share of a node's rerank score its best piece of evidence must carry; below it the evidence is weak and the
node stays whole (a query of one vector has one piece of evidence carrying all of it)."""
_WORD = re.compile(r"\S+")


class NoRoomError(InvalidInputError):
    """Not one word of a node's evidence fits in the tokens left for it (its metadata may take them all)."""


def cut_to_evidence(node: BaseNode, budget: int, count: Callable[[BaseNode], int],
                    min_share: float = MIN_SHARE) -> TextNode | None:
    """A copy of ``node`` cut to its best evidence and the words around it, as much as ``budget`` tokens hold (the
    passage itself cut at its end when it alone does not fit).

    :param node: a retrieved node with evidence (:func:`~llama_index.vector_stores.landmark.evidence.node_evidence`)
        and its ``start_char_idx``.
    :param budget: the most tokens the cut node may count.
    :param count: the tokens a node counts (as the LLM sees it).
    :param min_share: see :data:`MIN_SHARE`.
    :return: the cut node (``text``, ``start_char_idx`` and ``end_char_idx`` of the kept passage; the rest of the
        node as it was), or None where the evidence is weak: keep the node whole.
    :raises NoRoomError: when not one word of the passage fits in ``budget``.
    """
    evidence = [piece for piece in node_evidence(node) if piece.kind in ("chunk", "token") and piece.score is not None]
    start = getattr(node, "start_char_idx", None)
    if not evidence or start is None or not isinstance(node, TextNode):
        return None
    best, total = evidence[0], sum(piece.score for piece in evidence)
    if total > 0 and best.score < min_share * total:  # weak: the query matched several chunks, none of them most
        return None
    text = node.text
    low, high = max(best.start - start, 0), min(best.end - start, len(text))
    clone = node.model_copy()

    def fits(span: tuple[int, int]) -> bool:
        clone.text = text[span[0] : span[1]]
        return count(clone) <= budget

    steps = _steps(text, low, high)
    if not fits(steps[0]):  # the passage alone is too long: its longest run of whole words from its start
        steps = [(low, end) for end in (match.end() for match in _WORD.finditer(text, low, high))]
        if not steps or not fits(steps[0]):
            raise NoRoomError(
                f"node {node.node_id!r}: not one word of its evidence fits in {budget} tokens ({count(clone)} with "
                "no text: its metadata as the LLM sees it); give it more tokens, or render less metadata"
            )
    kept = steps[_longest(steps, fits)]
    fits(kept)
    clone.start_char_idx, clone.end_char_idx = start + kept[0], start + kept[1]
    return clone


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


def _steps(text: str, low: int, high: int) -> list[tuple[int, int]]:
    """The spans a cut tries, from the passage ``[low, high)`` to the whole text: each adds the next word after it,
    then the one before it, in turn (one side alone once the other has none left)."""
    after = [match.end() for match in _WORD.finditer(text, high)]
    before = [match.start() for match in _WORD.finditer(text, 0, low)][::-1]
    steps, start, end = [(low, high)], low, high
    for index in range(max(len(after), len(before))):
        if index < len(after):
            end = after[index]
            steps.append((start, end))
        if index < len(before):
            start = before[index]
            steps.append((start, end))
    if steps[-1] != (0, len(text)):
        steps.append((0, len(text)))
    return steps


class EvidenceContext(BaseNodePostprocessor):
    """Cut each retrieved node down to its evidence and the text around it, under ``tokens_per_node`` tokens each
    (counted on the node as the LLM sees it, with the LLM's tokenizer); a node whose evidence is weak stays whole
    (see :mod:`~llama_index.vector_stores.landmark.context`). The nodes keep their order and scores; a cut node's
    ``text``, ``start_char_idx`` and ``end_char_idx`` are the kept passage's.

    Example::

        engine = index.as_query_engine(similarity_top_k=3,
                                       node_postprocessors=[EvidenceContext(tokens_per_node=256)])
    """

    tokens_per_node: int = Field(gt=0, description="The most tokens one cut node may count.")
    min_share: float = Field(default=MIN_SHARE, ge=0.0, le=1.0,
                             description="The share of a node's rerank score its best evidence must carry.")
    metadata_mode: MetadataMode = Field(default=MetadataMode.LLM, description="How node content is rendered.")

    _tokenizer: Callable[[str], list] = PrivateAttr()

    def __init__(self, tokens_per_node: int, tokenizer: Callable[[str], list] | None = None,
                 **kwargs: object) -> None:
        """Set the budget.

        :param tokens_per_node: the most tokens one cut node may count.
        :param tokenizer: a function text -> tokens, the LLM's; default: ``llama_index.core.utils.get_tokenizer()``
            (``Settings.tokenizer`` when set, else tiktoken ``cl100k_base``).
        :param kwargs: other fields (``min_share``, ``metadata_mode``).
        """
        super().__init__(tokens_per_node=tokens_per_node, **kwargs)
        self._tokenizer = tokenizer or get_tokenizer()

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
        out = []
        for scored in nodes:
            cut = cut_to_evidence(scored.node, self.tokens_per_node, self.count_tokens, self.min_share)
            out.append(scored if cut is None else NodeWithScore(node=cut, score=scored.score))
        return out
