"""What a sentence-transformers model folder says about how to encode with it, read as sentence-transformers reads it.

The files: ``modules.json`` (the module list: Transformer, Pooling, Normalize), ``1_Pooling/config.json`` (the
pooling mode, old ``pooling_mode_*_token`` flags or the newer ``pooling_mode`` key, and ``include_prompt``),
``sentence_bert_config.json`` (``max_seq_length``, ``do_lower_case``) and ``config_sentence_transformers.json``
(``prompts``, ``default_prompt_name``). A folder without ``modules.json`` is a plain Hugging Face model, which
sentence-transformers encodes with mean pooling and no prompts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmk_rag.errors import ModelLoadError
from lmk_rag.jsonl import read_json_object

SUPPORTED_POOLING = ("cls", "mean", "max", "weightedmean", "lasttoken")
"""The sentence-transformers pooling modes lmk-rag computes (``mean_sqrt_len_tokens`` and combined modes it does
not)."""

_LEGACY_POOLING_KEYS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
"""sentence-transformers' older pooling flags, in the order it reads them (sentence_transformer/modules/pooling.py)."""

_KNOWN_MODULES = ("Transformer", "Pooling", "Normalize")
"""The module classes lmk-rag reproduces; any other (Dense, LayerNorm, Router, ...) would change the vectors."""

DOCUMENT_PROMPT_NAMES = ("document", "passage", "corpus")
"""The prompt names sentence-transformers' ``encode_document`` tries, in order."""

QUERY_PROMPT_NAME = "query"
"""The prompt name sentence-transformers' ``encode_query`` uses."""


@dataclass(frozen=True)
class ModelConfig:
    """A model folder's sentence-transformers configuration (the defaults: a plain Hugging Face model).

    :param prompts: prompt name -> prompt text (``config_sentence_transformers.json``).
    :param default_prompt_name: the prompt used when no other applies, or None.
    :param pooling: the pooling mode of the Pooling module (combined modes joined by ``+``); ``"mean"`` without one,
        as sentence-transformers pools a plain Hugging Face model.
    :param include_prompt: whether pooling includes the prompt's tokens (the Pooling module's ``include_prompt``).
    :param normalize: whether the module list ends with Normalize (lmk-rag always L2-normalises its vectors).
    :param max_seq_length: the Transformer module's window (``sentence_bert_config.json``; sentence-transformers 6 saves
        it as the tokenizer's ``model_max_length`` instead), or None.
    :param do_lower_case: whether the Transformer module lowercases its input.
    """

    prompts: dict[str, str] = field(default_factory=dict)
    default_prompt_name: str | None = None
    pooling: str = "mean"
    include_prompt: bool = True
    normalize: bool = False
    max_seq_length: int | None = None
    do_lower_case: bool = False

    @property
    def query_prompt(self) -> str:
        """The prompt ``encode_query`` prepends: the ``"query"`` prompt, else the default prompt, else none."""
        if QUERY_PROMPT_NAME in self.prompts:
            return self.prompts[QUERY_PROMPT_NAME] or ""
        return self._default_prompt()

    @property
    def document_prompt(self) -> str:
        """The prompt ``encode_document`` prepends: the first of :data:`DOCUMENT_PROMPT_NAMES`, else the default."""
        for name in DOCUMENT_PROMPT_NAMES:
            if name in self.prompts:
                return self.prompts[name] or ""
        return self._default_prompt()

    def _default_prompt(self) -> str:
        """The prompt of ``default_prompt_name``, or none."""
        if self.default_prompt_name is None:
            return ""
        return self.prompts.get(self.default_prompt_name) or ""

    @property
    def recorded(self) -> dict[str, Any]:
        """What was read that changes lmk-rag's vectors, for the encoder's fingerprint. ``normalize`` is left out:
        lmk-rag's vectors are L2-normalised either way."""
        return {
            "prompts": dict(sorted(self.prompts.items())),
            "default_prompt_name": self.default_prompt_name,
            "pooling": self.pooling,
            "include_prompt": self.include_prompt,
            "do_lower_case": self.do_lower_case,
        }


def read_model_config(model_path: Path) -> ModelConfig:
    """Read a model folder's sentence-transformers files.

    :param model_path: the model folder.
    :return: what they say; the defaults for a folder without ``modules.json``.
    :raises ModelLoadError: for a damaged file or a module lmk-rag does not reproduce (e.g. Dense); the message names
        the file and the fix.
    """
    modules_file = model_path / "modules.json"
    st_file = model_path / "config_sentence_transformers.json"
    st_config = _read(st_file, "sentence-transformers config") if st_file.is_file() else {}
    prompts = st_config.get("prompts") or {}
    if not isinstance(prompts, dict) or not all(isinstance(v, str | None) for v in prompts.values()):
        raise ModelLoadError(f"{st_file}: 'prompts' must map prompt names to strings, got {prompts!r}; fix the file")
    prompts = {str(name): text or "" for name, text in prompts.items()}
    default = st_config.get("default_prompt_name")
    if default is not None and default not in prompts:
        raise ModelLoadError(f"{st_file}: default_prompt_name {default!r} is not one of the prompts {sorted(prompts)}; "
                             "fix the file")
    bert_file = model_path / "sentence_bert_config.json"
    bert_config = _read(bert_file, "sentence-transformers Transformer config") if bert_file.is_file() else {}
    max_seq_length = int(bert_config["max_seq_length"]) if bert_config.get("max_seq_length") else None
    do_lower_case = bool(bert_config.get("do_lower_case", False))
    if not modules_file.is_file():
        return ModelConfig(prompts=prompts, default_prompt_name=default, max_seq_length=max_seq_length,
                           do_lower_case=do_lower_case)
    modules = _read_modules(modules_file)
    kinds = [kind for kind, _ in modules]
    unknown = [kind for kind in kinds if kind not in _KNOWN_MODULES]
    if unknown or kinds[:1] != ["Transformer"]:
        raise ModelLoadError(
            f"{modules_file} lists the modules {kinds}; lmk-rag reproduces a Transformer followed by Pooling and "
            f"Normalize only ({', '.join(unknown) or 'the Transformer first'} would change the vectors): use a model "
            "without them, or fold them into the model's weights"
        )
    pooling, include_prompt = "mean", True
    for kind, path in modules:
        if kind == "Pooling":
            pooling, include_prompt = _read_pooling(model_path / path / "config.json")
    return ModelConfig(
        prompts=prompts,
        default_prompt_name=default,
        pooling=pooling,
        include_prompt=include_prompt,
        normalize="Normalize" in kinds,
        max_seq_length=max_seq_length,
        do_lower_case=do_lower_case,
    )


def _read(path: Path, what: str) -> dict[str, Any]:
    """A JSON object file of the model folder; a typed error for a damaged one."""
    return read_json_object(path, ModelLoadError, what, "restore it from the model's source")


def _read_modules(path: Path) -> list[tuple[str, str]]:
    """``modules.json`` as (class name, folder) pairs, in order."""
    import json

    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ModelLoadError(f"{path} cannot be read ({error}); restore it from the model's source") from None
    if not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(e.get("type"), str)
                                                for e in entries):
        raise ModelLoadError(f"{path} must be a list of {{'type': ..., 'path': ...}} modules; restore it")
    return [(entry["type"].rsplit(".", 1)[-1], str(entry.get("path", ""))) for entry in entries]


def _read_pooling(path: Path) -> tuple[str, bool]:
    """The pooling mode (combined modes joined by ``+``) and ``include_prompt`` of a Pooling module's config, in
    either key style."""
    config = _read(path, "Pooling config") if path.is_file() else {}
    mode = config.get("pooling_mode")
    if mode is None:
        active = [name for key, name in _LEGACY_POOLING_KEYS.items() if config.get(key)]
        mode = active or ["mean"]
    modes = [mode] if isinstance(mode, str) else list(mode)
    return "+".join(map(str, modes)), bool(config.get("include_prompt", True))
