"""The linear projection: which encoders get the shipped one, what it does to the vectors, and its typed errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from lmk_rag.encoder import LandmarkEncoder
from lmk_rag.encoder.projection import SHIPPED_PROJECTION_DIR, LinearProjection
from lmk_rag.errors import InvalidInputError, ModelNotFoundError
from lmk_rag.vector_math import l2_normalize

PAGE = (
    "tar saves many files together into a single tape or disk archive, and can restore individual files from "
    "the archive. "
) * 6


@pytest.fixture(scope="module")
def plain() -> LandmarkEncoder:
    return LandmarkEncoder(projection=None)


@pytest.fixture(scope="module")
def projected() -> LandmarkEncoder:
    return LandmarkEncoder()


def test_the_packaged_minilm_gets_the_shipped_projection_by_default(projected, plain) -> None:
    assert projected.settings["projection"] == "shipped" and projected.projection is not None
    assert plain.settings["projection"] is None and plain.projection is None
    assert projected.fingerprint != plain.fingerprint
    assert LandmarkEncoder(**projected.settings).fingerprint == projected.fingerprint
    assert LandmarkEncoder(**plain.settings).fingerprint == plain.fingerprint


def test_projected_vectors_are_the_plain_ones_through_the_matrix(projected, plain) -> None:
    weight = LinearProjection.load(SHIPPED_PROJECTION_DIR).weight
    ours, theirs = projected.encode_documents(PAGE), plain.encode_documents(PAGE)
    assert ours.spans == theirs.spans and ours.token_counts == theirs.token_counts
    np.testing.assert_allclose(ours.chunk_vectors, l2_normalize(theirs.chunk_vectors @ weight.T), atol=1e-5)
    np.testing.assert_allclose(ours.vector, l2_normalize(theirs.vector @ weight.T), atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(ours.chunk_vectors, axis=1), 1.0, atol=1e-5)
    assert np.min(np.sum(ours.chunk_vectors * theirs.chunk_vectors, axis=1)) < 0.99  # it does move them
    np.testing.assert_allclose(projected.empty_text_vector(), l2_normalize(plain.empty_text_vector() @ weight.T),
                               atol=1e-5)


def test_auto_means_no_projection_for_other_models_and_for_landmark_chunk_vectors(tiny_model: Path) -> None:
    assert LandmarkEncoder(model_name=tiny_model).settings["projection"] is None
    assert LandmarkEncoder(chunk_vector="landmark").settings["projection"] is None


def test_an_projection_folder_loads_and_is_recorded(tmp_path: Path) -> None:
    folder = tmp_path / "my-projection"
    shutil.copytree(SHIPPED_PROJECTION_DIR, folder)
    encoder = LandmarkEncoder(projection=folder)
    assert encoder.settings["projection"] == str(folder)
    assert encoder.fingerprint == LandmarkEncoder(projection=str(folder)).fingerprint


@pytest.mark.parametrize(
    ("setting", "error", "match"),
    [
        (3, InvalidInputError, "projection must be"),
        ("no-such-folder", ModelNotFoundError, "no projection in no-such-folder"),
    ],
)
def test_bad_projection_settings_are_typed_errors(setting, error, match) -> None:
    with pytest.raises(error, match=match):
        LandmarkEncoder(projection=setting)


def test_an_projection_of_another_model_or_chunk_vector_is_refused(tiny_model: Path) -> None:
    with pytest.raises(InvalidInputError, match="trained for another model"):
        LandmarkEncoder(model_name=tiny_model, projection="shipped")
    with pytest.raises(InvalidInputError, match="trained on 'mean' chunk vectors"):
        LandmarkEncoder(chunk_vector="landmark", projection="shipped")


def test_a_damaged_projection_is_a_typed_error(tmp_path: Path) -> None:
    config = {"dim": 4, "model_digest": "x", "chunk_vector": "mean"}
    LinearProjection(np.eye(3, dtype=np.float32), config).save(tmp_path)
    with pytest.raises(InvalidInputError, match=r"not a \(4, 4\) 'weight' matrix"):
        LinearProjection.load(tmp_path)
