"""Typed errors raised by lmk_rag. Every error names the problem and, where possible, the fix."""

from __future__ import annotations


class LmkRagError(Exception):
    """Base class of every error lmk_rag raises on purpose."""


class InvalidInputError(LmkRagError, ValueError):
    """An argument has the wrong type or value (e.g. a non-str text, an empty list)."""


class EmptyTextError(InvalidInputError):
    """A text is empty or whitespace-only: there is nothing to encode."""


class ModelNotFoundError(LmkRagError, OSError):
    """A model name or folder could not be resolved to local files (or the hub, when online)."""


class ModelExportError(LmkRagError, RuntimeError):
    """A model could not be exported to ONNX (for ``backend="onnx"``); the torch backend still runs it."""


class LandmarkTokenError(LmkRagError, ValueError):
    """The tokenizer has neither a SEP nor an EOS token to use as landmark."""


class VectorSizeError(LmkRagError, ValueError):
    """A vector has a different dimension than the store or model expects."""


class StoreError(LmkRagError):
    """Base class of store errors."""


class StoreNotFoundError(StoreError):
    """No store exists where one was opened without ``create`` (a read-only open, or a server collection)."""


class StoreLockedError(StoreError):
    """Another process holds the store's write lock."""


class StoreReadOnlyError(StoreError):
    """The store's folder cannot be written, and its engine needs to write to open it."""


class StoreUnavailableError(StoreError):
    """The Qdrant server cannot be reached, or refused the request."""


class CorruptStoreError(StoreError):
    """The store folder is damaged, foreign or was written by an incompatible version."""


class SettingsMismatchError(StoreError, ValueError):
    """A store was opened with encoder settings different from those it was built with."""


class DatasetError(LmkRagError, ValueError):
    """A BEIR folder is missing a file or holds a bad line; the message names the file and line."""
