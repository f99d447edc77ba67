"""A new store's encoder runs on the machine's fastest quality-safe runtime (issue 63 item 3): torch bfloat16 on a CPU
that multiplies bfloat16 natively, else the encoder's defaults; the store records it, so a reopen on a machine of
another kind encodes with the same runtime, and a read-only handle of a bfloat16 store encodes queries with the ONNX
float32 twin (no torch); ``encoder=LandmarkEncoder()`` (torch float32) is one argument away.

The machine's kind is its CPU flags: the tests set them (the encoder module's ``cpu_flags``) to be both kinds on one
machine; the encoders, stores and searches are real (all-MiniLM-L6-v2)."""

from __future__ import annotations

import pytest
import torch

from lmk_rag.encoder import LandmarkEncoder, runtime
from lmk_rag.encoder import encoder as encoder_module
from lmk_rag.paths import CACHE_ENV
from lmk_rag.store import LandmarkStore

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="the rule is for new stores on a CPU")

BFLOAT16_CPU = frozenset({"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"})
AVX2_CPU = frozenset({"avx2", "fma"})


@pytest.mark.parametrize(("flags", "expected"), [
    (BFLOAT16_CPU, {"backend": "torch", "dtype": "bfloat16"}),
    (frozenset({"avx512_bf16"}), {"backend": "torch", "dtype": "bfloat16"}),
    (AVX2_CPU, {}),
    (frozenset(), {}),
])
def test_the_runtime_follows_the_cpu(monkeypatch, flags, expected) -> None:
    monkeypatch.setattr(encoder_module, "cpu_flags", lambda: flags)
    assert encoder_module.new_store_runtime() == expected


def test_the_cpu_flags_are_linuxs() -> None:
    flags = runtime.cpu_flags()
    assert isinstance(flags, frozenset)
    if flags:  # Linux: every x86-64 CPU lists sse2, every arm64 one fp or asimd
        assert flags & {"sse2", "fp", "asimd"}


def test_a_new_store_records_its_runtime_and_reopens_with_it_elsewhere(tmp_path, monkeypatch, docs, onnx_encoders,
                                                                      onnx_cache) -> None:
    monkeypatch.setenv(CACHE_ENV, str(onnx_cache))  # the session's exports: the read-only handle's twin
    pages = list(docs.items())[:3]
    query = pages[1][1].split(". ")[0][:200]
    monkeypatch.setattr(encoder_module, "cpu_flags", lambda: BFLOAT16_CPU)
    with LandmarkStore(tmp_path / "new") as store:
        store.upsert_documents(pages)
        recorded = store.settings["encoder"]
        assert recorded["settings"]["dtype"] == "bfloat16" and "backend" not in recorded["settings"]
        assert recorded["queries"] == {"backend": "onnx", "dtype": "float32",
                                       "fingerprint": store.encoder.fingerprint_with("onnx", "float32")}
        assert store.encoder.dtype == "bfloat16" and store.encoder.backend == "torch"
        hits = [hit.doc_id for hit in store.search(query, k=3)]
    assert hits[0] == pages[1][0]
    monkeypatch.setattr(encoder_module, "cpu_flags", lambda: AVX2_CPU)  # reopened on a machine of another kind
    with LandmarkStore(tmp_path / "new") as store:
        assert store.encoder.dtype == "bfloat16"
        assert [hit.doc_id for hit in store.search(query, k=3)] == hits
    with LandmarkStore(tmp_path / "new", read_only=True) as store:  # queries on the ONNX float32 twin
        assert store.encoder.backend == "onnx" and store.encoder.dtype == "auto"
        assert [hit.doc_id for hit in store.search(query, k=3)] == hits
    with LandmarkStore(tmp_path / "avx2") as store:  # a new store there keeps the encoder's defaults
        store.upsert_documents(pages[:1])
        assert not {"backend", "dtype"} & set(store.settings["encoder"]["settings"])


def test_torch_float32_is_one_argument_away(tmp_path, monkeypatch, docs) -> None:
    monkeypatch.setattr(encoder_module, "cpu_flags", lambda: BFLOAT16_CPU)
    with LandmarkStore(tmp_path / "float32", encoder=LandmarkEncoder()) as store:
        store.upsert_documents(list(docs.items())[:1])
        assert store.encoder.dtype == "auto"
        assert not {"backend", "dtype"} & set(store.settings["encoder"]["settings"])
