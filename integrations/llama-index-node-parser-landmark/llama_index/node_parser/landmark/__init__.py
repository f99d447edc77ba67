"""LlamaIndex node parser that cuts documents on lmk_rag's landmark chunks and embeds them in one pass."""

from llama_index.node_parser.landmark.base import (
    CHUNK_VECTORS_KEY,
    ENCODER_KEY,
    SIDE_CHANNEL_KEYS,
    LandmarkNodeParser,
    cached_chunk_vectors,
    decode_chunk_vectors,
    landmark_node_id,
    without_side_channel,
)

__all__ = [
    "CHUNK_VECTORS_KEY",
    "ENCODER_KEY",
    "SIDE_CHANNEL_KEYS",
    "LandmarkNodeParser",
    "cached_chunk_vectors",
    "decode_chunk_vectors",
    "landmark_node_id",
    "without_side_channel",
]
