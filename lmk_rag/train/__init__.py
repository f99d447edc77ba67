"""LMK fine-tuning: teach a transformer's landmark tokens to summarise their chunks (needs the ``encoder`` extra)."""

from lmk_rag.train.data import TrainPair, load_training_data
from lmk_rag.train.trainer import LMK_MARKER, FinetuneConfig, Trainer

__all__ = ["LMK_MARKER", "FinetuneConfig", "TrainPair", "Trainer", "load_training_data"]
