"""Where lmk_rag keeps its caches (distilled static models, eval encodings), and how settings record a local
folder."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

CACHE_ENV = "LMK_RAG_CACHE"
"""Environment variable that overrides the cache root."""


def user_cache_dir(*parts: str) -> Path:
    """lmk_rag's cache folder: ``$LMK_RAG_CACHE``, else the platform's user cache dir for ``lmk-rag``.

    :param parts: sub-folders to append (e.g. ``"eval"``, ``"static"``).
    :return: the path (not created).
    """
    root = os.environ.get(CACHE_ENV) or platformdirs.user_cache_dir("lmk-rag")
    return Path(root).joinpath(*parts)


def recorded_folder(name: str | os.PathLike[str]) -> str:
    """How an encoder's settings (and so a store's record) name a model, projection or mixer: a local folder by its
    absolute, resolved path, so that the record finds it again from any working directory; anything else (a hub id)
    as given.

    :param name: a folder (relative to the working directory, or ``~/...``) or a hub id.
    :return: the name to record.
    """
    local = Path(name).expanduser()
    return str(local.resolve()) if local.is_dir() else os.fspath(name)
