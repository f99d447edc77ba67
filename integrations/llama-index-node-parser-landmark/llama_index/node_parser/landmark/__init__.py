"""LlamaIndex node parser that cuts documents on lmk_rag's landmark chunks and embeds them in one pass."""

from llama_index.node_parser.landmark.base import CHUNK_VECTORS_KEY, LandmarkNodeParser, decode_chunk_vectors

__all__ = ["CHUNK_VECTORS_KEY", "LandmarkNodeParser", "decode_chunk_vectors"]
