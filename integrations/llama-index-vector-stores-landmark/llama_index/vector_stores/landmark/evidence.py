"""A retrieved node's evidence (:class:`lmk_rag.store.Evidence`) and its chunks' scores
(:class:`lmk_rag.store.ChunkScore`) in its LlamaIndex metadata, hidden from the LLM and the embedding text."""

from __future__ import annotations

from collections.abc import Sequence

from llama_index.core.schema import BaseNode

from lmk_rag.store import ChunkScore, Evidence

EVIDENCE_KEY = "lmk_evidence"
"""The node metadata key of a retrieved node's evidence: a list of ``{"start", "end", "score", "kind"}`` (chars in
the document, as ``start_char_idx``; :meth:`lmk_rag.store.Evidence.as_dict`), best first. Listed in the node's
``excluded_llm_metadata_keys`` and ``excluded_embed_metadata_keys``: neither the LLM nor an embedding sees it."""
CHUNK_SCORES_KEY = "lmk_chunk_scores"
"""The node metadata key of a retrieved node's chunk scores (:attr:`lmk_rag.store.Hit.chunk_scores`): a list of
``{"start", "end", "score"}`` in document order (:meth:`lmk_rag.store.ChunkScore.as_dict`), excluded from the LLM and
embedding text as :data:`EVIDENCE_KEY` is; absent where the hit has none."""


def add_evidence(node: BaseNode, evidence: Sequence[Evidence], chunk_scores: Sequence[ChunkScore] = ()) -> BaseNode:
    """Put a hit's evidence and chunk scores on its node (in place) under :data:`EVIDENCE_KEY` and
    :data:`CHUNK_SCORES_KEY`, excluded from the LLM and embedding text; a hit without evidence (a diverse search's)
    leaves the node as it is.

    :return: the node.
    """
    if not evidence:
        return node
    node.metadata[EVIDENCE_KEY] = [piece.as_dict() for piece in evidence]
    keys = [EVIDENCE_KEY]
    if chunk_scores:
        node.metadata[CHUNK_SCORES_KEY] = [chunk.as_dict() for chunk in chunk_scores]
        keys.append(CHUNK_SCORES_KEY)
    for excluded in (node.excluded_llm_metadata_keys, node.excluded_embed_metadata_keys):
        excluded.extend(key for key in keys if key not in excluded)
    return node


def node_evidence(node: BaseNode) -> list[Evidence]:
    """The evidence on a retrieved node (:func:`add_evidence`), best first; none for a node without any."""
    return [Evidence(int(piece["start"]), int(piece["end"]), piece["score"], piece["kind"])
            for piece in node.metadata.get(EVIDENCE_KEY) or []]


def node_chunk_scores(node: BaseNode) -> list[ChunkScore]:
    """The chunk scores on a retrieved node (:func:`add_evidence`), in document order; none for a node without
    any."""
    return [ChunkScore(int(chunk["start"]), int(chunk["end"]), float(chunk["score"]))
            for chunk in node.metadata.get(CHUNK_SCORES_KEY) or []]
