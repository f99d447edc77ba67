"""Any sentence-transformers model folder, read as sentence-transformers reads it: parity with
``SentenceTransformer(folder).encode`` on tiny random BERT, XLM-R, ModernBERT and Qwen2 models
(tests/encoder/conftest.py), landmarks where each tokenizer family puts its separator, prompts, pooling modes and
what a store records."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from lmk_rag.encoder import LandmarkEncoder
from lmk_rag.encoder.windows import SpecialTokens, build_windows
from lmk_rag.errors import InvalidInputError, LandmarkTokenError, ModelLoadError

TEXTS = [
    "How do I list the files of a folder, sorted by time?",
    "The ls command lists directory contents. Compression tools such as gzip reduce the size of files. " * 3,
]
FAMILIES = ("bert", "xlm-roberta", "modernbert", "qwen2")


@pytest.fixture(scope="module")
def encoders(toys):
    """A plain (``granularity=None``) encoder and the SentenceTransformer of each toy."""
    return {family: (LandmarkEncoder(toy.folder, granularity=None, projection=None, device="cpu"),
                     SentenceTransformer(str(toy.folder), device="cpu")) for family, toy in toys.items()}


def cosines(ours, theirs) -> np.ndarray:
    return np.sum(np.stack([encoded.vector for encoded in ours]) * theirs, axis=1)


def variant(toy, tmp_path: Path, file: str, **changes) -> Path:
    """A copy of a toy's folder with keys of one JSON file changed."""
    folder = tmp_path / toy.family
    shutil.copytree(toy.folder, folder)
    path = folder / file
    path.write_text(json.dumps({**(json.loads(path.read_text()) if path.is_file() else {}), **changes}))
    return folder


@pytest.mark.parametrize("family", FAMILIES)
def test_plain_vectors_equal_sentence_transformers(family, encoders, toys):
    encoder, model = encoders[family]
    assert encoder.pooling == toys[family].pooling  # pooling="auto" reads 1_Pooling/config.json
    assert encoder.query_prompt == toys[family].prompts["query"]
    queries = model.encode(TEXTS, prompt_name="query", normalize_embeddings=True)
    documents = model.encode_document(TEXTS, normalize_embeddings=True)
    assert cosines(encoder.encode_queries(TEXTS), queries).min() >= 0.9999
    assert cosines(encoder.encode_documents(TEXTS), documents).min() >= 0.9999
    assert not np.allclose(queries, documents)  # the query prompt changed the vectors


@pytest.mark.parametrize(("family", "landmark"), [("bert", "[SEP]"), ("xlm-roberta", "</s>"), ("modernbert", "[SEP]"),
                                                   ("qwen2", "<|endoftext|>")])
def test_landmarks_are_the_separator_of_each_family(family, landmark, encoders):
    encoder, _ = encoders[family]
    tokenizer = encoder.tokenizer
    assert encoder.special.landmark_id == tokenizer.convert_tokens_to_ids(landmark)
    assert encoder.special.cls_id == (None if family == "qwen2" else tokenizer("a")["input_ids"][0])
    # one chunk: exactly what the tokenizer makes of prompt + text
    prompt = encoder.query_prompt
    tokens = encoder._tokenize([TEXTS[1]], prompt)[0]
    one = build_windows(0, tokens.ids, [(0, len(tokens.ids))], encoder.special, "after", 10_000,
                        prompt_ids=tokens.prompt_ids)
    assert one[0].input_ids == tokenizer(prompt + TEXTS[1])["input_ids"]
    # chunks of 8: the prompt starts every window, a landmark follows every chunk
    chunks = [(start, min(start + 8, len(tokens.ids))) for start in range(0, len(tokens.ids), 8)]
    windows = build_windows(0, tokens.ids, chunks, encoder.special, "after", 40, prompt_ids=tokens.prompt_ids)
    assert len(windows) > 1
    for window in windows:
        start, end = window.prompt_range
        assert window.input_ids[start:end] == tokens.prompt_ids and end > start
        assert all(window.input_ids[position] == encoder.special.landmark_id for position in window.landmark_positions)
        assert window.landmark_positions[-1] == len(window.input_ids) - 1


def test_a_20k_token_text_on_the_modernbert_toy(toys):
    encoder = LandmarkEncoder(toys["modernbert"].folder, granularity=64, projection=None, device="cpu")
    assert encoder.max_length == 1024 and encoder.document_prompt == "search_document: "
    text = " ".join(TEXTS) * 280
    ids, plan = encoder.plan(text)
    assert len(ids) > 20_000
    encoded = encoder.encode_documents(text)
    assert encoded.n_chunks == len(plan.chunks) == -(-len(ids) // 64)
    assert encoded.token_counts == [end - start for start, end in plan.chunks]
    assert "".join(text[start:end] for start, end in encoded.spans) == text
    assert np.all(np.isfinite(encoded.chunk_vectors))


def test_prompt_tokens_belong_to_no_chunk(toys):
    folder = toys["modernbert"].folder
    prompted = LandmarkEncoder(folder, granularity=16, projection=None, device="cpu")
    states = prompted.encode_states([TEXTS[1]])[0]
    _, plan = prompted.plan(TEXTS[1])
    assert states.prompt_size == len(prompted._tokenize([TEXTS[1]], prompted.document_prompt)[0].prompt_ids)
    # every chunk owns its tokens and landmark, the first also the CLS: the prompt's states are counted apart
    assert states.chunk_sizes.sum() == sum(end - start + 1 for start, end in plan.chunks) + 1


def test_explicit_prompts_override_the_model_and_are_recorded(toys, encoders):
    toy = toys["modernbert"]
    encoder = LandmarkEncoder(toy.folder, granularity=None, projection=None, device="cpu", query_prompt="",
                              document_prompt="passage: ")
    _, model = encoders["modernbert"]
    assert cosines(encoder.encode_queries(TEXTS), model.encode(TEXTS, prompt="", normalize_embeddings=True)).min() \
        >= 0.9999
    assert cosines(encoder.encode_documents(TEXTS), model.encode(TEXTS, prompt="passage: ",
                                                                 normalize_embeddings=True)).min() >= 0.9999
    assert encoder.settings["query_prompt"] == "" and encoder.settings["document_prompt"] == "passage: "
    rebuilt = LandmarkEncoder(**encoder.settings)
    assert rebuilt.settings == encoder.settings and rebuilt.fingerprint == encoder.fingerprint
    with pytest.raises(InvalidInputError, match="query_prompt"):
        LandmarkEncoder(toy.folder, query_prompt=["q: "])


def test_the_fingerprint_changes_with_the_models_prompts_or_pooling(toys, tmp_path):
    toy = toys["modernbert"]
    before = LandmarkEncoder(toy.folder, projection=None).fingerprint
    prompts = variant(toy, tmp_path / "p", "config_sentence_transformers.json",
                      prompts={"query": "search_query: ", "document": "document: "})
    pooling = variant(toy, tmp_path / "c", "1_Pooling/config.json", pooling_mode="cls")
    assert LandmarkEncoder(prompts, projection=None, document_prompt="search_document: ").fingerprint != before
    assert LandmarkEncoder(pooling, projection=None, pooling="mean").fingerprint != before


@pytest.mark.parametrize("mode", ["max", "weightedmean", "cls", "lasttoken"])
def test_every_pooling_mode_equals_sentence_transformers(mode, toys, tmp_path):
    folder = variant(toys["xlm-roberta"], tmp_path, "1_Pooling/config.json", pooling_mode=mode)
    encoder = LandmarkEncoder(folder, granularity=None, projection=None, device="cpu")
    assert encoder.pooling == mode
    theirs = SentenceTransformer(str(folder), device="cpu").encode_query(TEXTS, normalize_embeddings=True)
    assert cosines(encoder.encode_queries(TEXTS), theirs).min() >= 0.9999


def test_a_pooling_without_the_prompt_equals_sentence_transformers(toys, tmp_path):
    folder = variant(toys["modernbert"], tmp_path, "1_Pooling/config.json", include_prompt=False)
    encoder = LandmarkEncoder(folder, granularity=None, projection=None, device="cpu")
    theirs = SentenceTransformer(str(folder), device="cpu").encode_query(TEXTS, normalize_embeddings=True)
    assert cosines(encoder.encode_queries(TEXTS), theirs).min() >= 0.9999


def test_do_lower_case_lowercases_as_sentence_transformers(toys, tmp_path):
    folder = variant(toys["xlm-roberta"], tmp_path, "sentence_bert_config.json", do_lower_case=True)
    encoder = LandmarkEncoder(folder, granularity=None, projection=None, device="cpu")
    upper, lower = encoder.encode_documents(["HELLO World", "hello world"])
    np.testing.assert_allclose(upper.vector, lower.vector, atol=1e-6)
    assert upper.spans == [(0, 11)]
    theirs = SentenceTransformer(str(folder), device="cpu").encode_document(["HELLO World"], normalize_embeddings=True)
    assert cosines([upper], theirs).min() >= 0.9999


def test_unsupported_modules_and_pooling_modes_are_typed_errors(toys, tmp_path):
    toy = toys["bert"]
    dense = variant(toy, tmp_path / "d", "sentence_bert_config.json")
    modules = json.loads((toy.folder / "modules.json").read_text())
    modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    (dense / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(ModelLoadError, match="Dense"):
        LandmarkEncoder(dense)
    sqrt = variant(toy, tmp_path / "s", "1_Pooling/config.json", pooling_mode="mean_sqrt_len_tokens")
    with pytest.raises(InvalidInputError, match="mean_sqrt_len_tokens"):
        LandmarkEncoder(sqrt)
    assert LandmarkEncoder(sqrt, pooling="mean").pooling == "mean"
    with pytest.raises(InvalidInputError, match="multicls"):
        LandmarkEncoder(toy.folder, pooling="multicls")


def test_a_tokenizer_without_separator_or_eos_is_a_typed_error():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = Tokenizer(models.WordLevel({"a": 0, "b": 1, "<unk>": 2}, unk_token="<unk>"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    bare = PreTrainedTokenizerFast(tokenizer_object=words, unk_token="<unk>")
    with pytest.raises(LandmarkTokenError, match="eos_token"):
        SpecialTokens.from_tokenizer(bare)


def test_llama_index_instruction_words_are_the_prompts(toys, encoders):
    from llama_index.embeddings.landmark import LandmarkEmbedding

    embedding = LandmarkEmbedding(model_name=str(toys["modernbert"].folder), granularity=None, projection=None,
                                  device="cpu", query_instruction="q: ", text_instruction="")
    assert embedding.encoder.query_prompt == "q: " and embedding.encoder.document_prompt == ""
    assert embedding.encoder_settings["query_prompt"] == "q: "
    theirs = encoders["modernbert"][1].encode([TEXTS[0]], prompt="q: ", normalize_embeddings=True)[0]
    assert float(np.dot(embedding.get_query_embedding(TEXTS[0]), theirs)) >= 0.9999
    with pytest.raises(InvalidInputError, match="query_instruction or query_prompt"):
        LandmarkEmbedding(model_name=str(toys["modernbert"].folder), query_instruction="q: ", query_prompt="q: ")


@pytest.mark.slow
@pytest.mark.parametrize("family", ["modernbert", "xlm-roberta"])
def test_the_onnx_backend_exports_modernbert_and_xlm_r(toys, onnx_cache, monkeypatch, family):
    """ModernBERT (RoPE, local attention) and XLM-R export; Qwen2 does too (docs/decisions.md, 20 s on 2 cores)."""
    from lmk_rag.paths import CACHE_ENV

    monkeypatch.setenv(CACHE_ENV, str(onnx_cache))
    text = " ".join(TEXTS) * 4
    onnx = LandmarkEncoder(toys[family].folder, granularity=16, projection=None, backend="onnx")
    torch_encoder = LandmarkEncoder(toys[family].folder, granularity=16, projection=None, device="cpu")
    ours, theirs = onnx.encode_documents(text), torch_encoder.encode_documents(text)
    np.testing.assert_allclose(ours.chunk_vectors, theirs.chunk_vectors, atol=1e-5)
    np.testing.assert_allclose(ours.vector, theirs.vector, atol=1e-5)


def test_the_worked_example_of_docs_models_runs(toys, capsys):
    import re

    doc = Path(__file__).resolve().parents[2] / "docs" / "models.md"
    block = re.findall(r"```python\n(.*?)```", doc.read_text(encoding="utf-8"), flags=re.S)[0]
    exec(compile(block, str(doc), "exec"), {"__name__": "docs_models", "bge_folder": toys["bert"].folder,
                                            "nomic_folder": toys["modernbert"].folder})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "cls ''"
    assert lines[1] == "mean 'search_query: ' 'search_document: '"
    assert int(lines[2].split()[0]) > 1


@pytest.mark.slow
@pytest.mark.parametrize("budget", [[], ["--batch-tokens", "512"]], ids=["whole-steps", "token-budget"])
def test_finetune_takes_any_model_folder(budget, toys, fixture_data, tmp_path):
    """A CPU dry run of ``lmk-rag finetune`` on the ModernBERT toy: two steps, an LMK-trained model it loads; with a
    token budget below a step's tokens (four 256-token haystacks), the steps run in micro-batches."""
    from typer.testing import CliRunner

    from lmk_rag.cli import app

    with open(fixture_data / "manpages-train" / "pairs.jsonl", encoding="utf-8") as handle:
        rows = [json.loads(next(handle)) for _ in range(24)]
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"query": row["query"], "positive": row["positive"]}) + "\n" for row in rows))
    output = tmp_path / "tuned"
    result = CliRunner().invoke(app, ["finetune", "--train", str(pairs), "--output", str(output), "--model",
                                      str(toys["modernbert"].folder), "--max-steps", "2", "--batch-size", "4",
                                      "--eval-every", "0", "--device", "cpu", "--max-length", "256", *budget])
    assert result.exit_code == 0, result.output
    tuned = LandmarkEncoder(output, projection=None, device="cpu")
    assert tuned.lmk_trained and tuned.pooling == "lmk" and tuned.query_prompt == "" and tuned.max_length == 256
    assert tuned.encode_documents(" ".join(TEXTS)).n_chunks >= 1


@pytest.mark.parametrize("pooling", ["mean", "max", "weightedmean"])
def test_cached_states_pool_as_fresh_ones(pooling, toys):
    from lmk_rag.encoder.pooling import pool_states
    from lmk_rag.eval.states import pack_states, unpack_states

    encoder = LandmarkEncoder(toys["modernbert"].folder, granularity=16, projection=None, device="cpu")
    states = encoder.encode_states(TEXTS)
    for fresh, cached in zip(states, unpack_states(pack_states(states))):
        np.testing.assert_array_equal(pool_states(fresh, pooling, "mean").vector,
                                      pool_states(cached, pooling, "mean").vector)


def test_a_store_refuses_the_model_once_its_prompts_change(toys, tmp_path):
    from lmk_rag.errors import CorruptStoreError
    from lmk_rag.store import LandmarkStore

    folder = tmp_path / "model"
    shutil.copytree(toys["modernbert"].folder, folder)
    encoder = LandmarkEncoder(folder, granularity=16, projection=None, device="cpu")
    with LandmarkStore(tmp_path / "store", encoder=encoder, node_tokens=64) as store:
        store.upsert_documents([("d", TEXTS[1])])
        recorded = store.settings["encoder"]["settings"]
    assert (recorded["query_prompt"], recorded["document_prompt"]) == ("search_query: ", "search_document: ")
    with LandmarkStore(tmp_path / "store", read_only=True) as store:  # rebuilt from the record: the same model
        assert store.search(TEXTS[0], k=1)
    config = folder / "config_sentence_transformers.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "prompts": {"query": "q: ", "document": "d: "}}))
    with pytest.raises(CorruptStoreError, match="the model files changed"), \
            LandmarkStore(tmp_path / "store", read_only=True) as store:
        store.search(TEXTS[0], k=1)
