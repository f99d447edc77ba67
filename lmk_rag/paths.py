"""Where lmk_rag keeps its caches (distilled static models, eval encodings)."""

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
