"""lmk_rag: landmark (LMK) pooling embeddings, Qdrant named vectors and two-stage search.

The top-level names are imported lazily so that ``import lmk_rag`` stays cheap and an optional
part that is not installed only fails when it is used, naming the pip extra to install.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {
    "LandmarkEncoder": ("lmk_rag.encoder", "encoder"),
    "EncodedText": ("lmk_rag.encoder", "encoder"),
    "LandmarkStore": ("lmk_rag.store", "edge"),
    "Hit": ("lmk_rag.store", "edge"),
    "StaticTokenEncoder": ("lmk_rag.static", "static"),
}

if TYPE_CHECKING:  # pragma: no cover
    from lmk_rag.encoder import EncodedText, LandmarkEncoder  # noqa: F401
    from lmk_rag.static import StaticTokenEncoder  # noqa: F401
    from lmk_rag.store import Hit, LandmarkStore  # noqa: F401

__all__ = ["__version__", *_LAZY]  # noqa: PLE0604 (the lazy names are str keys)


def __getattr__(name: str) -> Any:
    """Import a public name on first use; name the pip extra when its dependencies are missing."""
    if name not in _LAZY:
        raise AttributeError(f"module 'lmk_rag' has no attribute {name!r}")
    module_name, extra = _LAZY[name]
    try:
        module = import_module(module_name)
    except ImportError as error:
        raise ImportError(
            f"lmk_rag.{name} needs the '{extra}' extra: pip install 'lmk-rag[{extra}]' ({error})"
        ) from error
    return getattr(module, name)
