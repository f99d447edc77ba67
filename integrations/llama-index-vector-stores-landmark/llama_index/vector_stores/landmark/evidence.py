"""A retrieved node's evidence (:class:`lmk_rag.store.Evidence`) in its LlamaIndex metadata, hidden from the LLM and
the embedding text."""

from __future__ import annotations

from collections.abc import Sequence

from llama_index.core.schema import BaseNode

from lmk_rag.store import Evidence

EVIDENCE_KEY = "lmk_evidence"
"""The node metadata key of a retrieved node's evidence: a list of ``{"start", "end", "score", "kind"}`` (chars in
the document, as ``start_char_idx``; :meth:`lmk_rag.store.Evidence.as_dict`), best first. Listed in the node's
``excluded_llm_metadata_keys`` and ``excluded_embed_metadata_keys``: neither the LLM nor an embedding sees it."""


def add_evidence(node: BaseNode, evidence: Sequence[Evidence]) -> BaseNode:
    """Put a hit's evidence on its node (in place) under :data:`EVIDENCE_KEY`, excluded from the LLM and embedding
    text; a hit without evidence (a diverse search's) leaves the node as it is.

    :return: the node.
    """
    if not evidence:
        return node
    node.metadata[EVIDENCE_KEY] = [piece.as_dict() for piece in evidence]
    for excluded in (node.excluded_llm_metadata_keys, node.excluded_embed_metadata_keys):
        if EVIDENCE_KEY not in excluded:
            excluded.append(EVIDENCE_KEY)
    return node


def node_evidence(node: BaseNode) -> list[Evidence]:
    """The evidence on a retrieved node (:func:`add_evidence`), best first; none for a node without any."""
    return [Evidence(int(piece["start"]), int(piece["end"]), piece["score"], piece["kind"])
            for piece in node.metadata.get(EVIDENCE_KEY) or []]
