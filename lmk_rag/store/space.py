"""Free disk space for a Qdrant Edge shard, checked before the engine needs it.

Edge keeps its vectors, payloads and WAL in memory-mapped files it creates at full size but sparse (32 MB chunks),
then fills page by page. A page it touches on a full file system cannot be backed, and the process dies with
SIGBUS: no exception, no error line, and opening the store again touches the same pages. So the store asks for the
space first and raises :class:`~lmk_rag.errors.StoreFullError` while nothing has been written.

What a shard may still fill without asking is its *debt*: the apparent size of its files minus the space they
hold. Measured on a tmpfs (docs/decisions.md, "Free space before the engine needs it"): opening a store after a
write filled up to 107 MB of that debt (a WAL replay into the sparse chunks), writing 14.2 MB of points allocated
32 MB (2.25x: vectors, payload, WAL), and ``optimize()`` allocated 0.6x of what the shard held. Hence the rules:
an open needs the debt plus :data:`RESERVE`, a write the debt plus :data:`WRITE_FACTOR` times its bytes plus
:data:`RESERVE`, an optimize the debt plus what the shard holds plus :data:`RESERVE`.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from lmk_rag.errors import StoreFullError
from lmk_rag.store.types import PointData, SparseVector

#: The apparent size of a new, empty shard (measured: 128.2 MB of sparse files, 10 MB of them allocated).
NEW_SHARD = 129 * 2**20
#: Headroom for the files a shard creates as it grows (one 32 MB WAL segment and one 32 MB storage chunk).
RESERVE = 64 * 2**20
#: Bytes allocated per byte of points written (measured 2.25x, rounded up).
WRITE_FACTOR = 3
#: Bytes of a float in the engine's vector storages.
FLOAT_BYTES = 4


def shard_bytes(folder: Path) -> tuple[int, int]:
    """``(apparent, allocated)`` bytes of the files under ``folder``."""
    apparent = allocated = 0
    for root, _, files in os.walk(folder):
        for name in files:
            try:
                stat = os.stat(os.path.join(root, name))
            except FileNotFoundError:  # the engine replaced it meanwhile
                continue
            apparent += stat.st_size
            allocated += stat.st_blocks * 512
    return apparent, allocated


def points_bytes(points: Iterable[PointData]) -> int:
    """About the bytes the points take in the engine's storages: their floats and their JSON payloads."""
    total = 0
    for point in points:
        for vector in point.vectors.values():
            if isinstance(vector, SparseVector):
                total += 2 * FLOAT_BYTES * len(vector.indices)
            else:
                rows = vector if len(vector) and hasattr(vector[0], "__len__") else [vector]
                total += FLOAT_BYTES * sum(len(row) for row in rows)
        total += len(json.dumps(point.payload, ensure_ascii=False))
    return total


def require_space(folder: Path, what: str, extra: int = 0) -> None:
    """Raise unless the file system of ``folder`` has room for the shard's debt, ``extra`` bytes and the reserve.

    :param folder: the store folder (it exists).
    :param what: what is about to happen (``"open"``, ``"write 120 nodes"``), for the message.
    :param extra: bytes the operation adds beyond the debt.
    :raises StoreFullError: naming the space needed and free, and that freeing space and retrying is safe.
    """
    apparent, allocated = shard_bytes(folder)
    needed = max(apparent - allocated, 0) + extra + RESERVE
    free = shutil.disk_usage(folder).free
    if free < needed:
        raise StoreFullError(
            f"{folder}: not enough free disk space to {what}: about {needed / 2**20:.0f} MB needed, "
            f"{free / 2**20:.0f} MB free. Nothing was written and the stored documents are intact: free space "
            "and retry"
        )
