"""A store's mode (transformer or static) and its encoder: built on first use from the store's record and checked
against it (:class:`StoreEncoder`), with what a new store records of it.

A ``transformer`` store encodes with the landmark encoder (torch, imported only when it is built); a ``static``
store encodes with :class:`~lmk_rag.static.document_encoder.StaticDocumentEncoder`, which is also its static token
encoder, so its ingest and search never import torch. A read-only transformer store encodes its queries on ONNX
Runtime when its encoder runs there or is a torch float32 one (its ONNX float32 twin, :func:`queries_without_torch`):
opening it and searching import neither torch nor transformers.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lmk_rag.encoder.protocols import DocumentEncoder, TokenEncoder
from lmk_rag.errors import (
    CorruptStoreError,
    InvalidInputError,
    MissingExtraError,
    ModelExportError,
    ModelNotFoundError,
    SettingsMismatchError,
    needs_extra,
)
from lmk_rag.store.records import store_mode
from lmk_rag.store.types import StoreMode

if TYPE_CHECKING:  # pragma: no cover
    from lmk_rag.encoder.encoder import LandmarkEncoder
    from lmk_rag.static.document_encoder import StaticDocumentEncoder

logger = logging.getLogger(__name__)


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
    :class:`~lmk_rag.static.document_encoder.StaticDocumentEncoder`): a
    :class:`~lmk_rag.encoder.protocols.TokenEncoder`."""
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
    :return: a :class:`~lmk_rag.static.document_encoder.StaticDocumentEncoder`.
    :raises InvalidInputError: when ``static_encoder`` is given.
    """
    with needs_extra("a static store", "static"):
        from lmk_rag.static.document_encoder import StaticDocumentEncoder

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


def _setting(value: Any) -> str:
    """An encoder setting as a message shows it (None: the setting is not set)."""
    return "not set" if value is None else repr(value)


def check_encoder(settings: dict[str, Any], encoder: DocumentEncoder, where: str) -> None:
    """Raise when an encoder differs from the one the store was built with.

    :raises SettingsMismatchError: naming the differing settings (or the model files).
    """
    recorded = settings["encoder"]
    if encoder.settings != recorded["settings"]:
        keys = sorted(set(encoder.settings) | set(recorded["settings"]))
        diff = [
            f"{key} is {_setting(recorded['settings'].get(key))} in the store but "
            f"{_setting(encoder.settings.get(key))} here"
            for key in keys
            if encoder.settings.get(key) != recorded["settings"].get(key)
        ]
        raise SettingsMismatchError(
            f"{where} was built with other encoder settings ({'; '.join(diff)}): a store encodes with the settings it "
            "was built with; leave these out to use them (lmk-rag: without --backend/--dtype), or ingest into a new "
            "store with the new ones"
        )
    if encoder.fingerprint != recorded["fingerprint"]:
        raise SettingsMismatchError(
            f"{where} was built with the same settings but other model files "
            f"(fingerprint {recorded['fingerprint']} vs {encoder.fingerprint}); re-ingest into a new store"
        )


def _runtime(settings: Mapping[str, Any]) -> tuple[str, str]:
    """The backend and dtype of recorded encoder settings (absent: torch, float32; see
    :attr:`~lmk_rag.LandmarkEncoder.settings`)."""
    return settings.get("backend", "torch"), settings.get("dtype", "float32")


_TWINNED = ("float32", "auto", "bfloat16")
"""The torch dtypes whose stores' read-only handles encode queries with the ONNX float32 twin (bfloat16: the default of
new stores on CPUs with native bfloat16, :func:`~lmk_rag.encoder.encoder.new_store_runtime`)."""


def queries_without_torch(settings: Mapping[str, Any]) -> bool:
    """Whether the queries of a store whose encoder has these recorded settings are encoded on ONNX Runtime in a
    read-only handle: an ONNX encoder's by itself, a torch float32 or bfloat16 encoder's by its ONNX float32 twin (the
    same settings with ``backend="onnx"``, cosine >= 0.9999 to torch's query vectors, docs/store.md); a float16 torch
    encoder's by torch. Needs onnxruntime (the ``onnx`` extra); without it queries run as the store was built.
    """
    backend, dtype = _runtime(settings)
    twin = backend == "onnx" or dtype in _TWINNED
    return twin and importlib.util.find_spec("onnxruntime") is not None


def query_record(encoder: Any) -> dict[str, Any]:
    """What a new store records of the encoder its read-only handles encode queries with
    (:func:`queries_without_torch`): ``{"queries": {"backend": "onnx", "dtype": ..., "fingerprint": ...}}``, or
    nothing for an encoder whose queries need torch (or a static one).

    :param encoder: the store's encoder.
    """
    settings = getattr(encoder, "settings", {})
    backend, dtype = _runtime(settings)
    if not hasattr(encoder, "fingerprint_with") or (backend != "onnx" and dtype not in _TWINNED):
        return {}
    dtype = "float32" if backend != "onnx" or dtype == "auto" else dtype
    return {"queries": {"backend": "onnx", "dtype": dtype, "fingerprint": encoder.fingerprint_with("onnx", dtype)}}


def check_recorded_encoder(settings: dict[str, Any], encoder: LandmarkEncoder, where: str) -> None:
    """Raise when the encoder built from a store's settings record is not the one that wrote the store, or (for a
    read-only handle) its ONNX twin: the same settings and fingerprint on the recorded runtime
    (:meth:`~lmk_rag.LandmarkEncoder.fingerprint_with`), and the recorded query fingerprint where one is recorded.

    Its settings are the record's, so a fingerprint other than the recorded one means an edited record (its
    granularity, ...) or model files that changed since the store was made. ``model_name`` says where the model is,
    not what it is (the fingerprint hashes its files): it is not compared.

    :raises CorruptStoreError: naming both causes, the model folder the encoder loaded, and their fixes.
    """
    recorded = settings["encoder"]
    runtime = _runtime(recorded["settings"])
    queries = recorded.get("queries")

    def located(values: Mapping[str, Any]) -> dict[str, Any]:
        return {key: value for key, value in values.items() if key != "model_name"}

    same = located(encoder.settings_with(*runtime)) == located(recorded["settings"]) and \
        encoder.fingerprint_with(*runtime) == recorded["fingerprint"]
    folder = getattr(encoder, "model_path", recorded["settings"].get("model_name"))
    if not same or (isinstance(queries, dict) and encoder.fingerprint not in (recorded["fingerprint"],
                                                                              queries.get("fingerprint"))):
        raise CorruptStoreError(
            f"{where}: the encoder its settings record describes is not the one that wrote its vectors (fingerprint "
            f"{encoder.fingerprint_with(*runtime)}, recorded {recorded['fingerprint']}): either the model files "
            f"changed since the store was made (those in {folder}): "
            "put the original model files there, or re-ingest into a new store; or the record (lmk_rag.json in a "
            "store folder) was edited or damaged (its encoder settings: granularity, ...): restore the original values"
        )


def check_static(settings: dict[str, Any], static_encoder: TokenEncoder | None, where: str) -> None:
    """Raise when a static encoder does not match the store's static vectors.

    :raises SettingsMismatchError: when the store has no static slot, or another static model.
    """
    if static_encoder is None:
        return
    recorded = settings.get("static")
    if recorded is None:
        raise SettingsMismatchError(
            f"{where} was built without static token vectors; create a new store with static_encoder to use them"
        )
    if static_encoder.fingerprint != recorded["fingerprint"] or static_encoder.dim != recorded["dim"]:
        raise SettingsMismatchError(
            f"{where} holds static vectors of model {recorded['fingerprint']} (dim {recorded['dim']}), "
            f"given {static_encoder.fingerprint} (dim {static_encoder.dim})"
        )


class StoreEncoder:
    """A store's encoder: the one given, else built on first use from the store's recorded settings and checked
    against them; a new store's has the encoder's defaults on this machine's fastest quality-safe runtime
    (:func:`~lmk_rag.encoder.encoder.new_store_runtime`). A read-only handle's is the one that encodes its queries
    without torch where there is one (:func:`queries_without_torch`).

    :param given: the encoder the store was opened with, or None.
    :param where: the store, for messages.
    :param read_only: whether the handle only reads (then it only encodes queries).
    """

    def __init__(self, given: Any, where: str, read_only: bool = False) -> None:
        self._encoder = given
        self.where = where
        self.read_only = read_only
        #: the store's settings record, once read or made (None before: a new store's encoder has the defaults).
        self.settings: dict[str, Any] | None = None
        #: held while the encoder encodes: one encoder is not safe to call from two threads at once.
        self.lock = threading.RLock()

    def get(self) -> Any:
        """The encoder (built now when none was given).

        :raises CorruptStoreError: when the record names settings this version's encoder does not take.
        :raises SettingsMismatchError: when the built encoder's model files differ from the store's.
        :raises ModelExportError: for a read-only handle whose queries run on ONNX Runtime, when the model's export
            is missing and torch, which makes it, is not installed (the message names the command that makes it).
        """
        with self.lock:
            if self._encoder is None:
                self._encoder = self._built()
                if self.settings is not None:
                    check_recorded_encoder(self.settings, self._encoder, self.where)
            return self._encoder

    def _built(self) -> LandmarkEncoder:
        """The encoder the record describes; for a read-only handle its torch-free query encoder where there is one
        (a torch encoder where the exporter cannot convert the model)."""
        if not self.settings:  # a new store: the fastest quality-safe runtime of this machine, then recorded
            from lmk_rag.encoder.encoder import new_store_runtime

            return self._build(new_store_runtime())
        settings = self.settings["encoder"]["settings"]
        if not (self.read_only and self.settings["mode"] == StoreMode.TRANSFORMER.value
                and queries_without_torch(settings)):
            return self._build(settings)
        twin = {**settings, "backend": "onnx"}
        if _runtime(settings)[0] != "onnx":
            twin.pop("dtype", None)  # a torch store's twin runs the float32 export
        try:
            return self._build(twin)
        except ModelExportError as error:
            try:
                encoder = self._build(settings)
            except MissingExtraError:  # no torch: the export cannot be made here
                raise error from None
            logger.warning("%s: queries run on torch: %s", self.where, error)
            return encoder

    def _build(self, settings: dict[str, Any]) -> LandmarkEncoder:
        """A landmark encoder of recorded settings, with the store's errors."""
        from lmk_rag.encoder import LandmarkEncoder

        try:
            return LandmarkEncoder(**settings)
        except TypeError as error:  # a setting this version does not know: an edited or newer record
            raise CorruptStoreError(
                f"{self.where}: the settings record names encoder settings this lmk-rag does not take ({error}); "
                "restore the record, upgrade lmk-rag, or re-ingest into a new store"
            ) from None
        except ModelNotFoundError as error:
            raise ModelNotFoundError(
                f"{self.where}: the model its settings record names is not here: {error}. If the record "
                "(lmk_rag.json) was edited, restore its encoder.settings.model_name"
            ) from None
