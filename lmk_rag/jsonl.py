"""Reading JSON files: JSON-lines files (plain or gzipped) with errors that name the file and line, and single JSON
objects (settings and marker files) with the caller's error type."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from lmk_rag.errors import DatasetError, LmkRagError


def open_text(path: Path) -> TextIO:
    """Open a UTF-8 text file, transparently gunzipping ``.gz`` files."""
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for each non-blank line of a JSON-lines file.

    :param path: a ``.jsonl`` or ``.jsonl.gz`` file.
    :raises DatasetError: naming the file and line, for a line that is not a JSON object, or an
        unreadable file.
    """
    try:
        with open_text(path) as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as error:
                    raise DatasetError(f"{path}:{number}: not valid JSON ({error.msg})") from error
                if not isinstance(record, dict):
                    raise DatasetError(f"{path}:{number}: expected a JSON object, got {type(record).__name__}")
                yield number, record
    except (OSError, EOFError, UnicodeDecodeError) as error:
        raise DatasetError(f"{path}: cannot read ({error})") from error


def read_json_object(path: Path, error: type[LmkRagError], what: str, fix: str) -> dict[str, Any]:
    """A file holding one JSON object.

    :param path: the file (it exists).
    :param error: the error type to raise, e.g. :class:`~lmk_rag.errors.CorruptStoreError`.
    :param what: what the file is, for the message (``"store settings"``).
    :param fix: what to do about a bad file, for the message.
    :raises LmkRagError: of type ``error``, naming the file, for an unreadable file or one that is not a JSON object.
    """
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as cause:
        raise error(f"{path}: unreadable {what} ({cause}); {fix}") from cause
    if not isinstance(value, dict):
        raise error(f"{path}: {what} must be a JSON object; {fix}")
    return value
