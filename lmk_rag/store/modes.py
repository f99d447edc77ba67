"""A store's mode (:class:`~lmk_rag.store.types.StoreMode`): which one a store has, and the encoders each mode uses.

A ``transformer`` store encodes with the landmark encoder (torch, imported only when it is built); a ``static``
store encodes with :class:`~lmk_rag.static.documents.StaticDocumentEncoder`, which is also its static token encoder,
so its ingest and search never import torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lmk_rag.encoder.protocols import DocumentEncoder, TokenEncoder
from lmk_rag.errors import CorruptStoreError, InvalidInputError, SettingsMismatchError, needs_extra
from lmk_rag.store.records import store_mode
from lmk_rag.store.types import Rerank, StoreMode

if TYPE_CHECKING:  # pragma: no cover
    from lmk_rag.static.documents import StaticDocumentEncoder


def resolve_mode(
    settings: dict[str, Any] | None,
    mode: StoreMode | str | None,
    encoder: DocumentEncoder | TokenEncoder | None,
    where: str,
) -> StoreMode:
    """The mode of the store being opened.

    :param settings: the store's settings record, or None for a new store.
    :param mode: the mode asked for, or None.
    :param encoder: the encoder given, or None; a static encoder (a ``TokenEncoder``) means ``static``.
    :param where: the store, for messages.
    :return: the recorded mode of an existing store, else the one asked for, else the encoder's.
    :raises InvalidInputError: for an unknown mode, or an encoder of the other mode.
    :raises SettingsMismatchError: when the mode asked for is not the existing store's.
    """
    if mode is not None:
        try:
            mode = StoreMode(mode)
        except ValueError:
            choices = ", ".join(repr(m.value) for m in StoreMode)
            raise InvalidInputError(f"mode must be one of {choices}, got {mode!r}") from None
    given = None if encoder is None else StoreMode.STATIC if is_static_encoder(encoder) else StoreMode.TRANSFORMER
    if mode is not None and given is not None and mode != given:
        raise InvalidInputError(f"mode={mode.value!r} with a {given.value} encoder: give one or the other")
    wanted = mode or given
    if settings is None:
        return wanted or StoreMode.TRANSFORMER
    recorded = store_mode(settings)
    if wanted is not None and wanted != recorded:
        raise SettingsMismatchError(f"{where} is a {recorded.value} store, opened as a {wanted.value} one")
    return recorded


def is_static_encoder(encoder: DocumentEncoder | TokenEncoder) -> bool:
    """Whether an encoder is a static one (:class:`~lmk_rag.static.StaticTokenEncoder` or
    :class:`~lmk_rag.static.documents.StaticDocumentEncoder`): a :class:`~lmk_rag.encoder.protocols.TokenEncoder`."""
    return isinstance(encoder, TokenEncoder)


def static_store_encoder(
    settings: Any, encoder: DocumentEncoder | TokenEncoder | None, static_encoder: TokenEncoder | None
) -> StaticDocumentEncoder:
    """A static store's encoder: the one given (a bare ``StaticTokenEncoder`` is wrapped, chunking as the store
    records, else by default), else one rebuilt from the recorded settings (or the defaults, for a new store). It is
    also the store's static encoder (its ``token_encoder``).

    :param settings: the store's settings record, or None for a new store.
    :param encoder: the encoder given, or None.
    :param static_encoder: the ``static_encoder`` given, which a static store does not take.
    :return: a :class:`~lmk_rag.static.documents.StaticDocumentEncoder`.
    :raises InvalidInputError: when ``static_encoder`` is given.
    """
    with needs_extra("a static store", "static"):
        from lmk_rag.static.documents import StaticDocumentEncoder

    if static_encoder is not None:
        raise InvalidInputError(
            "a static store's token vectors come from its encoder: pass encoder=StaticTokenEncoder(...), "
            "not static_encoder="
        )
    if isinstance(encoder, StaticDocumentEncoder):
        return encoder
    recorded = settings.get("encoder") if isinstance(settings, dict) else None
    settings = recorded.get("settings") if isinstance(recorded, dict) else None
    if encoder is not None:
        chunking = {"granularity": settings["granularity"]} if settings and "granularity" in settings else {}
        return StaticDocumentEncoder(token_encoder=encoder, **chunking)
    try:
        return StaticDocumentEncoder(**(settings or {}))
    except TypeError as error:  # settings of a transformer encoder, or of a newer version
        raise CorruptStoreError(
            f"the settings record says 'static' but names encoder settings a static encoder does not take ({error}): "
            "it was edited or damaged; restore the record, or re-ingest into a new store"
        ) from None


def default_rerank(mode: StoreMode) -> Rerank:
    """The rerank a search uses when none is named: chunk MaxSim, or static MaxSim in a static store."""
    return Rerank.STATIC if mode == StoreMode.STATIC else Rerank.CHUNKS
