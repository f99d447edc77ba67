"""LlamaIndex vector store over lmk_rag's LandmarkStore; context postprocessors for its results: each node cut to
the passage that matched (EvidenceContext), and a cap of the whole context (MaxContextTokens)."""

from llama_index.vector_stores.landmark.base import LandmarkVectorStore
from llama_index.vector_stores.landmark.context import EvidenceContext, NoRoomError, cut_to_evidence
from llama_index.vector_stores.landmark.evidence import CHUNK_SCORES_KEY, EVIDENCE_KEY, node_chunk_scores, node_evidence
from llama_index.vector_stores.landmark.filters import to_store_filter
from llama_index.vector_stores.landmark.postprocessor import MaxContextTokens

__all__ = ["CHUNK_SCORES_KEY", "EVIDENCE_KEY", "EvidenceContext", "LandmarkVectorStore", "MaxContextTokens",
           "NoRoomError", "cut_to_evidence", "node_chunk_scores", "node_evidence", "to_store_filter"]
