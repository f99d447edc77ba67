"""lmk_rag: landmark (LMK) pooling embeddings, Qdrant named vectors and two-stage search.

The top-level names are imported lazily so that ``import lmk_rag`` stays cheap and an optional
part that is not installed only fails when it is used, naming the pip extra to install (None: a name of the core
package, which needs no extra).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY: dict[str, tuple[str, str | None]] = {
    "LandmarkEncoder": ("lmk_rag.encoder", "encoder"),
    "EncodedText": ("lmk_rag.encoder", "encoder"),
    "DocumentEncoder": ("lmk_rag.encoder.protocols", None),
    "TokenEncoder": ("lmk_rag.encoder.protocols", None),
    "DEFAULT_NODE_TOKENS": ("lmk_rag.nodes", None),
    "LandmarkStore": ("lmk_rag.store", "edge"),
    "Hit": ("lmk_rag.store", "edge"),
    "Evidence": ("lmk_rag.store", "edge"),
    "ChunkScore": ("lmk_rag.store", "edge"),
    "StorageOptions": ("lmk_rag.store", "edge"),
    "SearchOptions": ("lmk_rag.store", "edge"),
    "ServerOptions": ("lmk_rag.store", "edge"),
    "StaticTokenEncoder": ("lmk_rag.static", "static"),
}

if TYPE_CHECKING:  # pragma: no cover
    from lmk_rag.encoder import EncodedText, LandmarkEncoder  # noqa: F401
    from lmk_rag.encoder.protocols import DocumentEncoder, TokenEncoder  # noqa: F401
    from lmk_rag.nodes import DEFAULT_NODE_TOKENS  # noqa: F401
    from lmk_rag.static import StaticTokenEncoder  # noqa: F401
    from lmk_rag.store import (  # noqa: F401
        ChunkScore,
        Evidence,
        Hit,
        LandmarkStore,
        SearchOptions,
        ServerOptions,
        StorageOptions,
    )

__all__ = ["__version__", *_LAZY]  # noqa: PLE0604 (the lazy names are str keys)


def __getattr__(name: str) -> Any:
    """Import a public name on first use; name the pip extra when its dependencies are missing."""
    if name not in _LAZY:
        raise AttributeError(f"module 'lmk_rag' has no attribute {name!r}")
    from lmk_rag.errors import needs_extra  # here: the package namespace holds only its public names

    module_name, extra = _LAZY[name]
    with needs_extra(f"lmk_rag.{name}", extra):
        module = import_module(module_name)
    return getattr(module, name)
