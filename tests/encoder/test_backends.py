"""The ONNX Runtime backend against the torch backend on the real MiniLM: token-state parity (float32), closeness
(int8), the settings each records, the export cache, and the errors that name the fix."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from lmk_rag.cli import app
from lmk_rag.encoder import LandmarkEncoder, onnx_export
from lmk_rag.encoder.pooling import pool_states
from lmk_rag.encoder.resolve import model_digest
from lmk_rag.errors import InvalidInputError, ModelExportError
from lmk_rag.eval.states import states_key
from lmk_rag.paths import CACHE_ENV

# The default backend and dtype are not recorded: the fingerprints of the default torch encoder (store format 3).
DEFAULT_FINGERPRINT = "747ec896a59d7ca0"  # LandmarkEncoder(projection=None)
K32_FINGERPRINT = "7b290efe8a097d54"  # LandmarkEncoder(granularity=32, projection=None)
DEFAULT_STATES_KEY = {
    "kind": "chunk_states",
    "model": "2e8a342051c55cb0",
    "layout": "after",
    "granularity": 64,
    "context": "document",
    "max_length": 256,
    "window_overlap": 0,
    "sentence_max_tokens": 128,
}


def _texts(fixture_data: Path, name: str, count: int) -> list[str]:
    with gzip.open(fixture_data / name / "corpus.jsonl.gz", "rt") as lines:
        return [json.loads(line)["text"] for line, _ in zip(lines, range(count))]


def _row_cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


def test_default_encoder_keeps_its_fingerprint_and_eval_cache_key(minilm_encoder) -> None:
    default = LandmarkEncoder(projection=None)
    assert default.fingerprint == DEFAULT_FINGERPRINT
    assert states_key(default) == states_key(LandmarkEncoder()) == DEFAULT_STATES_KEY
    assert LandmarkEncoder(granularity=32, projection=None).fingerprint == K32_FINGERPRINT
    assert not {"backend", "dtype"} & set(minilm_encoder.settings)
    explicit = LandmarkEncoder(granularity=32, backend="torch", dtype="float32")
    assert explicit.settings == minilm_encoder.settings and explicit.fingerprint == minilm_encoder.fingerprint


def test_float32_onnx_token_states_match_torch(minilm_encoder, onnx_encoders, fixture_data: Path) -> None:
    texts = [*_texts(fixture_data, "manpages-short", 2), _texts(fixture_data, "manpages-longdoc", 1)[0]]
    batch = minilm_encoder.tokenizer(texts, padding=True, truncation=True, max_length=256, return_tensors="np")
    ids, mask = batch["input_ids"].astype(np.int64), batch["attention_mask"].astype(np.int64)
    assert mask.sum(1).min() < mask.shape[1]  # one row is padded
    ours, theirs = minilm_encoder.runtime(ids, mask), onnx_encoders["float32"].runtime(ids, mask)
    assert theirs.dtype == np.float32 and theirs.shape == ours.shape == (*ids.shape, 384)
    assert _row_cosines(ours, theirs)[mask.astype(bool)].min() >= 0.999
    single = np.array([[101, 2003, 102]], dtype=np.int64)  # batch of one, three tokens
    assert _row_cosines(minilm_encoder.runtime(single, np.ones_like(single)),
                        onnx_encoders["float32"].runtime(single, np.ones_like(single))).min() >= 0.999


def test_float32_onnx_encodes_multi_window_texts_like_torch(minilm_encoder, onnx_encoders, fixture_data) -> None:
    texts = [_texts(fixture_data, "manpages-short", 1)[0], _texts(fixture_data, "manpages-longdoc", 1)[0]]
    ours, theirs = minilm_encoder.encode_states(texts), onnx_encoders["float32"].encode_states(texts)
    assert len(ours[1].cls_states) >= 3  # the long document spans several windows
    for a, b in zip(ours, theirs):
        assert a.spans == b.spans and a.token_counts == b.token_counts
        np.testing.assert_array_equal(a.chunk_sizes, b.chunk_sizes)
        for name in ("landmark_states", "chunk_sums", "cls_states"):
            assert _row_cosines(getattr(a, name), getattr(b, name)).min() >= 0.999, name


def test_onnx_embeds_a_text_without_words_as_torch_does(minilm_encoder, onnx_encoders) -> None:
    expected = minilm_encoder.empty_text_vector()
    np.testing.assert_allclose(onnx_encoders["float32"].empty_text_vector(), expected, atol=1e-5)
    assert float(onnx_encoders["int8"].empty_text_vector() @ expected) >= 0.97  # measured 0.980: two states' mean


def test_int8_vectors_stay_close_to_torch(minilm_encoder, onnx_encoders, fixture_data: Path) -> None:
    """Measured on 40 manpages-short and 6 longdoc texts at k=32 and k=64: text vectors >= 0.990 (mean 0.9955),
    chunk vectors >= 0.981 (mean 0.994), landmark states >= 0.96 (mean 0.987); before the projection, which only
    maps both sides' vectors alike (its own tests: tests/encoder/test_projection.py)."""
    texts = [*_texts(fixture_data, "manpages-short", 10), *_texts(fixture_data, "manpages-longdoc", 2)]
    ours, theirs = ([pool_states(states, "mean", "mean") for states in encoder.encode_states(texts)]
                    for encoder in (minilm_encoder, onnx_encoders["int8"]))
    vectors = np.array([float(a.vector @ b.vector) for a, b in zip(ours, theirs)])
    chunks = np.concatenate([(a.chunk_vectors * b.chunk_vectors).sum(1) for a, b in zip(ours, theirs)])
    assert vectors.min() >= 0.985 and chunks.min() >= 0.97 and chunks.mean() >= 0.99
    assert vectors.min() < 0.9999  # quantized for real: not the float32 model


def test_settings_record_backend_and_dtype_only_off_the_default(minilm_encoder, onnx_encoders, onnx_cache,
                                                                monkeypatch) -> None:
    float32, int8 = onnx_encoders["float32"], onnx_encoders["int8"]
    assert float32.settings == {**minilm_encoder.settings, "backend": "onnx"}
    assert int8.settings == {**minilm_encoder.settings, "backend": "onnx", "dtype": "int8"}
    assert len({minilm_encoder.fingerprint, float32.fingerprint, int8.fingerprint}) == 3
    monkeypatch.setenv(CACHE_ENV, str(onnx_cache))
    rebuilt = LandmarkEncoder(**int8.settings)
    assert rebuilt.fingerprint == int8.fingerprint and rebuilt.runtime.path == int8.runtime.path
    assert LandmarkEncoder(backend="onnx", dtype="auto").runtime.path == float32.runtime.path


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"dtype": "int8"}, "dtype='int8' needs backend='onnx'"),
        ({"backend": "onnx", "dtype": "bfloat16"}, "dtype='bfloat16' needs backend='torch'"),
        ({"dtype": "float64"}, "backend='torch' runs dtype 'auto', 'float32', 'bfloat16', 'float16'"),
        ({"backend": "tensorrt"}, "backend must be one of 'torch', 'onnx'"),
        ({"backend": "onnx", "device": "cuda"}, "use backend='torch' for device='cuda'"),
    ],
)
def test_bad_backend_or_dtype_names_the_fix(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        LandmarkEncoder(**arguments)


def test_exports_are_cached_by_model_digest_and_reused(onnx_encoders, onnx_cache, monkeypatch) -> None:
    path = onnx_encoders["int8"].runtime.path
    model_path = onnx_encoders["int8"].model_path
    assert path == onnx_cache / "onnx" / f"{model_digest(model_path)}-r{onnx_export.RECIPE}" / "model-int8.onnx"
    monkeypatch.setenv(CACHE_ENV, str(onnx_cache))

    def no_rebuild(*args: Any) -> None:
        raise AssertionError("a cached export was built again")

    monkeypatch.setattr(onnx_export, "_build", no_rebuild)
    assert onnx_export.exported_model(model_path, "int8") == path
    assert not list(path.parent.glob("*.partial"))


def test_a_failed_write_leaves_no_file(tmp_path: Path) -> None:
    target = tmp_path / "model-int8.onnx"
    with pytest.raises(RuntimeError), onnx_export._partial_file(target) as partial:
        partial.write_bytes(b"half a model")
        raise RuntimeError("disk full")
    assert list(tmp_path.iterdir()) == []
    with onnx_export._partial_file(target) as partial:
        partial.write_bytes(b"a model")
    assert [item.name for item in tmp_path.iterdir()] == [target.name] and target.read_bytes() == b"a model"


def test_an_export_failure_is_a_typed_error(tmp_path: Path, monkeypatch) -> None:
    def unsupported(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("unsupported operator aten::frobnicate")

    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(torch.onnx, "export", unsupported)
    with pytest.raises(ModelExportError, match=r"aten::frobnicate.*use backend='torch'"):
        LandmarkEncoder(backend="onnx")
    assert not [*tmp_path.rglob("*.onnx"), *tmp_path.rglob("*.partial")]


def test_encode_command_takes_backend_and_dtype(onnx_encoders, onnx_cache, monkeypatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(onnx_cache))
    result = CliRunner().invoke(app, ["encode", "tar saves many files together.", "--backend", "onnx",
                                      "--dtype", "int8"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["dim"] == 384
    result = CliRunner().invoke(app, ["encode", "tar saves many files together.", "--dtype", "int8"])
    assert result.exit_code == 1 and "needs backend='onnx'" in result.output
