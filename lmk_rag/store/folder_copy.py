"""Copies of a store folder for readers in other processes: each taken at one committed state, under the folder's
commit lock held shared (:class:`~lmk_rag.store.folder_locks.CommitLock`), into ``<folder>/.lmk_rag.readers/<id>/``
(:func:`take_copy`); the copies of readers that died are removed by the next reader (:func:`remove_abandoned`).

Files are cloned where the file system can (``FICLONE``: btrfs, XFS; the cost is then the metadata), else copied
without their holes (the engine's files are mostly preallocated, sparse pages). No file is hard-linked: the engine
rewrites its files in place (flags, trackers, pages, the WAL), and loading a copy replays its WAL into it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from lmk_rag.store.folder_locks import CommitLock, fcntl

READERS_DIR = ".lmk_rag.readers"
_OWNER = ".lmk_rag.owner"  # a name a store folder may hold, so a copy opens as a store of its own
_FICLONE = 0x40049409  # linux/fs.h: _IOW(0x94, 9, int)
_CHUNK = 64 * 2**20


@dataclass
class Copy:
    """One copy of a store folder.

    :param folder: the copy (a store folder of its own: ``lmk_rag.json`` and ``shard``).
    :param generation: the store's commit counter when it was taken.
    :param bytes: bytes of data copied (holes left out).
    :param owner: the open file whose lock says a live reader owns the copy.
    """

    folder: Path
    generation: int
    bytes: int
    owner: int

    def remove(self) -> None:
        """Remove the copy (idempotent)."""
        shutil.rmtree(self.folder, ignore_errors=True)
        if self.owner >= 0:
            os.close(self.owner)
            self.owner = -1


def take_copy(folder: Path, commits: CommitLock, names: tuple[str, ...]) -> Copy:
    """Copy ``names`` (files and folders) of a store folder at one committed state, first removing the copies of
    readers that are gone.

    :param folder: the store folder.
    :param commits: its commit lock, held shared while the files are copied.
    :param names: what to copy, relative to the folder.
    :return: the copy, owned by this process until :meth:`Copy.remove`.
    :raises OSError: when the copy cannot be made (no room, no permission).
    """
    readers = folder / READERS_DIR
    readers.mkdir(exist_ok=True)
    remove_abandoned(readers)
    target = readers / uuid.uuid4().hex
    target.mkdir()
    copy = Copy(target, 0, 0, _own(target))
    try:
        with commits.shared() as generation:
            copy.generation = generation
            for name in names:
                source = folder / name
                if source.is_dir():
                    copy.bytes += _copy_tree(source, target / name)
                elif source.exists():
                    copy.bytes += _copy_file(source, target / name)
    except BaseException:
        copy.remove()
        raise
    return copy


def _own(target: Path) -> int:
    """Lock the copy's owner file for this process: locked under a temporary name, then renamed, so another reader
    never finds an owner file its live owner has not locked yet."""
    temporary = target / f"{_OWNER}.{os.getpid()}"
    fd = os.open(temporary, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.replace(temporary, target / _OWNER)
    return fd


def remove_abandoned(readers: Path) -> None:
    """Remove the copies whose owner file no process holds locked (their reader died without closing)."""
    for entry in readers.iterdir():
        owner = entry / _OWNER
        try:
            fd = os.open(owner, os.O_RDONLY)
        except OSError:  # not a copy, or one being made (its owner file is renamed into place once locked)
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # a live reader's
        finally:
            os.close(fd)  # closing releases a lock just taken
        shutil.rmtree(entry, ignore_errors=True)


def _copy_tree(source: Path, target: Path) -> int:
    """Copy a folder's files (see :func:`_copy_file`); return the bytes copied."""
    copied = 0
    target.mkdir()
    for entry in sorted(source.iterdir()):
        if entry.is_dir():
            copied += _copy_tree(entry, target / entry.name)
        else:
            copied += _copy_file(entry, target / entry.name)
    return copied


def _copy_file(source: Path, target: Path) -> int:
    """Clone a file where the file system can, else copy its data extents and leave its holes; return the bytes
    of data copied (0 for a clone)."""
    with open(source, "rb") as src, open(target, "wb") as dst:
        with contextlib.suppress(OSError):
            fcntl.ioctl(dst.fileno(), _FICLONE, src.fileno())
            return 0
        size = os.fstat(src.fileno()).st_size
        os.ftruncate(dst.fileno(), size)
        copied = 0
        for start, end in _extents(src.fileno(), size):
            copied += _copy_range(src.fileno(), dst.fileno(), start, end)
        return copied


def _copy_range(src: int, dst: int, start: int, end: int) -> int:
    """Copy bytes ``[start, end)`` to the same offsets, in the kernel where it can; return the bytes copied."""
    offset = start
    while offset < end:
        count = min(_CHUNK, end - offset)
        try:
            done = os.copy_file_range(src, dst, count, offset, offset)
        except (AttributeError, OSError):  # not Linux, or across file systems it cannot
            data = os.pread(src, count, offset)
            done = os.pwrite(dst, data, offset) if data else 0
        if not done:
            break
        offset += done
    return offset - start


def _extents(fd: int, size: int) -> list[tuple[int, int]]:
    """The ``(start, end)`` byte ranges of a file that hold data (the whole file where holes cannot be found)."""
    if not hasattr(os, "SEEK_DATA"):
        return [(0, size)]
    extents, offset = [], 0
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError as error:
            if error.errno == errno.ENXIO:  # no data after offset
                break
            return [(0, size)]
        end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
        extents.append((start, end))
        offset = end
    return extents
