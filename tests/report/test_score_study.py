"""benchmarks/studies/score_study.py re-mixes the shipped projection's fit: at the shipped mix it is the shipped
projection, at 0 it is none, and the fit itself lies twice as far from the identity as the shipped mix of 0.5."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lmk_rag.encoder.projection import SHIPPED_PROJECTION_DIR, LinearProjection


@pytest.fixture(scope="module")
def score_study(study_module):
    return study_module("score_study")


def test_the_shipped_fit_re_mixed(score_study, tmp_path: Path) -> None:
    shipped = LinearProjection.load(SHIPPED_PROJECTION_DIR)
    mix = shipped.config["training"]["mix"]
    same = LinearProjection.load(score_study.remixed_projection(mix, tmp_path))
    np.testing.assert_allclose(same.weight, shipped.weight, atol=1e-6)
    assert same.config["model_digest"] == shipped.config["model_digest"]

    identity = np.eye(shipped.dim, dtype=np.float32)
    fit = LinearProjection.load(score_study.remixed_projection(1.0, tmp_path))
    np.testing.assert_allclose(fit.weight - identity, (shipped.weight - identity) / mix, atol=1e-6)
    assert fit.config["training"]["mix"] == 1.0
    assert not np.allclose(fit.weight, shipped.weight, atol=1e-4)

    assert score_study.remixed_projection(0.0, tmp_path) is None
