"""LlamaIndex node parser that cuts documents on lmk_rag's landmark chunks and embeds them in one pass."""

from llama_index.node_parser.landmark.base import (
    ENCODER_KEY,
    LandmarkNode,
    LandmarkNodeParser,
    landmark_node_id,
    without_encoder_key,
)

__all__ = ["ENCODER_KEY", "LandmarkNode", "LandmarkNodeParser", "landmark_node_id", "without_encoder_key"]
