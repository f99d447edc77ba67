"""What lmk_rag's framework adapters (the LlamaIndex packages under ``integrations/``) share with the core, and
nothing else needs: the store's metadata policy, applied before a framework serialises a node
(:func:`clean_metadata`), and the wording of a framework model's field errors (:func:`invalid_fields`). The adapters
import these from here only (docs/architecture.md)."""

from lmk_rag.errors import invalid_fields
from lmk_rag.store.documents import clean_metadata

__all__ = ["clean_metadata", "invalid_fields"]
