"""ConvMixer: shapes, parameter count, gate range, numpy inference, save/load, and training lowering
the held-out loss."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from lmk_rag.errors import ModelNotFoundError
from lmk_rag.static import StaticTokenEncoder
from lmk_rag.static.mixer import MixerWeights
from lmk_rag.static.mixer_torch import ConvMixer


def _tokens(batch: int, length: int, dim: int, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.nn.functional.normalize(torch.randn(batch, length, dim, generator=generator), dim=-1)


def test_shapes_and_parameter_count() -> None:
    mixer = ConvMixer(256)
    out = mixer(_tokens(3, 11, 256))
    assert out.shape == (3, 11, 256)
    assert torch.allclose(out.norm(dim=-1), torch.ones(3, 11), atol=1e-5)
    # depthwise conv (256*7 + 256) + linear (256*256 + 256) + gate (256*256 + 256)
    assert mixer.parameter_count == 256 * 8 + 2 * (256 * 256 + 256) == 133_632
    with pytest.raises(ValueError, match="odd"):
        ConvMixer(16, kernel_size=4)


def test_gate_is_strictly_between_zero_and_one() -> None:
    mixer = ConvMixer(32)
    torch.nn.init.normal_(mixer.gate.weight, std=1.0)
    gates = mixer.gates(_tokens(2, 50, 32))  # normalised inputs, as the encoder feeds it
    assert gates.min() > 0 and gates.max() < 1
    assert gates.std() > 0.1  # the gate depends on the input token


def test_padding_does_not_leak_and_numpy_matches_torch() -> None:
    mixer = ConvMixer(16, kernel_size=7)
    torch.nn.init.normal_(mixer.gate.bias)
    x = _tokens(1, 9, 16)
    padded = torch.cat([x, torch.randn(1, 4, 16)], dim=1)
    mask = torch.cat([torch.ones(1, 9), torch.zeros(1, 4)], dim=1)
    with torch.no_grad():
        assert torch.allclose(mixer(x)[0], mixer(padded, mask)[0, :9], atol=1e-6)
        expected = mixer(x)[0].numpy()
    assert np.allclose(mixer.to_numpy().mix(x[0].numpy()), expected, atol=1e-5)


def test_save_load_round_trip_gives_identical_outputs(tmp_path: Path) -> None:
    mixer = ConvMixer(24, kernel_size=5)
    torch.nn.init.normal_(mixer.linear.weight)
    folder = mixer.save(tmp_path / "mixer")
    assert json.loads((folder / "mixer_config.json").read_text())["kernel_size"] == 5
    loaded = ConvMixer.load(folder)
    x = _tokens(2, 13, 24)
    with torch.no_grad():
        assert torch.equal(mixer.eval()(x), loaded(x))
    weights = MixerWeights.load(folder)
    assert np.array_equal(weights.mix(x[0].numpy()), mixer.to_numpy().mix(x[0].numpy()))
    assert weights.fingerprint() == mixer.to_numpy().fingerprint()


def test_the_shipped_mixer_loads_the_weights_the_torch_reader_gave() -> None:
    from safetensors.torch import load_file

    from lmk_rag.static.mixer import SHIPPED_MIXER_DIR, WEIGHTS_FILE

    loaded = ConvMixer.load(SHIPPED_MIXER_DIR).state_dict()
    old = load_file(str(SHIPPED_MIXER_DIR / WEIGHTS_FILE))  # what ConvMixer.load read before it read MixerWeights
    assert loaded.keys() == old.keys() and all(torch.equal(loaded[name], old[name]) for name in old)
    with pytest.raises(ModelNotFoundError, match=r"mixer_config\.json"):
        ConvMixer.load(SHIPPED_MIXER_DIR.parent)


@pytest.mark.slow
def test_a_few_training_steps_lower_the_held_out_loss(static_encoder, fixture_data, tmp_path, monkeypatch) -> None:
    from lmk_rag.splits import split_heldout
    from lmk_rag.static.train import TrainConfig, load_pairs, train_mixer

    monkeypatch.setenv("LMK_RAG_CACHE", str(tmp_path))  # teacher features of this run go to tmp
    pairs = load_pairs(fixture_data / "manpages-train" / "pairs.jsonl")[:96]
    train, val = split_heldout(pairs, 1 / 3, seed=0)
    config = TrainConfig(objective="both", max_steps=12, batch_size=16, learning_rate=5e-3, max_tokens=48,
                         eval_every=6)
    result = train_mixer(train, val, static_encoder, config)
    losses = [row["val_loss"] for row in result.history]
    assert [row["step"] for row in result.history] == [0, 6, 12]
    assert losses[-1] < losses[0]  # held-out pairs: lower than the untrained mixer's loss
    assert result.best_step == config.max_steps and result.mixer.parameter_count == 133_632
    mixed = StaticTokenEncoder(static_encoder.vectors, mixer=result.mixer)
    assert mixed.encode_query_tokens("list directory contents").shape == (3, 256)


@pytest.mark.parametrize(
    "kwargs, words",
    [({"max_steps": 0}, "max_steps"), ({"batch_size": 1}, "batch_size"), ({"learning_rate": float("nan")},
     "learning_rate"), ({"learning_rate": -1.0}, "learning_rate"), ({"temperature": 0.0}, "temperature"),
     ({"objective": "nope"}, "objective"), ({"eval_every": -1}, "eval_every"), ({"max_tokens": 0}, "max_tokens")],
    ids=lambda value: str(value),
)
def test_training_settings_no_run_can_use_are_refused(kwargs, words) -> None:
    from lmk_rag.errors import InvalidInputError
    from lmk_rag.static.train import TrainConfig

    with pytest.raises(InvalidInputError, match=words):
        TrainConfig(**kwargs)


def test_distilling_to_no_dimensions_is_refused(tmp_path) -> None:
    from lmk_rag.errors import InvalidInputError
    from lmk_rag.static.model import distill_static

    with pytest.raises(InvalidInputError, match="pca_dims"):
        distill_static(output=tmp_path / "d0", pca_dims=0)
    assert not (tmp_path / "d0").exists()
