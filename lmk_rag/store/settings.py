"""A store's settings record: what a store records about how its vectors were made (created with the store, checked
when it is reopened), its payload indexes and storage. The counts a store committed are kept in the same record by
the write protocol (:class:`~lmk_rag.store.writes.CommittedCounts`); this module only checks their shape.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields, replace
from typing import TYPE_CHECKING, Any

from lmk_rag.errors import (
    CorruptStoreError,
    InvalidInputError,
    SettingsMismatchError,
    StoreFormatError,
    StoreNotFoundError,
    StoreReadOnlyError,
)
from lmk_rag.store.base import Backend, IndexKind
from lmk_rag.store.bm25 import BM25_LANGUAGE, BM25_TOKENIZER
from lmk_rag.store.filters import RESERVED_KEYS, payload_key
from lmk_rag.store.records import PAYLOAD_INDEXES, recorded_vectors
from lmk_rag.store.store_encoder import check_static, query_record
from lmk_rag.store.types import QUANTIZATIONS, CollectionSpec, Storage, StoreMode

if TYPE_CHECKING:  # pragma: no cover
    from lmk_rag.encoder.protocols import DocumentEncoder, TokenEncoder



FORMAT = "lmk-rag-store"
#: The recorded settings of a store's :class:`~lmk_rag.store.types.Storage`, by field name.
STORAGE_KEYS = tuple(field.name for field in fields(Storage))
#: How a new store holds its vectors where its arguments say nothing (docs/decisions.md, "store: storage of a new
#: store").
DEFAULT_STORAGE = Storage()
#: A handle's oversampling of quantized node vectors where it gives none.
DEFAULT_OVERSAMPLING = 2.0
#: The store format this lmk-rag writes, and the only one it opens: 3, whose nodes carry ``live`` (see
#: :mod:`lmk_rag.store.writes`) and a lower-cased copy of their metadata, whose record holds every field of
#: :data:`REQUIRED`, and whose encoder fingerprint hashes every setting that decides the vectors. A store of another
#: format is refused (:class:`~lmk_rag.errors.StoreFormatError`): re-ingest it (CHANGELOG.md).
FORMAT_VERSION = 4
#: The fields every settings record of :data:`FORMAT_VERSION` holds (``committed`` comes with the first change).
REQUIRED = ("mode", "encoder", "static", "node_tokens", "bm25", "bm25_tokenizer", "bm25_language", "alpha",
            *STORAGE_KEYS, "cluster", "text_keys", "payload_indexes")
#: How to rebuild a store this lmk-rag does not read, as its messages say it.
REINGEST = ("re-ingest its documents into a new store folder (lmk-rag ingest DOCS --store NEW_FOLDER, or "
            "LandmarkStore(NEW_FOLDER) and add them again): CHANGELOG.md says which versions changed the format")


def create_settings(
    backend: Backend,
    where: str,
    create: bool,
    encoder: Callable[[], DocumentEncoder],
    static_encoder: TokenEncoder | None,
    node_tokens: int,
    bm25: bool,
    alpha: float,
    storage: Storage,
    text_keys: list[str],
    mode: StoreMode = StoreMode.TRANSFORMER,
    bm25_language: str = BM25_LANGUAGE,
    payload_indexes: dict[str, IndexKind] | None = None,
) -> dict[str, Any]:
    """Create the collection and its payload indexes, then record the settings (in that order, so a crash
    leaves no settings record without its collection).

    :param where: the store, for messages.
    :param create: whether a missing store may be created.
    :param encoder: returns the landmark encoder (``.settings``, ``.fingerprint``, ``.dim``), built on demand.
    :param static_encoder: the static token encoder (``.dim``, ``.fingerprint``) or None.
    :param node_tokens: the node size used when cutting documents.
    :param bm25: whether nodes carry BM25 vectors.
    :param alpha: the store's default weight of the rerank score (1.0 without BM25).
    :param storage: compression and memory placement of the vectors.
    :param text_keys: metadata keys to index as full text (words and their prefixes, lowercased).
    :param mode: the store's mode; a static store has no ``chunks`` vector.
    :param bm25_language: the BM25 stop words and stemmer (checked by :func:`~lmk_rag.store.bm25.check_language`).
    :param payload_indexes: ``{metadata key: kind}`` to index for filtering (:func:`check_payload_indexes`).
    :return: the settings record (JSON-able).
    :raises StoreNotFoundError: when ``create`` is False.
    :raises CorruptStoreError: when the collection holds points but no settings record (foreign data).
    """
    if backend.exists() and backend.count(None) > 0:
        raise CorruptStoreError(f"{where}: holds points but no lmk-rag settings record (foreign data)")
    if not create:
        raise StoreNotFoundError(f"no lmk-rag store at {where}")
    encoder = encoder()
    static_dim = None if static_encoder is None else static_encoder.dim
    chunks = mode != StoreMode.STATIC
    spec = CollectionSpec(dim=encoder.dim, static_dim=static_dim, chunks=chunks, bm25=bm25, storage=storage)
    if not backend.exists():
        backend.create(spec)
    for key, kind in PAYLOAD_INDEXES:
        backend.create_payload_index(key, kind)
    for key in text_keys:
        backend.create_payload_index(payload_key(key), "text")
    for key, kind in (payload_indexes or {}).items():
        backend.create_payload_index(payload_key(key), kind)
    settings = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "mode": mode.value,
        "encoder": {"settings": encoder.settings, "fingerprint": encoder.fingerprint, "dim": encoder.dim,
                    **query_record(encoder)},
        "static": None if static_encoder is None else {"fingerprint": static_encoder.fingerprint, "dim": static_dim},
        "node_tokens": node_tokens,
        "bm25": bm25,
        "bm25_tokenizer": BM25_TOKENIZER if bm25 else None,
        "bm25_language": bm25_language if bm25 else None,
        "alpha": alpha if bm25 else 1.0,
        **{key: getattr(storage, key) for key in STORAGE_KEYS},
        "cluster": dict(backend.cluster),
        "text_keys": text_keys,
        "payload_indexes": dict(payload_indexes or {}),
    }
    backend.flush()
    backend.write_settings(settings)
    return settings


def check_text_keys(text_keys: Sequence[str]) -> list[str]:
    """The metadata keys to index as full text, sorted and without repeats.

    :raises InvalidInputError: for a key that is not a non-empty string, or one of the store's own fields.
    """
    if isinstance(text_keys, str):
        raise InvalidInputError(f"text_keys must be a list of metadata keys, got the string {text_keys!r}")
    bad = [key for key in text_keys if not isinstance(key, str) or not key or key in RESERVED_KEYS]
    if bad:
        raise InvalidInputError(f"text_keys must name metadata keys (non-empty, not {sorted(RESERVED_KEYS)}): {bad}")
    return sorted(set(text_keys))


#: The ``field_schema`` values a ``payload_indexes`` entry may give (qdrant-client's ``PayloadSchemaType``, as
#: names or members); ``"text"`` is a full-text index, as ``text_keys`` declares.
PAYLOAD_SCHEMAS: tuple[IndexKind, ...] = ("keyword", "integer", "float", "bool", "datetime", "uuid", "text")


def check_payload_indexes(indexes: Any) -> dict[str, IndexKind]:
    """``payload_indexes`` as ``{metadata key: kind}``: QdrantVectorStore's list of
    ``{"field_name": key, "field_schema": PayloadSchemaType}`` dicts, each key a document metadata key.

    :raises InvalidInputError: for anything but such a list, a key that is empty or one of the store's own fields, a
        schema outside :data:`PAYLOAD_SCHEMAS`, or one key given two schemas.
    """
    if isinstance(indexes, (str, bytes, Mapping)) or not isinstance(indexes, Sequence):
        raise InvalidInputError(f"payload_indexes must be a list of {{'field_name': key, 'field_schema': type}} "
                                f"dicts, got {indexes!r}")
    found: dict[str, IndexKind] = {}
    for entry in indexes:
        if not isinstance(entry, Mapping) or set(entry) != {"field_name", "field_schema"}:
            raise InvalidInputError(f"a payload_indexes entry is {{'field_name': key, 'field_schema': type}}, got "
                                    f"{entry!r}")
        key, schema = entry["field_name"], getattr(entry["field_schema"], "value", entry["field_schema"])
        if not isinstance(key, str) or not key or key in RESERVED_KEYS:
            raise InvalidInputError(f"payload_indexes field_name must name a metadata key (non-empty, not "
                                    f"{sorted(RESERVED_KEYS)}), got {key!r}")
        if schema not in PAYLOAD_SCHEMAS:
            raise InvalidInputError(f"payload_indexes field_schema of {key!r} must be one of {list(PAYLOAD_SCHEMAS)}, "
                                    f"got {entry['field_schema']!r}")
        if found.get(key, schema) != schema:
            raise InvalidInputError(f"payload_indexes gives {key!r} two schemas: {found[key]!r} and {schema!r}")
        found[key] = schema
    return found


def add_payload_indexes(backend: Backend, settings: dict[str, Any], indexes: dict[str, IndexKind], where: str,
                        read_only: bool) -> None:
    """Create the payload indexes an existing store lacks and record them in ``meta`` (as QdrantVectorStore adds
    its ``payload_indexes`` to an existing collection).

    :param indexes: ``{metadata key: kind}`` without ``"text"`` (full-text keys are declared at creation).
    :raises SettingsMismatchError: for a key recorded with another kind.
    :raises StoreReadOnlyError: when an index is missing and the store is open read-only.
    """
    recorded = dict(settings.get("payload_indexes", {}))
    clashes = sorted(key for key in indexes if recorded.get(key, indexes[key]) != indexes[key])
    if clashes:
        raise SettingsMismatchError(f"{where} indexes {', '.join(f'{k!r} as {recorded[k]!r}' for k in clashes)}, "
                                    f"given {', '.join(repr(indexes[k]) for k in clashes)}")
    missing = {key: kind for key, kind in indexes.items() if key not in recorded}
    if not missing:
        return
    if read_only:
        raise StoreReadOnlyError(f"{where} is open read-only: open it for writing to add the payload indexes "
                                 f"{sorted(missing)}")
    for key, kind in missing.items():
        backend.create_payload_index(payload_key(key), kind)
    settings["payload_indexes"] = {**recorded, **missing}
    backend.flush()
    backend.write_settings(settings)


def check_settings(
    settings: dict[str, Any],
    backend: Backend,
    where: str,
    static_encoder: TokenEncoder | None,
    node_tokens: int | None,
    bm25: bool | None,
    text_keys: list[str] | None,
    bm25_language: str | None = None,
    storage: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Check an existing store's settings record against the collection and the caller's arguments.

    :param settings: the record read from the backend, as :func:`validate_settings` accepted it.
    :param where: the store, for messages.
    :return: the record.
    :raises CorruptStoreError: for vectors missing from the collection.
    :param storage: the storage arguments given (:data:`STORAGE_KEYS`; None or absent = as recorded).
    :raises SettingsMismatchError: when the static encoder, ``node_tokens``, ``bm25``, ``bm25_language``,
        ``text_keys`` or a storage argument differ from the store's.
    """
    if not backend.exists():
        raise CorruptStoreError(f"{where}: settings recorded but the vector data is missing")
    check_static(settings, static_encoder, where)
    if bm25 is not None and bm25 != settings["bm25"]:
        raise SettingsMismatchError(_bm25_mismatch(where, bm25))
    recorded_language = settings["bm25_language"]
    if bm25_language is not None and bm25_language != recorded_language:
        raise SettingsMismatchError(
            f"{where} was built with bm25_language={recorded_language!r}, given {bm25_language!r}: the language is "
            "chosen when a store is created"
        )
    if node_tokens is not None and settings["node_tokens"] != node_tokens:
        raise SettingsMismatchError(f"{where} cuts nodes of {settings['node_tokens']} tokens, given {node_tokens}")
    if text_keys is not None and text_keys != settings["text_keys"]:
        raise SettingsMismatchError(
            f"{where} indexes the metadata keys {settings['text_keys']} as full text, given {text_keys}: "
            "text indexes are declared when a store is created"
        )
    check_cluster(settings, backend.cluster, where)
    recorded = recorded_storage(settings)
    differ = [f"{key}: store={getattr(recorded, key)!r} given={value!r}" for key, value in (storage or {}).items()
              if value is not None and value != getattr(recorded, key)]
    if differ:
        raise SettingsMismatchError(
            f"{where} was created with other storage settings ({'; '.join(differ)}): they are fixed when a store is "
            "created; re-ingest into a new store to change them"
        )
    expected, found = recorded_vectors(settings), backend.vector_names()
    if not expected <= found:
        raise CorruptStoreError(f"{where}: vectors {sorted(found)}, expected {sorted(expected)}")
    check_dimensions(settings, backend.vector_sizes(), where)
    return settings


def check_dimensions(settings: Mapping[str, Any], sizes: Mapping[str, int], where: str) -> None:
    """Refuse a settings record whose vector sizes are not those of the collection's vectors (an edited record).

    :param sizes: the collection's dense vector sizes by name (:meth:`Backend.vector_sizes`).
    :raises CorruptStoreError: naming each recorded size, the collection's, and the fix.
    """
    dim = settings["encoder"]["dim"]
    recorded = {"node": ("encoder.dim", dim), "chunks": ("encoder.dim", dim), "document": ("encoder.dim", dim)}
    if settings["static"]:
        recorded["static"] = ("static.dim", settings["static"].get("dim"))
    differ = {key: (value, sizes[name]) for name, (key, value) in recorded.items()
              if name in sizes and value != sizes[name]}
    if differ:
        said = "; ".join(f"{key}={value!r}, but its vectors hold {size} numbers"
                         for key, (value, size) in differ.items())
        restore = ", ".join(f"{key}={size}" for key, (_, size) in differ.items())
        raise CorruptStoreError(
            f"{where}: the settings record (lmk_rag.json in a store folder) does not match the stored vectors: "
            f"{said}. The record was edited or damaged: restore {restore}, or re-ingest into a new store"
        )


def check_cluster(settings: Mapping[str, Any], given: Mapping[str, int], where: str) -> None:
    """Refuse cluster settings other than those the collection was created with (one not recorded was left to
    the server's default).

    :raises SettingsMismatchError: naming each that differs.
    """
    recorded = settings["cluster"]
    differ = [f"{key}: store={recorded.get(key, 'the server default')!r} given={value!r}"
              for key, value in given.items() if recorded.get(key) != value]
    if differ:
        raise SettingsMismatchError(
            f"{where} was created with other cluster settings ({'; '.join(differ)}): they apply to a new collection; "
            "change an existing one on the server (update_collection), and open it without them"
        )


def new_storage(given: Mapping[str, Any]) -> Storage:
    """The storage of a new store: the arguments given, :data:`DEFAULT_STORAGE` for the rest."""
    return replace(DEFAULT_STORAGE, **{key: value for key, value in given.items() if value is not None})


def recorded_storage(settings: Mapping[str, Any]) -> Storage:
    """The storage a store was created with (its record, as :func:`validate_settings` accepted it)."""
    return Storage(**{key: settings[key] for key in STORAGE_KEYS})


def validate_settings(settings: Any, where: str) -> dict[str, Any]:
    """Check that a settings record is one of ours, of :data:`FORMAT_VERSION`, complete and holding values this
    version writes.

    :raises StoreFormatError: for a record of another format, or one that lacks a field the format requires (written
        by an earlier lmk-rag, or edited).
    :raises CorruptStoreError: for a foreign record, or one holding values this version never writes.
    """
    if not isinstance(settings, dict) or settings.get("format") != FORMAT:
        raise CorruptStoreError(f"{where}: not a lmk-rag store (foreign settings record)")
    version = settings.get("format_version")
    if version != FORMAT_VERSION:
        newer = _count(version) and version > FORMAT_VERSION
        raise StoreFormatError(
            f"{where} was written by {'a newer' if newer else 'an earlier'} lmk-rag (store format {version!r}; this "
            f"lmk-rag reads format {FORMAT_VERSION} only): "
            + ("upgrade lmk-rag, or " if newer else "")
            + REINGEST
        )
    encoder = settings.get("encoder")
    missing = [key for key in REQUIRED if key not in settings]
    if isinstance(encoder, dict):
        missing += [f"encoder.{key}" for key in ("settings", "fingerprint", "dim") if key not in encoder]
        if isinstance(encoder.get("settings"), dict) and settings.get("mode") == StoreMode.TRANSFORMER.value and \
                "projection" not in encoder["settings"]:
            missing.append("encoder.settings.projection")
    if missing:
        raise StoreFormatError(
            f"{where}: its settings record (lmk_rag.json in a store folder) lacks {', '.join(missing)}, which every "
            f"store of format {FORMAT_VERSION} records: it was written by an earlier lmk-rag, or edited; " + REINGEST
        )
    if not isinstance(encoder, dict):
        raise CorruptStoreError(f"{where}: the settings record holds encoder={encoder!r}, not its encoder settings")
    problems = [f"{key}={settings.get(key)!r} ({rule})" for key, (valid, rule) in RECORDED.items()
                if key in settings and not valid(settings[key])]
    if not isinstance(encoder["settings"], dict):
        problems.append(f"encoder.settings={encoder['settings']!r} (a JSON object)")
    if isinstance(encoder["dim"], bool) or not isinstance(encoder["dim"], int) or encoder["dim"] < 1:
        problems.append(f"encoder.dim={encoder['dim']!r} (an integer >= 1)")
    if settings["bm25"] is True and settings["bm25_tokenizer"] != BM25_TOKENIZER:
        problems.append(f"bm25_tokenizer={settings['bm25_tokenizer']!r} ({BM25_TOKENIZER!r}, the BM25 tokenizer "
                        "every store with BM25 is written with)")
    if settings["bm25"] is True and not isinstance(settings["bm25_language"], str):
        problems.append(f"bm25_language={settings['bm25_language']!r} (a language name, with BM25)")
    if problems:
        raise CorruptStoreError(
            f"{where}: the settings record holds values this lmk-rag never writes: {'; '.join(problems)}. It was "
            "edited or damaged: restore the original value, or re-ingest into a new store"
        )
    return settings


def _count(value: Any, minimum: int = 1) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _committed(value: Any) -> bool:
    """A ``committed`` entry: ``{"documents": n, "nodes": n}``, with ``next`` ``[n, n]`` or ``"unknown"`` when
    present."""
    if not isinstance(value, dict) or not _count(value.get("documents"), 0) or not _count(value.get("nodes"), 0):
        return False
    upcoming = value.get("next")
    return upcoming in (None, "unknown") or (
        isinstance(upcoming, list) and len(upcoming) == 2 and all(_count(n, 0) for n in upcoming))


#: What each recorded setting must be, and how to say so.
RECORDED: dict[str, tuple[Callable[[Any], bool], str]] = {
    "mode": (lambda v: v in {mode.value for mode in StoreMode}, f"one of {[mode.value for mode in StoreMode]}"),
    "node_tokens": (_count, "an integer >= 1"),
    "bm25": (lambda v: isinstance(v, bool), "true or false"),
    "alpha": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1, "a number in [0, 1]"),
    "quantization": (lambda v: v in QUANTIZATIONS, f"one of {list(QUANTIZATIONS)}"),
    "node_quantization": (lambda v: v in QUANTIZATIONS, f"one of {list(QUANTIZATIONS)}"),
    "on_disk": (lambda v: isinstance(v, bool), "true or false"),
    "hnsw_on_disk": (lambda v: isinstance(v, bool), "true or false"),
    "hnsw_m": (lambda v: _count(v, minimum=0), "an integer >= 0"),
    "ef_construct": (lambda v: _count(v, minimum=4), "an integer >= 4"),
    "cluster": (lambda v: isinstance(v, dict) and all(_count(n) for n in v.values()), "{setting: count}"),
    "text_keys": (lambda v: isinstance(v, list) and all(isinstance(k, str) and k for k in v), "a list of keys"),
    "payload_indexes": (lambda v: isinstance(v, dict) and all(isinstance(k, str) and k and kind in PAYLOAD_SCHEMAS
                                                              for k, kind in v.items()), "{key: index kind}"),
    "bm25_language": (lambda v: v is None or isinstance(v, str), "null or a language name"),
    "committed": (_committed, '{"documents": n, "nodes": n}'),
}


def _bm25_mismatch(where: str, asked: bool) -> str:
    """The message for a store opened with BM25 asked on (or off) when it was built the other way."""
    if asked:
        return (f"{where} was built without BM25 keyword vectors, and they were asked for (bm25=True, "
                "enable_hybrid=True or --bm25): they are chosen when a store is created; leave the setting out to "
                "open the store as it is, or ingest into a new store to have them")
    return (f"{where} was built with BM25 keyword vectors, and a store without them was asked for (bm25=False, "
            "enable_hybrid=False or --no-bm25): leave the setting out to open the store as it is (search(alpha=1) "
            "ranks without BM25), or ingest into a new store without them")
