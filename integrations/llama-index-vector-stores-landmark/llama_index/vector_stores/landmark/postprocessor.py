"""MaxContextTokens: cap the retrieved context by LLM tokens, keeping each node's evidence first when it must cut."""

from __future__ import annotations

from collections.abc import Callable

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, QueryBundle
from llama_index.core.utils import get_tokenizer

from llama_index.vector_stores.landmark.context import NoRoomError, cut_to_evidence, init_fields


class MaxContextTokens(BaseNodePostprocessor):
    """Keep the best nodes, in their order, while their text fits in ``max_context_tokens`` LLM tokens.

    A node is counted as the LLM sees it (``node.get_content(MetadataMode.LLM)``) with LlamaIndex's
    tokenizer (``get_tokenizer()``: ``Settings.tokenizer`` when set, else tiktoken ``cl100k_base``,
    which llama-index-core bundles, so counting works offline). The first node that would overflow the budget is cut
    down to its evidence and the words around it in the tokens left
    (:func:`~llama_index.vector_stores.landmark.context.cut_to_evidence`: a node from ``LandmarkVectorStore``), and
    the nodes after it get the same while tokens are left; a node without evidence, with weak evidence, or whose
    passage does not fit in what is left, ends the context there (it and every node after it are dropped).

    Example::

        engine = index.as_query_engine(node_postprocessors=[MaxContextTokens(max_context_tokens=1500)])
    """

    max_context_tokens: int = Field(gt=0, description="The most LLM tokens the kept nodes may add up to.")
    metadata_mode: MetadataMode = Field(default=MetadataMode.LLM, description="How node content is rendered.")

    _tokenizer: Callable[[str], list] = PrivateAttr()

    def __init__(
        self, max_context_tokens: int, tokenizer: Callable[[str], list] | None = None, **kwargs: object
    ) -> None:
        """Set the budget.

        :param max_context_tokens: the most LLM tokens the kept nodes may add up to.
        :param tokenizer: a function text -> tokens; default: ``llama_index.core.utils.get_tokenizer()``.
        :param kwargs: other fields (``metadata_mode``).
        :raises InvalidInputError: for a field of the wrong type or range (``max_context_tokens=0``), naming it.
        :raises TypeError: for a keyword this class does not take, naming the close ones.
        """
        init_fields(self, ("tokenizer",), max_context_tokens=max_context_tokens, **kwargs)
        self._tokenizer = tokenizer or get_tokenizer()

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises this class under."""
        return "MaxContextTokens"

    def count_tokens(self, node: NodeWithScore | BaseNode) -> int:
        """The LLM tokens a node adds to the context.

        :param node: the node.
        :return: its token count.
        """
        bare = node.node if isinstance(node, NodeWithScore) else node
        return len(self._tokenizer(bare.get_content(metadata_mode=self.metadata_mode)))

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        kept: list[NodeWithScore] = []
        used = 0
        for node in nodes:
            cost = self.count_tokens(node)
            if used + cost <= self.max_context_tokens:
                kept.append(node)
                used += cost
                continue
            try:
                cut = cut_to_evidence(node.node, self.max_context_tokens - used, self.count_tokens)
            except NoRoomError:
                cut = None
            if cut is None:
                break
            kept.append(NodeWithScore(node=cut, score=node.score))
            used += self.count_tokens(cut)
        return kept
