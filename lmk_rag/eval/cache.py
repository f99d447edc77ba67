"""An on-disk cache of encodings: one ``.npz`` per (model, settings, texts), with its cold encode time.

The key is a SHA-256 over a JSON description (model fingerprint, encoder settings, what is
encoded) and over the texts themselves, so a change to any of them misses the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from filelock import FileLock

_ENCODE_S = "__encode_s__"
_KEY = "__key__"


@dataclass(frozen=True)
class CachedArrays:
    """Arrays from the cache or freshly computed.

    :param arrays: the named arrays.
    :param encode_s: seconds the cold computation took (stored with the cache).
    :param cached: whether they were loaded from disk.
    :param path: the cache file.
    """

    arrays: dict[str, np.ndarray]
    encode_s: float
    cached: bool
    path: Path


def texts_digest(texts: Sequence[str]) -> str:
    """Hash a list of texts (order and boundaries included).

    :param texts: the texts.
    :return: a hex SHA-256 digest.
    """
    digest = hashlib.sha256()
    for text in texts:
        data = text.encode("utf-8")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.hexdigest()


def cache_path(cache_dir: Path, key: Mapping[str, Any], texts: Sequence[str]) -> Path:
    """Return the cache file for a key and texts.

    :param cache_dir: the cache folder.
    :param key: JSON-able description of the model, settings and kind of encoding.
    :param texts: the encoded texts.
    :return: ``cache_dir / <sha256>.npz``.
    """
    description = json.dumps(dict(key), sort_keys=True, default=str)
    name = hashlib.sha256(f"{description}\n{texts_digest(texts)}".encode()).hexdigest()[:32]
    return Path(cache_dir) / f"{name}.npz"


def cached_arrays(cache_dir: Path, key: Mapping[str, Any], texts: Sequence[str],
                  compute: Callable[[], dict[str, np.ndarray]]) -> CachedArrays:
    """Load the arrays for ``key`` and ``texts``, or compute, time and store them.

    A file lock beside the cache file makes a concurrent run wait for the first one's result
    instead of encoding twice; the file is written atomically.

    :param cache_dir: the cache folder (created when missing).
    :param key: JSON-able description of the model, settings and kind of encoding.
    :param texts: the texts ``compute`` encodes (hashed into the key).
    :param compute: builds the named arrays; called only on a miss.
    :return: the arrays, the cold encode time and whether they came from disk.
    """
    path = cache_path(cache_dir, key, texts)
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        if path.is_file():
            with np.load(path, allow_pickle=False) as stored:
                arrays = {name: stored[name] for name in stored.files if name not in (_ENCODE_S, _KEY)}
                encode_s = float(stored[_ENCODE_S])
            return CachedArrays(arrays, encode_s, True, path)
        start = time.perf_counter()
        arrays = compute()
        encode_s = time.perf_counter() - start
        partial = path.with_suffix(".partial.npz")
        np.savez(partial, **arrays, **{_ENCODE_S: np.float64(encode_s),
                                       _KEY: np.array(json.dumps(dict(key), sort_keys=True, default=str))})
        os.replace(partial, path)
    return CachedArrays(arrays, encode_s, False, path)
