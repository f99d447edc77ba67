"""The landmark encoder (needs the ``encoder`` extra: torch and transformers; an ONNX encoder whose export exists
needs only onnxruntime and tokenizers, docs/store.md "Queries without torch").

The names are imported on first use, so that the value types (:mod:`lmk_rag.encoder.types`) load without torch: a
static store encodes into :class:`EncodedText` and never imports a transformer.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_LAZY = {
    "DEFAULT_CONTEXT": "lmk_rag.encoder.encoder",
    "DEFAULT_GRANULARITY": "lmk_rag.encoder.encoder",
    "LMK_CONFIG_FILE": "lmk_rag.encoder.encoder",
    "LandmarkEncoder": "lmk_rag.encoder.encoder",
    "VARIABLE_GRANULARITIES": "lmk_rag.encoder.planning",
    "LandmarkPlan": "lmk_rag.encoder.planning",
    "plan_landmarks": "lmk_rag.encoder.planning",
    "DocumentEncoder": "lmk_rag.encoder.protocols",
    "TokenEncoder": "lmk_rag.encoder.protocols",
    "DEFAULT_MODEL": "lmk_rag.encoder.resolve",
    "resolve_model_path": "lmk_rag.encoder.resolve",
    "ChunkStates": "lmk_rag.encoder.types",
    "EncodedText": "lmk_rag.encoder.types",
}

if TYPE_CHECKING:  # pragma: no cover
    from lmk_rag.encoder.encoder import DEFAULT_CONTEXT, DEFAULT_GRANULARITY, LMK_CONFIG_FILE, LandmarkEncoder  # noqa: F401
    from lmk_rag.encoder.planning import VARIABLE_GRANULARITIES, LandmarkPlan, plan_landmarks  # noqa: F401
    from lmk_rag.encoder.protocols import DocumentEncoder, TokenEncoder  # noqa: F401
    from lmk_rag.encoder.resolve import DEFAULT_MODEL, resolve_model_path  # noqa: F401
    from lmk_rag.encoder.types import ChunkStates, EncodedText  # noqa: F401

__all__ = sorted(_LAZY)  # noqa: PLE0605 (a list, built from the lazy names)


def __getattr__(name: str) -> Any:
    """Import a public name from its module on first use."""
    if name not in _LAZY:
        raise AttributeError(f"module 'lmk_rag.encoder' has no attribute {name!r}")
    from lmk_rag.errors import needs_extra  # here: the package namespace holds only its public names

    with needs_extra(f"lmk_rag.encoder.{name}", "encoder"):
        module = import_module(_LAZY[name])
    return getattr(module, name)
