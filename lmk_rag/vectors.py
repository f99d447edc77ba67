"""Vector helpers shared by the encoder, the static encoder and the store (numpy only)."""

from __future__ import annotations

import numpy as np


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    """L2-normalise along the last axis (zero vectors stay zero); returns float32."""
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
