"""A model's tokenizer as transformers loads it, saved beside the model's ONNX export, so that the ONNX backend
tokenizes without importing transformers.

:func:`tokenizer_files` are the ``tokenizers`` tokenizer that transformers' fast tokenizer wraps (its
``backend_tokenizer``, as loaded from the model folder) and what the encoder reads of the tokenizer and of the
model's config (the special token ids, ``model_max_length``, ``hidden_size``, ``max_position_embeddings``);
:class:`SavedTokenizer` reads them back and answers the calls the encoder makes of a transformers fast tokenizer with
the same ids and offsets (transformers' fast tokenizer calls the same ``encode_batch``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmk_rag.errors import InvalidInputError, needs_extra

TOKENIZER_FILE = "tokenizer.json"
"""The ``tokenizers`` tokenizer, in its own JSON format."""
META_FILE = "tokenizer_meta.json"
"""The special token ids and the config values the encoder reads."""


@dataclass(frozen=True)
class SavedConfig:
    """The values of a model's config the encoder reads (transformers' names, attribute maps applied)."""

    hidden_size: int
    max_position_embeddings: int | None


class SavedTokenizer:
    """The calls the encoder makes of a transformers fast tokenizer, answered by the saved ``tokenizers`` tokenizer.

    :param backend_tokenizer: the ``tokenizers.Tokenizer`` (truncation and padding off, as transformers' calls
        without them set it).
    :param meta: the special token ids and ``model_max_length`` (:func:`tokenizer_files`).
    """

    is_fast = True

    def __init__(self, backend_tokenizer: Any, meta: dict[str, Any]) -> None:
        backend_tokenizer.no_truncation()
        backend_tokenizer.no_padding()
        self.backend_tokenizer = backend_tokenizer
        self.sep_token_id: int | None = meta["sep_token_id"]
        self.eos_token_id: int | None = meta["eos_token_id"]
        self.pad_token_id: int | None = meta["pad_token_id"]
        self.model_max_length: int = meta["model_max_length"]

    def __call__(self, text: str | list[str], add_special_tokens: bool = True, return_offsets_mapping: bool = False,
                 return_attention_mask: bool = True, return_token_type_ids: bool = True, truncation: bool = False,
                 verbose: bool = True) -> dict[str, Any]:
        """Token ids (and char offsets) of one text or a batch, as transformers' fast tokenizer returns them
        without truncation and padding (the ``return_*`` flags and ``verbose`` ask for no more than ids and
        offsets).

        :raises InvalidInputError: for ``truncation=True``, which the encoder never asks for.
        """
        if truncation:
            raise InvalidInputError("a saved tokenizer tokenizes without truncation")
        texts = [text] if isinstance(text, str) else list(text)
        encodings = self.backend_tokenizer.encode_batch(texts, add_special_tokens=add_special_tokens)
        result: dict[str, Any] = {"input_ids": [encoding.ids for encoding in encodings]}
        if return_offsets_mapping:
            result["offset_mapping"] = [encoding.offsets for encoding in encodings]
        return {key: value[0] for key, value in result.items()} if isinstance(text, str) else result

    @classmethod
    def load(cls, folder: Path) -> tuple[SavedTokenizer, SavedConfig]:
        """The tokenizer and config values saved in ``folder`` (:func:`tokenizer_files`)."""
        with needs_extra("backend='onnx'", "encoder"):
            from tokenizers import Tokenizer

        meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
        tokenizer = cls(Tokenizer.from_file(str(folder / TOKENIZER_FILE)), meta)
        return tokenizer, SavedConfig(meta["hidden_size"], meta["max_position_embeddings"])


def saved(folder: Path) -> bool:
    """Whether ``folder`` holds a saved tokenizer."""
    return (folder / TOKENIZER_FILE).is_file() and (folder / META_FILE).is_file()


def tokenizer_files(model_path: Path) -> dict[str, str]:
    """The files that save the tokenizer transformers loads for a model folder and the config values the encoder
    reads (needs transformers): file name -> content.

    :raises InvalidInputError: when the model has no fast tokenizer (char offsets need one).
    """
    from transformers import AutoConfig, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if not tokenizer.is_fast:
        raise InvalidInputError(f"model {model_path} has no fast tokenizer; char offsets need one")
    config = AutoConfig.from_pretrained(model_path)
    meta = {
        "sep_token_id": tokenizer.sep_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
        "model_max_length": int(tokenizer.model_max_length),
        "hidden_size": int(config.hidden_size),
        "max_position_embeddings": getattr(config, "max_position_embeddings", None),
    }
    return {TOKENIZER_FILE: tokenizer.backend_tokenizer.to_str(), META_FILE: json.dumps(meta)}
