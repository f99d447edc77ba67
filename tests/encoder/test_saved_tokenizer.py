"""The tokenizer saved with an ONNX export answers the encoder's calls as transformers' fast tokenizer does: the same
ids, offsets, special tokens and prompt split, for MiniLM and the four toy families (their own BPE and wordpiece
tokenizers, prompts, and a decoder's EOS landmark)."""

from __future__ import annotations

import json

import pytest
from tokenizers import Tokenizer
from transformers import AutoTokenizer

from lmk_rag.encoder.tokenizer import META_FILE, TOKENIZER_FILE, SavedTokenizer, tokenizer_files
from lmk_rag.encoder.windows import SpecialTokens, tokenize_with_offsets

TEXTS = [
    "How do I list the files of a folder, sorted by time?",
    "gzip  reduces the size of the named files using Lempel-Ziv coding (LZ77).",
    "Ünïcödé, émojis 🙂 and CJK 中文 mixed with snake_case and CamelCase; tabs\tand\nnewlines.",
    "a",
]


def _saved(folder) -> SavedTokenizer:
    files = tokenizer_files(folder)
    return SavedTokenizer(Tokenizer.from_str(files[TOKENIZER_FILE]), json.loads(files[META_FILE]))


@pytest.mark.parametrize("family", ["minilm", "bert", "xlm-roberta", "modernbert", "qwen2"])
def test_the_saved_tokenizer_answers_like_transformers(family, minilm_path, toys) -> None:
    folder = minilm_path if family == "minilm" else toys[family].folder
    theirs, ours = AutoTokenizer.from_pretrained(folder), _saved(folder)
    for special in (True, False):
        expected = theirs(TEXTS, add_special_tokens=special, return_offsets_mapping=True)
        got = ours(TEXTS, add_special_tokens=special, return_offsets_mapping=True)
        assert got["input_ids"] == expected["input_ids"]
        assert [list(map(tuple, row)) for row in got["offset_mapping"]] == \
            [list(map(tuple, row)) for row in expected["offset_mapping"]]
    assert ours("a")["input_ids"] == theirs("a")["input_ids"]
    assert SpecialTokens.from_tokenizer(ours) == SpecialTokens.from_tokenizer(theirs)
    assert ours.model_max_length == theirs.model_max_length
    prompt = "" if family == "minilm" else next(iter(toys[family].prompts.values()))
    assert tokenize_with_offsets(ours, TEXTS, prompt) == tokenize_with_offsets(theirs, TEXTS, prompt)
