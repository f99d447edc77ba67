"""What lmk_rag's framework adapters (the LlamaIndex packages under ``integrations/``) share with the core, and
nothing else needs: the store's metadata policy, applied before a framework serialises a node
(:func:`clean_metadata`), the wording of a framework model's field errors (:func:`invalid_fields`), and the node
cutting a node parser shares with the store (:func:`group_chunks`, its :class:`NodeSlice` s). The adapters import
these from here only (docs/architecture.md)."""

from lmk_rag.errors import invalid_fields
from lmk_rag.nodes import NodeSlice, group_chunks
from lmk_rag.store.documents import clean_metadata

__all__ = ["NodeSlice", "clean_metadata", "group_chunks", "invalid_fields"]
