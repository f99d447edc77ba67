"""LlamaIndex embedding model backed by lmk_rag's landmark (LMK) pooling encoder."""

from llama_index.embeddings.landmark.base import LandmarkEmbedding, pipeline_shows_progress

__all__ = ["LandmarkEmbedding", "pipeline_shows_progress"]
