"""The one fingerprint recipe: the first 16 hex digits of a SHA-256. Encoders, the static model, the mixer and model
folders are told apart by it; stores and caches record the values, so a recipe change would make them unusable."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def short_hash(parts: Iterable[bytes]) -> str:
    """The fingerprint of some bytes: SHA-256 over the parts one after another (the same as over their
    concatenation), its first 16 hex digits.

    :param parts: the bytes, in order (an iterator may stream a large file block by block).
    :return: 16 hex characters.
    """
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part)
    return digest.hexdigest()[:16]
