"""Fixtures of the encoder tests: tiny random models of four families, saved in the sentence-transformers layout and
built offline, once per session.

Each is a 2-layer, 32-dim model with prompts, a Pooling module and Normalize: ``bert`` (a ``BAAI/bge-small-en-v1.5``
style: CLS pooling, a query instruction), ``xlm-roberta`` (``intfloat/multilingual-e5`` style: mean pooling,
``"query: "``/``"passage: "``, ``</s>`` landmarks), ``modernbert`` (``nomic-ai/modernbert-embed-base`` style: mean
pooling, ``"search_query: "``/``"search_document: "``, 8192 positions) and ``qwen2`` (a decoder embedder: last-token
pooling, an EOS the tokenizer appends, an instruction for queries only). Random weights: mechanics, never quality.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import (
    AutoTokenizer,
    BertConfig,
    BertModel,
    ModernBertConfig,
    ModernBertModel,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2Model,
    XLMRobertaConfig,
    XLMRobertaModel,
)

FAMILIES = ("bert", "xlm-roberta", "modernbert", "qwen2")

PROMPTS = {
    "bert": {"query": "Represent this sentence for searching relevant passages: "},
    "xlm-roberta": {"query": "query: ", "passage": "passage: "},
    "modernbert": {"query": "search_query: ", "document": "search_document: "},
    "qwen2": {"query": "Instruct: Given a question, find the passages that answer it\nQuery: "},
}
POOLING = {"bert": "cls", "xlm-roberta": "mean", "modernbert": "mean", "qwen2": "lasttoken"}
MAX_SEQ_LENGTH = {"bert": 128, "xlm-roberta": 128, "modernbert": 1024, "qwen2": 128}

_SMALL = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}


def bpe_tokenizer(corpus: list[str], decoder: bool) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on ``corpus``: RoBERTa's ``<s> x </s>`` template, or a decoder's ``x EOS``
    (no SEP, no BOS added: the landmark is the EOS)."""
    specials = ["<|endoftext|>", "<unk>"] if decoder else ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=not decoder)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=600, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    if decoder:
        tokenizer.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=True),
            processors.TemplateProcessing(single="$A <|endoftext|>", special_tokens=[("<|endoftext|>", 0)]),
        ])
        return PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|endoftext|>",
                                       pad_token="<|endoftext|>", unk_token="<unk>", model_max_length=512)
    tokenizer.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0), trim_offsets=True)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", sep_token="</s>",
                                   cls_token="<s>", pad_token="<pad>", unk_token="<unk>", mask_token="<mask>",
                                   model_max_length=512)


def build_toy(family: str, folder: Path, minilm_path: Path, corpus: list[str]) -> Path:
    """Build one toy model into ``folder`` in the sentence-transformers layout.

    :param family: one of :data:`FAMILIES`.
    :param minilm_path: the packaged MiniLM folder (its wordpiece tokenizer serves BERT and ModernBERT).
    :param corpus: texts to train the BPE tokenizers on.
    :return: the folder.
    """
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    torch.manual_seed(0)
    hf_folder = folder / "hf"
    if family in ("bert", "modernbert"):
        tokenizer = AutoTokenizer.from_pretrained(minilm_path)
        if family == "bert":
            model = BertModel(BertConfig(vocab_size=tokenizer.vocab_size, max_position_embeddings=512, **_SMALL))
        else:
            model = ModernBertModel(ModernBertConfig(
                vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                intermediate_size=48, max_position_embeddings=8192, global_attn_every_n_layers=2, local_attention=64,
                pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.cls_token_id,
                eos_token_id=tokenizer.sep_token_id, cls_token_id=tokenizer.cls_token_id,
                sep_token_id=tokenizer.sep_token_id))
    elif family == "xlm-roberta":
        tokenizer = bpe_tokenizer(corpus, decoder=False)
        model = XLMRobertaModel(XLMRobertaConfig(vocab_size=len(tokenizer), max_position_embeddings=514, pad_token_id=1,
                                                 bos_token_id=0, eos_token_id=2, **_SMALL))
    else:
        tokenizer = bpe_tokenizer(corpus, decoder=True)
        model = Qwen2Model(Qwen2Config(vocab_size=len(tokenizer), num_key_value_heads=1, max_position_embeddings=512,
                                       eos_token_id=0, pad_token_id=0, **_SMALL))
    model.save_pretrained(hf_folder)
    tokenizer.save_pretrained(hf_folder)
    transformer = Transformer(str(hf_folder), max_seq_length=MAX_SEQ_LENGTH[family])
    pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode=POOLING[family])
    toy = SentenceTransformer(modules=[transformer, pooling, Normalize()], prompts=PROMPTS[family], device="cpu")
    toy.save(str(folder / "st"))
    return folder / "st"


CORPUS = [
    "The ls command lists directory contents; find searches a folder tree for files by name, size or date. "
    "Compression tools such as gzip, bzip2 and xz reduce the size of files, and tar bundles many into one. "
    "Which command shows the manual page of a program? How do I list the files of a folder, sorted by time? "
    "Represent this sentence for searching relevant passages: query: passage: search_query: search_document: "
    "Instruct: Given a question, find the passages that answer it. HELLO World, hello world. 0123456789"
] * 20


@dataclass(frozen=True)
class Toy:
    """A toy model: its sentence-transformers folder and what it was saved with."""

    family: str
    folder: Path
    prompts: dict[str, str]
    pooling: str


@pytest.fixture(scope="session")
def toys(tmp_path_factory: pytest.TempPathFactory, minilm_path: Path) -> dict[str, Toy]:
    """The four toy models by family (:data:`FAMILIES`), built once per session (a few seconds in all)."""
    root = tmp_path_factory.mktemp("toys")
    return {family: Toy(family, build_toy(family, root / family, minilm_path, CORPUS), PROMPTS[family],
                        POOLING[family]) for family in FAMILIES}
