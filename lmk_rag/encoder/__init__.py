"""The landmark encoder (needs the ``encoder`` extra: torch and transformers)."""

from lmk_rag.encoder.encoder import DEFAULT_CONTEXT, DEFAULT_GRANULARITY, LMK_CONFIG_FILE, LandmarkEncoder
from lmk_rag.encoder.planning import VARIABLE_GRANULARITIES, LandmarkPlan, plan_landmarks
from lmk_rag.encoder.resolve import DEFAULT_MODEL, resolve_model_path
from lmk_rag.encoder.types import ChunkStates, EncodedText

__all__ = [
    "DEFAULT_CONTEXT",
    "DEFAULT_GRANULARITY",
    "DEFAULT_MODEL",
    "LMK_CONFIG_FILE",
    "VARIABLE_GRANULARITIES",
    "ChunkStates",
    "EncodedText",
    "LandmarkEncoder",
    "LandmarkPlan",
    "plan_landmarks",
    "resolve_model_path",
]
