"""What a store records about how its vectors were made, and the checks made when it is reopened."""

from __future__ import annotations

from typing import Any

from lmk_rag.errors import CorruptStoreError, SettingsMismatchError
from lmk_rag.store.types import CollectionSpec

FORMAT = "lmk-rag-store"
FORMAT_VERSION = 1


def build_meta(
    encoder: Any, static_encoder: Any | None, spec: CollectionSpec, node_tokens: int
) -> dict[str, Any]:
    """The settings record of a new store.

    :param encoder: the landmark encoder (``.settings``, ``.fingerprint``, ``.dim``).
    :param static_encoder: the static token encoder (``.dim``, ``.fingerprint``) or None.
    :param spec: the collection's vectors.
    :param node_tokens: the node size used when cutting documents.
    :return: a JSON-able dict.
    """
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "encoder": {"settings": encoder.settings, "fingerprint": encoder.fingerprint, "dim": encoder.dim},
        "static": None
        if static_encoder is None
        else {"fingerprint": static_encoder.fingerprint, "dim": static_encoder.dim},
        "node_tokens": node_tokens,
        "bm25": spec.bm25,
        "document_vector": spec.document_vector,
        "quantization": spec.quantization,
        "hnsw_m": spec.hnsw_m,
        "ef_construct": spec.ef_construct,
    }


def spec_from_meta(meta: dict[str, Any]) -> CollectionSpec:
    """The collection spec a settings record describes."""
    static = meta.get("static")
    return CollectionSpec(
        dim=int(meta["encoder"]["dim"]),
        static_dim=None if static is None else int(static["dim"]),
        bm25=bool(meta.get("bm25", False)),
        document_vector=bool(meta.get("document_vector", False)),
        quantization=meta.get("quantization"),
        hnsw_m=int(meta.get("hnsw_m", 16)),
        ef_construct=int(meta.get("ef_construct", 100)),
    )


def validate_meta(meta: Any, where: str) -> dict[str, Any]:
    """Check that a settings record is one of ours and readable by this version.

    :raises CorruptStoreError: for a foreign, damaged or newer record.
    """
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CorruptStoreError(f"{where}: not a lmk-rag store (foreign settings record)")
    if meta.get("format_version") != FORMAT_VERSION:
        raise CorruptStoreError(
            f"{where}: store format version {meta.get('format_version')!r}, this lmk-rag reads {FORMAT_VERSION}"
        )
    encoder = meta.get("encoder")
    if not isinstance(encoder, dict) or not {"settings", "fingerprint", "dim"} <= set(encoder):
        raise CorruptStoreError(f"{where}: the store's settings record lacks its encoder settings")
    return meta


def check_encoder(meta: dict[str, Any], encoder: Any, where: str) -> None:
    """Raise when an encoder differs from the one the store was built with.

    :raises SettingsMismatchError: naming the differing settings (or the model files).
    """
    recorded = meta["encoder"]
    if encoder.settings != recorded["settings"]:
        keys = sorted(set(encoder.settings) | set(recorded["settings"]))
        diff = [
            f"{key}: store={recorded['settings'].get(key)!r} given={encoder.settings.get(key)!r}"
            for key in keys
            if encoder.settings.get(key) != recorded["settings"].get(key)
        ]
        raise SettingsMismatchError(f"{where} was built with other encoder settings ({'; '.join(diff)})")
    if encoder.fingerprint != recorded["fingerprint"]:
        raise SettingsMismatchError(
            f"{where} was built with the same settings but other model files "
            f"(fingerprint {recorded['fingerprint']} vs {encoder.fingerprint}); re-ingest into a new store"
        )


def check_static(meta: dict[str, Any], static_encoder: Any | None, where: str) -> None:
    """Raise when a static encoder does not match the store's static vectors.

    :raises SettingsMismatchError: when the store has no static slot, or another static model.
    """
    if static_encoder is None:
        return
    recorded = meta.get("static")
    if recorded is None:
        raise SettingsMismatchError(
            f"{where} was built without static token vectors; create a new store with static_encoder to use them"
        )
    if static_encoder.fingerprint != recorded["fingerprint"] or static_encoder.dim != recorded["dim"]:
        raise SettingsMismatchError(
            f"{where} holds static vectors of model {recorded['fingerprint']} (dim {recorded['dim']}), "
            f"given {static_encoder.fingerprint} (dim {static_encoder.dim})"
        )
