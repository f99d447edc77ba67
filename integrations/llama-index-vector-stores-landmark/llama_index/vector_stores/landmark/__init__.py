"""LlamaIndex vector store over lmk_rag's LandmarkStore, and a context-size cap for its results."""

from llama_index.vector_stores.landmark.base import LandmarkVectorStore
from llama_index.vector_stores.landmark.filters import to_store_filter
from llama_index.vector_stores.landmark.postprocessor import MaxContextTokens

__all__ = ["LandmarkVectorStore", "MaxContextTokens", "to_store_filter"]
