"""The store's named vectors: one description that every backend turns into its own collection config.

====================  ===========  =========================================================  ==================
name                  kind         what                                                       index
====================  ===========  =========================================================  ==================
``node``              dense        the node vector (normalised mean of its chunk vectors;     HNSW, cosine
                                   pooled static vectors in a static store)
``chunks``            multivector  the node's chunk vectors (one per landmark chunk;         none: rerank only
                                   transformer stores only)
``static``            multivector  static token vectors (static stores, and transformer       none: rerank only
                                   stores made with a static encoder)
``bm25``              sparse       the node's BM25 term weights (stores with BM25)            IDF modifier
====================  ===========  =========================================================  ==================

Multivectors compare by MaxSim over cosines and may be quantized; HNSW is built for the node vector only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from lmk_rag.errors import CorruptStoreError
from lmk_rag.store.types import CollectionSpec, StoreMode

VectorKind = Literal["dense", "multivector", "sparse"]


@dataclass(frozen=True)
class VectorSlot:
    """One named vector of a collection.

    :param name: the vector's name in Qdrant.
    :param kind: ``"dense"`` (HNSW), ``"multivector"`` (MaxSim, no HNSW) or ``"sparse"`` (IDF modifier).
    :param size: the dimension (None for sparse vectors).
    """

    name: str
    kind: VectorKind
    size: int | None = None


def vector_layout(spec: CollectionSpec) -> list[VectorSlot]:
    """The named vectors a collection spec asks for, in a fixed order.

    :param spec: what the store holds.
    :return: ``node``, then ``chunks``, ``static`` and ``bm25`` when the spec has them.
    """
    slots = [VectorSlot("node", "dense", spec.dim)]
    if spec.chunks:
        slots.append(VectorSlot("chunks", "multivector", spec.dim))
    if spec.static_dim is not None:
        slots.append(VectorSlot("static", "multivector", spec.static_dim))
    if spec.bm25:
        slots.append(VectorSlot("bm25", "sparse"))
    return slots


def store_mode(settings: dict[str, Any]) -> StoreMode:
    """The mode a store's settings record.

    :raises CorruptStoreError: for a mode this version does not know.
    """
    try:
        return StoreMode(settings["mode"])
    except ValueError:
        raise CorruptStoreError(f"unknown store mode {settings['mode']!r} in the settings record") from None


def recorded_vectors(settings: dict[str, Any]) -> set[str]:
    """The names of the vectors a store's settings record says its collection holds."""
    names = {"node"} if store_mode(settings) == StoreMode.STATIC else {"node", "chunks"}
    names |= {"static"} if settings["static"] else set()
    names |= {"bm25"} if settings["bm25"] else set()
    return names
